"""sync_figure keeps every browser view equal to the Python figure; the recovery explorer's controls.

The browser side is replayed by tests/helpers/widget_frontend.py with the front end's own merge
rules (tests/lab/viz/test_jupyterlab_widgets.py checks the same in a real JupyterLab).
"""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest

from minivllm.lab.viz.figures.theme import message_figure, style
from minivllm.lab.viz.widgets.base import sync_figure
from minivllm.lab.viz.widgets.explorer import ConfigExplorer
from minivllm.lab.viz.widgets.recovery_app import RecoveryExplorer, step_label
from tests.helpers.viz import requests
from tests.helpers.widget_frontend import FrontEnd, python_state, view_state

SMALL = [("chat0", 20, 12, 0.0), ("chat1", 24, 12, 0.0), ("long", 300, 3, 0.01)]


def bars(ys: list[int], title: str, **trace) -> go.Figure:
    return style(go.Figure(go.Bar(x=list(range(len(ys))), y=ys, **trace)), title)


def test_the_unfixed_update_leaves_the_message_in_the_browser():
    """What plotly does with ``fw.layout = new``: Python drops the annotation, the view keeps it."""
    fw = go.FigureWidget(message_figure("Invalid setting: max_num_batched_tokens (1) ...", "Gantt"))
    view = FrontEnd(fw)
    fw.layout = bars([1, 2], "a valid chart").layout
    assert fw.layout.annotations == ()
    assert view.annotations() == ["Invalid setting: max_num_batched_tokens (1) ..."]


@pytest.mark.parametrize("displayed", ["before", "after"])
def test_a_message_then_a_chart_then_a_message(displayed):
    """Each step, every view equals Python: no annotation of an earlier figure survives."""
    fw = go.FigureWidget(message_figure("starting...", "Gantt"))
    views = [FrontEnd(fw)] if displayed == "before" else []
    sequence = [
        bars([3, 1, 2], "three bars", text=["a", "b", "c"]),  # message -> chart: traces added
        message_figure("Invalid setting: max_num_batched_tokens (1)", "Gantt"),  # chart -> message: removed
        bars([5, 4], "two bars"),
        bars([1, 1], "two bars again"),  # same trace types: updated in place, and its text gone
        message_figure("running...", "Gantt"),
    ]
    for fig in sequence:
        sync_figure(fw, fig)
        if displayed == "after":
            views.append(FrontEnd(fw))  # a view created now (re-display, page reload) starts from _widget_*
        expected = python_state(go.FigureWidget(fig))
        assert python_state(fw) == expected
        for view in views:
            assert view_state(view) == expected
    assert views[0].annotations() == ["running..."]


def test_a_stale_trace_property_is_unset_in_the_browser():
    fw = go.FigureWidget(bars([1, 2], "with labels", text=["old", "old"], marker=dict(color="red")))
    view = FrontEnd(fw)
    sync_figure(fw, bars([3, 4], "without", marker=dict(line=dict(width=2))))
    (trace,) = view.data
    assert "text" not in trace and trace["marker"] == {"line": {"width": 2}} and trace["y"] == [3, 4]
    assert view_state(view) == python_state(fw)


def test_same_traces_cost_one_update_message():
    fw = go.FigureWidget(bars([1, 2], "one"))
    view = FrontEnd(fw)
    sync_figure(fw, bars([2, 3], "two"))
    assert [name for name, _ in view.messages] == ["_py2js_update"]
    assert view.layout["title"]["text"] == "two"


def test_config_explorer_views_never_show_running():
    """The explorer's figure starts as a "running..." message; no view of it may keep that text."""
    e = ConfigExplorer(requests(SMALL), preset=None, max_model_len=512, block_size=16)
    view = FrontEnd(e.fig)  # displayed after the constructor's first run, as in a notebook
    assert view.annotations() == [] and view_state(view) == python_state(e.fig)
    e.budget.value = e.budget.options[0]
    assert e.state()["ok"] and view.annotations() == [] and view_state(view) == python_state(e.fig)


def outline(app: RecoveryExplorer) -> set[tuple[int, int]]:
    trace = app.blocks.data[1]
    return set(zip(trace.x, trace.y))


def test_recovery_dropdown_moves_the_outline_at_once():
    app = RecoveryExplorer(preset=None)
    app.do_step(6)
    view = FrontEnd(app.blocks)
    first, second = list(app.request.options)[:2]
    step = app.state()["step"]
    app.request.value = second
    pool = app.engine.scheduler.kv_cache_manager
    ncols = len(app.blocks.data[0].z[0])
    assert outline(app) == {(b % ncols, b // ncols) for b in pool.get_block_ids(second)}
    assert app.blocks.data[1].name == f"blocks of {second}" and app.state()["step"] == step  # no step taken
    assert view_state(view) == python_state(app.blocks)
    app.request.value = first
    assert app.blocks.data[1].name == f"blocks of {first}"


def test_recovery_step_button_says_what_a_click_does():
    app = RecoveryExplorer(preset=None)
    assert app.step.description == "run 1 step" == step_label(1)
    app.num_steps.value = 6
    assert app.step.description == "run 6 steps"
    start = app.state()["step"]
    app.step.click()
    assert app.state()["step"] == start + 6
    app.do_step(3)  # the notebook's way: the slider and the label stay as they were
    assert app.state()["step"] == start + 9 and app.num_steps.value == 6 and app.step.description == "run 6 steps"


def test_recovery_rebuild_after_an_invalid_pool_clears_the_message_in_the_browser():
    app = RecoveryExplorer(preset=None)
    views = [FrontEnd(app.blocks), FrontEnd(app.timeline)]
    app.num_blocks.value = 1
    assert all(any("num_gpu_blocks must be >= 2" in a for a in v.annotations()) for v in views)
    app.num_blocks.value = 64
    assert app.state()["step"] == 1 and not any("num_gpu_blocks" in a for v in views for a in v.annotations())
    assert view_state(views[0]) == python_state(app.blocks) and view_state(views[1]) == python_state(app.timeline)


def test_arrays_reach_the_widget_as_json_lists():
    """No numpy array in a synced trace: plotly's delta handler raises on a NaN-gapped or 2-D array, and
    NaN is a gap (None), since strict JSON has no NaN."""
    fw = go.FigureWidget(message_figure("running...", "Gantt"))
    view = FrontEnd(fw)
    x = np.array([1.0, np.nan, 2.0])
    for _ in range(2):  # replaced, then updated in place
        sync_figure(fw, go.Figure(go.Scatter(x=x, y=np.arange(3), customdata=np.ones((3, 2)))))
        (trace,) = fw._data
        assert trace["x"] == [1.0, None, 2.0] and trace["customdata"] == [[1.0, 1.0]] * 3
        assert not any(isinstance(v, np.ndarray) for v in trace.values())
        json.dumps([fw._widget_data, fw._widget_layout], allow_nan=False)
        assert view.data[0]["x"] == [1.0, None, 2.0]
