"""Widget callbacks driven from pytest: set .value / click, then read the figures and state() (no kernel)."""

from __future__ import annotations

import pytest

from minivllm.lab.sim.run import TOY_COST_MODEL, make_runner, run_workload, simulate
from minivllm.lab.viz.figures.blocks import LABEL_LIMIT, MARGIN_X_PX, MIN_CELL_PX
from minivllm.lab.viz.widgets.explorer import ConfigExplorer
from minivllm.lab.viz.widgets.player import OUTPUT_WIDTH, PLAYER_WIDTH, SCREEN_WIDTH, StepPlayer
from minivllm.lab.viz.widgets.recovery_app import RecoveryExplorer
from minivllm.metrics.trace import EngineTrace
from tests.helpers.viz import make_engine, requests

SMALL = [("chat0", 20, 12, 0.0), ("chat1", 24, 12, 0.0), ("long", 300, 3, 0.01)]


@pytest.fixture
def pool_trace() -> EngineTrace:
    engine = make_engine(budget=64, blocks=40, record=True)
    run_workload(engine, requests([("a", 40, 8, 0.0), ("b", 70, 8, 0.0), ("c", 30, 8, 0.01)]))
    return engine.trace


def test_player_slider_drives_figures(pool_trace):
    p = StepPlayer(pool_trace)
    assert p.slider.max == len(pool_trace.steps) - 1
    p.slider.value = 2
    s = pool_trace.steps[2]
    decode, spec, prefill = p.step_fig.data
    assert dict(zip(prefill.y, prefill.x)) == {r: s.prefill_tokens.get(r, 0) for r in prefill.y}
    assert sum(prefill.x) + sum(decode.x) + sum(spec.x) == s.num_scheduled_tokens
    assert p.step_fig.layout.title.text.startswith(f"step 2: {s.num_scheduled_tokens}/64 tokens")
    assert list(p.schedule.data[-1].x) == [2, 2]
    z = p.blocks.data[0].z
    for block in s.block_pool:
        assert z[block["block_id"] // 16][block["block_id"] % 16] is not None
    st = p.state()
    assert st["step"] == 2 and st["tokens"] == f"{s.num_scheduled_tokens}/64"
    assert sum(st["blocks"].values()) == 40
    assert p.summary().startswith("step 2:")


def test_player_play_is_linked_and_one_message_per_tick(pool_trace, monkeypatch):
    p = StepPlayer(pool_trace)
    p.play.value = 3
    assert p.slider.value == 3 and p.state()["step"] == 3
    sent = []
    orig = p.step_fig._send_update_msg
    monkeypatch.setattr(p.step_fig, "_send_update_msg", lambda *a, **k: (sent.append(a), orig(*a, **k)))
    p.slider.value = 4
    assert len(sent) == 1


def test_player_on_an_empty_trace_says_so():
    p = StepPlayer(EngineTrace())
    assert p.slider.disabled and p.play.disabled
    assert "no steps" in p.info.value and "no steps" in p.summary()
    assert p.state()["step"] is None


@pytest.mark.parametrize("num_blocks", [12, 40, 300, 1200])
def test_player_fits_a_1366_px_screen_with_every_block_drawn(num_blocks):
    engine = make_engine(budget=64, blocks=num_blocks, record=True)
    run_workload(engine, requests([("a", 40, 4, 0.0), ("b", 70, 4, 0.0)]))
    p = StepPlayer(engine.trace)
    assert p.schedule.layout.width <= PLAYER_WIDTH <= OUTPUT_WIDTH < SCREEN_WIDTH  # JupyterLab takes the rest
    width = p.blocks.layout.width
    assert p.step_fig.layout.width + width <= PLAYER_WIDTH
    z = p.blocks.data[0].z
    ncols = len(z[0])
    assert sum(v is not None for row in z for v in row) == num_blocks  # every block has its cell
    cell = (width - MARGIN_X_PX) / ncols  # the margins leave this much per column
    assert cell >= MIN_CELL_PX[num_blocks > LABEL_LIMIT]
    p.slider.value = p.slider.max
    assert len(p.blocks.data[0].z[0]) == ncols  # the same grid after a step
    assert (
        p.step_fig.layout.title.text == f"step {p.slider.max}: {engine.trace.steps[-1].num_scheduled_tokens}/64 tokens"
    )


def test_explorer_reruns_on_every_control():
    e = ConfigExplorer(requests(SMALL), preset=None, max_model_len=512, block_size=16)
    assert e.state()["ok"] and e.settings["max_num_batched_tokens"] == 512
    gantt_before = list(e.fig.data[1].x)
    e.budget.value = 64
    st = e.state()
    assert st["ok"] and st["settings"]["max_num_batched_tokens"] == 64
    prefill = e.fig.data[1]  # "prefill chunk" bars: the 300-token prompt now takes several steps
    assert len(prefill.x) > len(gantt_before)
    assert "TTFT p99" in e.metrics_html.value and "TTFT p99" in e.summary()
    e.chunked.value = False
    assert e.settings["max_num_batched_tokens"] == 512 and "raised" in e.message.value and e.state()["ok"]
    assert e.threshold.disabled
    e.chunked.value = True
    e.threshold.value = 16
    assert e.settings["long_prefill_token_threshold"] == 16 and e.state()["ok"]
    title = e.fig.layout.title.text
    e.policy.value = "priority"
    assert e.settings["policy"] == "priority" and e.state()["ok"]
    assert e.fig.layout.title.text != title and e.fig.layout.title.text.endswith("priority")  # the figure says so


def test_explorer_offers_only_settings_the_engine_accepts():
    e = ConfigExplorer(requests(SMALL), preset=None, max_model_len=4096, max_num_seqs=16)
    assert min(e.budget.options) == 16 and 1 not in e.budget.options  # budget >= max_num_seqs
    assert min(e.num_blocks.options) == 300  # (300 - 1) x 16 >= 4096 > (200 - 1) x 16
    for control in (e.budget, e.threshold, e.num_blocks):
        for value in control.options:
            control.value = value
            assert e.state()["ok"], (control.description, value, e.state()["message"])
        control.value = control.options[len(control.options) // 2]
    small = ConfigExplorer(requests(SMALL), preset=None, max_model_len=512, max_num_seqs=64)
    assert min(small.budget.options) == 64 and max(small.threshold.options) == 512
    with pytest.raises(ValueError, match="no value of max_num_batched_tokens is valid with .*max_num_seqs=10000"):
        ConfigExplorer(requests(SMALL), preset=None, max_model_len=512, max_num_seqs=10_000)


def test_explorer_shows_a_refused_setting_and_clears_it_on_a_valid_one():
    e = ConfigExplorer(requests(SMALL), preset=None, max_model_len=512)
    e.fixed["max_num_seqs"] = 10_000  # a fixed setting changed after construction: no slider can fix it
    e.budget.value = 1024
    st = e.state()
    expected = "max_num_batched_tokens (1024) must be greater than or equal to max_num_seqs (10000)"
    assert not st["ok"] and expected in st["message"] and expected in e.message.value
    assert len(e.fig.data) == 0 and expected in e.fig.layout.annotations[0].text
    assert st["metrics"] == {} and expected in e.summary()
    e.fixed["max_num_seqs"] = 16
    e.budget.value = 256  # and it recovers: the Gantt, no error left on it or above it
    assert e.state()["ok"] and len(e.fig.data) == 6
    assert "Invalid" not in e.message.value
    assert not any("Invalid" in (a.text or "") for a in e.fig.layout.annotations)


def test_simulate_turns_a_rejected_request_into_a_message():
    r = simulate(
        requests([("big", 600, 50, 0.0)]),
        preset=None,
        max_num_batched_tokens=64,
        max_num_seqs=8,
        max_model_len=512,
        num_gpu_blocks=64,
        block_size=16,
    )
    assert r.message.startswith("Request rejected: request 'big': the prompt (length 600) is longer than")
    assert not r.ok


def test_explorer_with_the_simulator_preset():
    e = ConfigExplorer(requests(SMALL))  # SimRunner priced by llama2_7b_a100
    st = e.state()
    assert st["ok"] and st["metrics"]["ttft_p50"] > 0
    assert make_runner(e.result.engine.config, None).cost_model is TOY_COST_MODEL


def test_recovery_explorer_preempt_and_step():
    app = RecoveryExplorer(preset=None)
    app.num_steps.value = 4
    app.step.click()
    running = list(app.request.options)
    assert running and app.state()["step"] == 5
    victim = running[0]
    blocks = app.engine.scheduler.kv_cache_manager.get_block_ids(victim)
    app.request.value = victim
    app.preempt.click()
    assert f"Preempted {victim}" in app.state()["message"] and victim in app.state()["waiting"]
    app.num_steps.value = 1
    app.step.click()
    (ev,) = [e for e in app.state()["events"] if e["request"] == victim]
    assert ev["blocks_before"] == blocks and ev["resumed_at_step"] == ev["preempted_at_step"] == 5
    assert ev["path"] == "A" and ev["blocks_from_cache"] == blocks[: ev["cached_tokens"] // 16]
    assert ev["cached_tokens"] + ev["recomputed_tokens"] == ev["tokens_before"]
    assert f"{victim} (step 5 -> 5): path A" in app.summary()
    assert any(t.name == "recovered from the prefix cache (A)" for t in app.timeline.data)
    assert app.blocks.data[1].name.startswith("blocks of")


def test_recovery_explorer_extremes():
    app = RecoveryExplorer(preset=None)
    app.num_blocks.value = 1
    assert "num_gpu_blocks must be >= 2" in app.state()["message"] and app.request.options == ()
    app.preempt.click()  # nothing running: a message, not a traceback
    assert "Nothing to preempt" in app.state()["message"]
    app.num_blocks.value = 64
    app.num_steps.value = 50
    for _ in range(10):
        app.step.click()
    assert app.state()["running"] == [] and app.state()["waiting"] == []  # ran to the end, then stops


def test_simulate_cuts_off_a_run_at_max_steps():
    r = simulate(
        requests(SMALL),
        preset=None,
        max_steps=3,
        max_num_batched_tokens=64,
        max_num_seqs=8,
        max_model_len=512,
        num_gpu_blocks=64,
    )
    assert r.message == "Stopped after 3 steps with requests still unfinished." and len(r.trace.steps) == 3


def test_recovery_preempt_message_says_what_the_free_did():
    """11_5's moment (req-2 at step 7): 3 of its blocks hold the prefix req-0 shares, so they stay in use
    (ref_cnt > 0 after the free); only the others go back to the free list. The message says so, counted
    from the block pool (it said all of them went back)."""
    app = RecoveryExplorer(preset=None)
    app.do_step(6)
    pool = app.engine.scheduler.kv_cache_manager
    blocks = pool.get_block_ids("req-2")
    shared = [b for b in blocks if pool.block_pool.blocks[b].ref_cnt > 1]
    assert shared, "the scene shares a prefix: req-2 holds shared blocks at step 7"
    app.request.value = "req-2"
    app.preempt.click()
    msg = app.state()["message"]
    freed = [b for b in blocks if b not in shared]
    assert all(pool.block_pool.blocks[b].ref_cnt > 0 for b in shared)
    assert all(pool.block_pool.blocks[b].ref_cnt == 0 for b in freed)
    assert f"{len(freed)} went back to the free list {freed}" in msg
    assert f"{len(shared)} {shared} stay in use" in msg


def test_chunked_toggle_shows_a_check_mark_only_when_on():
    app = ConfigExplorer(preset=None)
    assert app.chunked.value and app.chunked.icon == "check"
    app.chunked.value = False
    assert app.chunked.icon == ""
    app.chunked.value = True
    assert app.chunked.icon == "check"
