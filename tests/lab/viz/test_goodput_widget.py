"""The goodput explorer and the budget-tuning figures (§11.7): the drawn numbers are goodput()'s."""

from __future__ import annotations

import pytest
from numpy.testing import assert_allclose

from minivllm.lab.metrics.goodput import goodput
from minivllm.lab.metrics.summary import summarize
from minivllm.lab.sim.run import simulate
from minivllm.lab.sim.workload import make_workload
from minivllm.lab.viz.figures.tuning import goodput_curve, memory_curves
from minivllm.lab.viz.widgets.goodput import GoodputExplorer, best_budget


@pytest.fixture(scope="module")
def sweep():
    w = make_workload("azure_conv", 24, seed=0, vocab_size=32000, max_model_len=4096)
    return {
        b: simulate(w.requests, max_num_batched_tokens=b, max_num_seqs=16, max_model_len=4096).trace
        for b in (64, 256, 1024, 4096)
    }


def test_best_budget_is_the_smallest_within_the_tie():
    assert best_budget({64: 100.0, 256: 200.0, 1024: 199.0}) == 256
    assert best_budget({64: 100.0, 256: 197.0, 1024: 200.0}) == 1024
    assert best_budget({64: 100.0, 256: 199.5, 1024: 200.0}) == 256  # 0.25% apart: a tie


def test_the_slider_redraws_the_goodput_of_each_budget(sweep):
    e = GoodputExplorer(sweep, value=50)
    assert list(e.fig.data[1].x) == [64, 256, 1024, 4096]
    assert_allclose(e.fig.data[1].y, [goodput(t, 0.050) for t in sweep.values()])
    assert_allclose(e.fig.data[0].y, [summarize(t).output_throughput for t in sweep.values()])
    before = list(e.fig.data[1].y)
    e.slo.value = 10
    assert_allclose(e.fig.data[1].y, [goodput(t, 0.010) for t in sweep.values()])
    assert list(e.fig.data[1].y) != before and "≤ 10 ms" in e.fig.layout.title.text
    assert e.summary().startswith("TPOT SLO 10 ms: no budget meets it")  # every goodput here is 0
    e.slo.value = 300  # a loose SLO: goodput is the raw throughput
    assert_allclose(e.fig.data[1].y, e.fig.data[0].y)
    with pytest.raises(ValueError, match="needs at least one run"):
        GoodputExplorer({})
    with pytest.raises(ValueError, match="value must be one of"):
        GoodputExplorer(sweep, value=42)


def test_figures_titles_describe_their_data():
    fig = goodput_curve({64: 100.0, 256: 300.0, 1024: 150.0}, {64: 100.0, 256: 300.0, 1024: 310.0}, 50)
    assert fig.layout.title.text.startswith("Goodput at TPOT ≤ 50 ms: rises, 100 → 150; highest at 256")
    rows = [
        {"budget": 512, "kv_blocks": 1145, "output_throughput": 638.0, "num_preemptions": 77},
        {"budget": 16384, "kv_blocks": 989, "output_throughput": 601.0, "num_preemptions": 20},
    ]
    ref = {"budget": 16384, "kv_blocks": 1145, "output_throughput": 637.0, "num_preemptions": 17}
    m = memory_curves(rows, reference=ref)
    titles = [a.text for a in m.layout.annotations]
    assert titles[0] == "KV blocks: 1.15k → 989 (-14%)" and titles[1] == "output throughput: 638 → 601 (-6%)"
    assert list(m.data[1].y) == [1145] and len(m.data) == 6
    assert len(memory_curves([]).data) == 0 and len(goodput_curve({}, {}, 50).data) == 0


def test_no_best_budget_when_nothing_meets_the_slo(sweep):
    assert best_budget({64: 0.0, 256: 0.0, 1024: 0.0}) is None  # zero goodput everywhere is no peak
    e = GoodputExplorer(sweep, slos_ms=(0.001, 50), value=0.001)  # 1 µs: no request decodes that fast
    assert all(g == 0 for g in e.curve(0.001).values())
    assert e.summary().startswith("TPOT SLO 0.001 ms: no budget meets it") and "highest" not in e.summary()
    assert "no budget meets it" in e.info.value
    assert "0 at every budget (no request meets the SLO)" in e.fig.layout.title.text
    e.slo.value = 50  # and back to an SLO that some budget meets: a best budget again
    assert "goodput is highest at budget" in e.summary()
