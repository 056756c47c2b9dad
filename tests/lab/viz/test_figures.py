"""Figure builders: the drawn numbers are the trace's (or the snapshot's) numbers."""

from __future__ import annotations

import math
import re

import pytest
from numpy.testing import assert_allclose

from minivllm.lab.metrics.summary import STALL_FACTOR
from minivllm.lab.sim.run import run_workload
from minivllm.lab.viz import figures as F
from minivllm.lab.viz.figures.blocks import CATEGORIES, category
from minivllm.lab.viz.figures.gantt import BARS, LABELS, median_step
from minivllm.lab.viz.figures.theme import OKABE_ITO
from minivllm.metrics.trace import EngineTrace, RequestRecord
from tests.helpers.traces import step
from tests.helpers.viz import make_engine, requests


def bars(fig, name):
    (tr,) = [t for t in fig.data if t.name == name]
    return tr


def test_gantt_bars_equal_the_segments(hand_trace):
    fig = F.latency_gantt(hand_trace)
    assert [t.name for t in fig.data] == [LABELS[k] for k in BARS] + ["step boundary"]
    prefill = bars(fig, "prefill chunk")
    rows = {0: "a", 1: "b"}
    got = sorted((rows[y], b, x) for y, b, x in zip(prefill.y, prefill.base, prefill.x))
    assert got == [("a", 1000.0, 1000.0), ("a", 2000.0, 1000.0), ("b", 1000.0, 1000.0), ("b", 3000.0, 1000.0)]
    gap = bars(fig, "preempted")
    assert list(gap.y) == [1] and list(gap.base) == [2000.0] and list(gap.x) == [1000.0]
    queued = bars(fig, "queued")
    assert sorted(zip(queued.y, queued.base, queued.x)) == [(0, 0.0, 1000.0), (1, 500.0, 500.0)]
    assert list(fig.layout.yaxis.ticktext) == ["a", "b"]
    boundary = fig.data[-1]
    assert [x for x in boundary.x if not math.isnan(x)] == [2000.0, 2000.0, 3000.0, 3000.0, 4000.0, 4000.0]
    assert list(prefill.hovertext[:1]) in (["a"], ["b"]) and prefill.customdata[0][1] in (4, 2, 1)


def test_gantt_marks_stalled_decode_steps():
    engine = make_engine(budget=512)
    run_workload(engine, requests([("chat", 8, 30, 0.0), ("long", 480, 2, 0.05)]))  # that step: 5.8x the median
    t = engine.trace
    fig = F.latency_gantt(t)
    stalled = bars(fig, LABELS["stalled"])
    threshold = STALL_FACTOR * median_step(t) * 1e3
    assert len(stalled.x) >= 1 and min(stalled.x) > threshold  # the step that ran the 480-token prompt
    assert all(x <= threshold for x in bars(fig, "decode step").x)


def test_gantt_stall_is_the_glossary_stall():
    """One definition (chapters/glossary.md): a decode step > 5x the run's median step; 4x is not a stall."""
    assert STALL_FACTOR == 5.0 and "5x median step" in LABELS["stalled"]
    t = EngineTrace()
    durations = [1.0, 1.0, 1.0, 1.0, 4.0, 1.0, 6.0, 1.0]  # median 1.0: the 4 s step is 4x, the 6 s step 6x
    ends = [sum(durations[: i + 1]) for i in range(len(durations))]
    t.requests = {"a": RequestRecord("a", 0.0, 8, 0.0, ends, ends[-1], "length")}
    t.steps = [
        step(i, end - d, end, prefill={"a": 8} if i == 0 else None, decode=None if i == 0 else {"a": 1})
        for i, (d, end) in enumerate(zip(durations, ends))
    ]
    fig = F.latency_gantt(t)
    assert list(bars(fig, LABELS["stalled"]).x) == [6000.0]
    assert 4000.0 in list(bars(fig, "decode step").x)


def test_gantt_compare_shares_rows_and_time_axis(scene_trace):
    other = make_engine(budget=512, enable_chunked_prefill=False)
    run_workload(
        other,
        requests([("chat0", 20, 12, 0.0), ("chat1", 24, 12, 0.0), ("chat2", 16, 10, 0.005), ("long", 150, 4, 0.02)]),
    )
    fig = F.gantt_compare({"chunked": scene_trace, "unchunked": other.trace})
    assert [a.text for a in fig.layout.annotations] == ["chunked", "unchunked"]
    assert fig.layout.xaxis.range == fig.layout.xaxis2.range
    legend = [t.legendgroup for t in fig.data if t.showlegend]
    assert len(legend) == len(set(legend)) and "decode" in legend  # once per kind, not per panel


