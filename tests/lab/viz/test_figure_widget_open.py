"""A FigureWidget's comm opens with the figure it shows (widgets/base.py ``FigureWidget``; §11.3's StepPlayer).

plotly.py opens the comm before it sets ``_widget_data`` / ``_widget_layout`` and sends the figure (and
every change before the figure is shown) as later updates; anywidget's front end holds a model's updates
until plotly's bundle has loaded, and drops them for good past 2 s, so a view could draw the empty open
state: 11_3's player was blank in a fresh JupyterLab page. Here the comm open message, as
``comm.create_comm`` receives it, must hold every trace and the title the kernel's figure has then.
"""

from __future__ import annotations

import ipywidgets as W
import plotly.graph_objects as go
import pytest

from minivllm.lab.viz.widgets import ConfigExplorer, RecoveryExplorer, StepPlayer
from tests.helpers.recording_comm import RecordingComm, figure_comms, record_comms


@pytest.fixture
def opened(monkeypatch) -> list[RecordingComm]:
    return record_comms(monkeypatch)


def figure_states(opened: list[RecordingComm]) -> list[dict]:
    """The open state of each FigureWidget's comm."""
    return [c.messages[0] for c in figure_comms(opened)]


def test_plotly_alone_opens_empty(opened):  # the cause, shown on plotly's own class
    go.FigureWidget(go.Figure(go.Bar(x=[1, 2], y=[3, 4]), layout={"title": "t"}))
    (state,) = figure_states(opened)
    assert state["_widget_data"] == [] and "title" not in state["_widget_layout"]


def test_figure_widget_opens_with_its_figure(opened):
    from minivllm.lab.viz.widgets.base import FigureWidget

    fw = FigureWidget(go.Figure(go.Bar(x=[1, 2], y=[3, 4]), layout={"title": "t"}))
    fw.data[0].y = [5, 6]  # a change before it is shown: no comm, so no update to lose
    fw.layout.title.text = "u"
    assert not figure_states(opened)
    W.VBox([fw])  # a box names its children by model id: the comm opens now
    (state,) = figure_states(opened)
    assert [t["y"] for t in state["_widget_data"]] == [[5, 6]] and state["_widget_layout"]["title"]["text"] == "u"
    assert fw.comm is not None and fw._repr_mimebundle_()


@pytest.fixture
def pool_trace():
    from minivllm.lab.sim.run import run_workload
    from tests.helpers.viz import make_engine, requests

    engine = make_engine(budget=64, blocks=40, record=True)
    run_workload(engine, requests([("a", 40, 8, 0.0), ("b", 70, 8, 0.0), ("c", 30, 8, 0.01)]))
    return engine.trace


def apps(pool_trace):
    yield "StepPlayer", lambda: StepPlayer(pool_trace), lambda a: [a.schedule, a.step_fig, a.blocks]
    yield "RecoveryExplorer", RecoveryExplorer, lambda a: [a.blocks, a.timeline]
    yield "ConfigExplorer", ConfigExplorer, lambda a: [a.fig]


def test_every_app_figure_opens_as_python_holds_it(opened, pool_trace):
    """Each app's figures, as the browser first learns them, are what the kernel shows at that moment."""
    for name, make, figures in apps(pool_trace):
        opened.clear()
        app = make()
        by_title = {s["_widget_layout"].get("title", {}).get("text"): s for s in figure_states(opened)}
        for fw in filter(None, figures(app)):
            first = by_title.get(fw.layout.title.text)
            assert first is not None, f"{name}: {fw.layout.title.text!r} opened as {list(by_title)}"
            sizes = [(len(t.get("x") or []), len(t.get("z") or [])) for t in first["_widget_data"]]
            assert sizes == [(len(t.x or []), len(getattr(t, "z", None) or [])) for t in fw.data], name