def test_chunk_schedule_columns_equal_the_steps(scene_trace):
    fig = F.chunk_schedule(scene_trace)
    decode, spec, chunks, budget = fig.data
    steps = scene_trace.steps
    assert list(decode.y) == [sum(s.decode_tokens.values()) for s in steps]
    assert list(budget.y) == [64] * len(steps)
    for s in steps:  # every prefill chunk drawn, stacked above the decode tokens
        mine = [(b, y, r[0]) for x, b, y, r in zip(chunks.x, chunks.base, chunks.y, chunks.customdata) if x == s.step]
        assert sorted(r for _, _, r in mine) == sorted(s.prefill_tokens)
        assert sum(y for _, y, _ in mine) == sum(s.prefill_tokens.values())
        top = max((b + y for b, y, _ in mine), default=0)
        assert top <= 64 and (not mine or top == s.num_scheduled_tokens)


def test_kv_block_map_cells_equal_the_snapshot():
    engine = make_engine(budget=64, blocks=24, record=True)
    shared = list(range(7, 7 + 32))  # two full blocks of a shared prefix
    for rid, tail in (("x", [1, 2, 3]), ("y", [4, 5])):
        engine.add_request(rid, shared + tail, requests([(rid, 1, 3, 0.0)])[0].sampling_params, arrival_time=0.0)
    engine.step()
    engine.step()
    s = engine.trace.steps[-1]
    fig = F.kv_block_map(s.block_pool, s.block_tables, ncols=8)
    z = fig.data[0].z
    for block in s.block_pool:
        r, c = divmod(block["block_id"], 8)
        assert z[r][c] == category(block)
        assert fig.data[0].text[r][c] == str(block["block_id"])
    shared_ids = set(s.block_tables["x"]) & set(s.block_tables["y"])
    assert len(shared_ids) == 2
    for b in shared_ids:
        assert z[b // 8][b % 8] == CATEGORIES.index("shared")
        assert "owners: x, y" in fig.data[0].hovertext[b // 8][b % 8]
    assert z[0][0] == CATEGORIES.index("null")
    legend = {t.name.split(" (")[0]: int(t.name.split("(")[1][:-1]) for t in fig.data[2:]}
    assert sum(legend.values()) == 24 and legend["shared"] == 2


def test_kv_block_map_chain_and_highlight():
    snap = [
        {
            "block_id": i,
            "ref_cnt": int(i in (1, 2)),
            "hash": 1000 + i if i < 4 else None,
            "free": i not in (0, 1, 2),
            "null": i == 0,
        }
        for i in range(6)
    ]
    fig = F.kv_block_map(snap, {"r": [1, 2]}, ncols=3, highlight=[2])
    hover = fig.data[0].hovertext
    assert "r[0]: root → #1 → #2" in hover[0][1] and "r[1]: #1 → #2 → end" in hover[0][2]
    assert "cached, free" in hover[1][0]  # block 3: free but still hashed
    assert list(fig.data[1].x) == [2] and list(fig.data[1].y) == [0]
    cached, free = CATEGORIES.index("cached, free"), CATEGORIES.index("free")
    assert list(fig.data[0].z[1]) == [cached, free, free]  # blocks 3, 4, 5


def test_recovery_timeline_numbers(hand_trace):
    fig = F.recovery_timeline(hand_trace, block_size=4)
    dropped = bars(fig, "K/V dropped by preemption")
    assert list(dropped.x) == [1] and list(dropped.y) == [-4]
    back = [t for t in fig.data if t.name == "recovered from the prefix cache (A)"]
    assert list(back[0].x) == [2] and list(back[0].y) == [4]  # per step
    assert list(back[1].x) == [4]  # per preemption
    assert "path A" in fig.layout.annotations[-1].text


def test_chunk_size_curves_from_dicts_and_bench_results():
    metrics = {
        b: {
            "ttft_p50": 1 / b,
            "ttft_p99": 2 / b,
            "tpot_p50": b * 1e-5,
            "tpot_p99": b * 2e-5,
            "output_throughput": 100 - abs(b - 256) / 10,
            "num_prompt_tokens": 900,
            "num_output_tokens": 100,
            "num_steps": 1000 // min(b, 100),
        }
        for b in (512, 64, 256, 1024)
    }
    fig = F.chunk_size_curves(metrics)
    ttft = bars(fig, "TTFT p50")
    assert list(ttft.x) == [64, 256, 512, 1024]
    assert_allclose(ttft.y, [1e3 / b for b in (64, 256, 512, 1024)])
    assert_allclose(bars(fig, "tokens per step").y, [1000 / 15, 100, 100, 100])  # 1000 // 64 = 15 steps
    assert fig.layout.xaxis.type == "log"
    # Titles say what the data does: throughput here is 74.4, 100, 74.4, 23.2 tokens/s.
    titles = [a.text for a in fig.layout.annotations]
    assert titles == [
        "TTFT p50: falls, 15.6 → 0.977",
        "TPOT p50: rises, 0.64 → 10.2",
        "output throughput: falls, 80.8 → 23.2; highest at 256",
        "mean tokens per step: rises, 66.7 → 100",
    ]
    bench = [{"point": {"max_num_batched_tokens": b}, "metrics": m} for b, m in metrics.items()]
    assert list(F.chunk_size_curves(bench).data[0].y) == list(ttft.y)
    with pytest.raises(ValueError, match="no value for 'max_num_batched_tokens'"):
        F.sweep_points([{"point": {}, "metrics": {}}])


def test_chunk_size_curves_plot_the_utilisation_when_every_point_has_one():
    util = {64: 0.17, 256: 0.21, 1024: 0.222, 4096: 0.222}
    metrics = {
        b: {"ttft_p50": 1 / b, "tpot_p50": b * 1e-5, "output_throughput": 800.0, "utilisation": u}
        for b, u in util.items()
    }
    fig = F.chunk_size_curves(metrics)
    assert_allclose(bars(fig, "% of peak FLOP/s").y, [17, 21, 22.2, 22.2])
    assert fig.layout.annotations[3].text == (
        "compute utilisation, % of peak: rises, 17 → 22.2; levels off from 256 (within ±5%)"
    )
    metrics[64].pop("utilisation")  # one point without: the old panel, titled as what it is
    titles = [a.text for a in F.chunk_size_curves(metrics).layout.annotations]
    assert titles[3].startswith("mean tokens per step")


def test_trend_says_where_a_curve_levels_off_only_when_asked():
    from minivllm.lab.viz.figures.curves import trend

    x = [64, 128, 256, 512, 1024]
    assert trend(x, [10, 20, 30, 31, 30.5], plateau=True) == "rises, 10 → 30.5; levels off from 256 (within ±5%)"
    assert trend(x, [10, 20, 30, 31, 30.5]) == "rises, 10 → 30.5"
    assert trend(x, [10, 20, 30, 40, 50], plateau=True) == "rises, 10 → 50"  # never levels off


def test_cdfs_and_queue_series(scene_trace):
    fig = F.latency_cdfs({"run": scene_trace})
    ttft = sorted(r.ttft * 1e3 for r in scene_trace.requests.values())
    assert_allclose(fig.data[0].x, ttft)
    assert fig.data[0].y[-1] == 1.0
    q = F.queue_kv_over_time(scene_trace)
    assert list(q.data[1].y) == [s.num_waiting for s in scene_trace.steps]
    assert_allclose(q.data[2].y, [s.kv_usage for s in scene_trace.steps])
    assert_allclose(q.data[0].x, [s.end * 1e3 for s in scene_trace.steps])


@pytest.mark.parametrize(
    "build",
    [
        F.latency_gantt,
        F.chunk_schedule,
        F.recovery_timeline,
        F.latency_cdfs,
        F.queue_kv_over_time,
        lambda t: F.gantt_compare({"a": t}),
        lambda t: F.kv_block_map_at(t, 0),
        lambda t: F.chunk_size_curves({}),
    ],
)
def test_empty_inputs_give_a_message_not_a_traceback(build):
    fig = build(EngineTrace())
    assert len(fig.data) == 0 and fig.layout.annotations[0].text


def test_theme_is_transparent_labelled_and_okabe_ito(scene_trace):
    palette = set(OKABE_ITO.values())
    for fig in (F.latency_gantt(scene_trace), F.chunk_schedule(scene_trace), F.queue_kv_over_time(scene_trace)):
        assert fig.layout.paper_bgcolor == "rgba(0,0,0,0)" and fig.layout.plot_bgcolor == "rgba(0,0,0,0)"
        axes = fig.layout.to_plotly_json()
        x_titles = [ax.get("title", {}).get("text") for name, ax in axes.items() if name.startswith("xaxis")]
        assert any(t and ("(ms)" in t or "step" in t) for t in x_titles)
        colours = {getattr(t.marker, "color", None) for t in fig.data if t.type == "bar"}
        colours |= {t.line.color for t in fig.data if t.type == "scatter" and t.line.color}
        assert all(c in palette or c.startswith("rgba") or c.startswith("#") for c in colours)
        assert colours & palette
    assert math.isfinite(median_step(scene_trace))


def test_curve_titles_never_claim_a_shape_the_data_lacks():
    from minivllm.lab.viz.figures.curves import trend

    x = [64, 128, 256, 512]
    assert trend(x, [100, 101, 99, 100.5]) == "flat (within ±5%)"  # what the book's "inverted U" title hid
    assert trend(x, [1, 2, 3, 4]) == "rises, 1 → 4"
    assert trend(x, [4600, 2000, 1400, 1650]) == "falls, 4.6k → 1.65k; lowest at 256"
    assert trend(x, [570, 640, 636, 630]) == "rises, 570 → 630"  # 640 is within 5% of the mean of the end
    assert trend(x, [1, 3, 3, 1]) == "ends where it starts, 1 → 1; highest at 128"
    assert trend(x[:1], [5]) == "one point"


def _hover(template: str, point: dict) -> str:
    """plotly.js's hovertemplate filled in for one point: ``%{x}`` of a bar drawn from ``base`` is where the
    bar ends (base + size) in plotly.js's hover, so ``point`` carries that, as the browser does."""
    import re

    def value(m: re.Match) -> str:
        key, fmt = m.group(1), m.group(2) or ""
        v = point[key] if "[" not in key else point[key.split("[")[0]][int(key.split("[")[1][:-1])]
        return format(v, fmt[1:]) if fmt and isinstance(v, float | int) else str(v)

    return re.sub(r"%\{([a-z]+(?:\[\d\])?)(:[^}]*)?\}", value, template.replace("<extra></extra>", ""))


@pytest.mark.parametrize("build", ["gantt", "schedule"])
def test_a_bar_drawn_from_base_hovers_its_own_size(scene_trace, build):
    """Hovering a Gantt bar shows its start, end and duration; a stacked chunk its own tokens (issue: the
    Gantt showed a bar's end time, e.g. 19,470 ms, as its duration)."""
    fig = F.latency_gantt(scene_trace) if build == "gantt" else F.chunk_schedule(scene_trace)
    checked = 0
    for tr in fig.data:
        if tr.type != "bar" or tr.base is None or not len(tr.base):
            continue
        size_axis = "x" if tr.orientation == "h" else "y"
        for i in range(len(tr.base)):
            size, base = float((tr.x if size_axis == "x" else tr.y)[i]), float(tr.base[i])
            point = {"x": tr.x[i], "y": tr.y[i], "base": base, "customdata": tr.customdata[i], "hovertext": ""}
            point[size_axis] = base + size  # what plotly.js puts in %{x} / %{y} for this bar
            text = _hover(tr.hovertemplate, point)
            shown = [float(v) for v in re.findall(r"\d+(?:\.\d+)?", text.split("<br>", 1)[-1])]
            assert any(abs(v - size) < 0.051 for v in shown), f"{tr.name}: {text!r} does not show its size {size}"
            if build == "gantt":
                assert any(abs(v - base) < 0.051 for v in shown), f"{tr.name}: {text!r} has no start {base}"
                assert any(abs(v - (base + size)) < 0.051 for v in shown), f"{tr.name}: {text!r} has no end"
            checked += 1
    assert checked


def test_memory_panels_start_at_zero():
    """KV blocks 545 -> 600 drawn from 545 looked like a tenfold rise: every panel's y axis starts at 0."""
    rows = [
        {"budget": b, "kv_blocks": k, "output_throughput": t, "num_preemptions": p}
        for b, k, t, p in ((512, 600, 700.0, 0), (2048, 580, 760.0, 1), (8192, 545, 727.0, 3))
    ]
    fig = F.memory_curves(rows)
    axes = [fig.layout[name] for name in ("yaxis", "yaxis2", "yaxis3")]
    assert [a.rangemode for a in axes] == ["tozero"] * 3
