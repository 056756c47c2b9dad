"""widgets/plotly_esm.py: the small front-end module every minivllm FigureWidget carries (the browser side is
tests/lab/viz/test_jupyterlab_widgets.py)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import ipywidgets as W
import numpy as np
import plotly.graph_objects as go
import pytest

from minivllm.lab.viz.figures.theme import message_figure, style
from minivllm.lab.viz.widgets.base import FigureWidget, sync_figure
from minivllm.lab.viz.widgets.plotly_esm import ESM, PLOTLY_BUNDLE_PATH
from tests.helpers.recording_comm import RecordingComm, figure_comms, record_comms
from tests.helpers.widget_frontend import normalised, python_state


def test_the_widget_carries_the_small_module_and_plotlys_bundle_beside_it():
    state = FigureWidget(go.Figure(go.Bar(x=[1, 2], y=[3, 4]))).get_state()
    assert state["_esm"] == ESM and len(ESM) < 10_000
    assert state["_plotly_bundle"] == PLOTLY_BUNDLE_PATH.read_text(encoding="utf-8")
    assert "export" in state["_plotly_bundle"] and "FigureModel" in state["_plotly_bundle"]


def test_the_kept_figure_handles_every_change_message_plotly_sends():
    """The module applies each ``_py2js_*`` message named in CHANGES to the figure it keeps for plotly's views:
    a plotly release with a new message must be added there, or a view drawn after that change would miss it."""
    handled = set(re.findall(r"^  (_py2js_\w+):", ESM, re.M))
    sent = {name for name in go.FigureWidget().trait_names() if name.startswith("_py2js_")}
    assert handled == sent


def test_the_page_wide_key_names_plotlys_version():
    """Two plotly versions in one page (two kernels) never share a loaded bundle."""
    import plotly

    assert plotly.__version__.replace(".", "_") in ESM


# --- the figure the module keeps for plotly's views, run in node (tests/helpers/plotly_esm_harness.mjs) ---

HARNESS = Path(__file__).resolve().parents[2] / "helpers" / "plotly_esm_harness.mjs"


def _decoded(value):
    """A typed-array spec ({dtype, shape, buffer}) as its list; everything else as it is."""
    if isinstance(value, dict):
        if "dtype" in value and "shape" in value and "buffer" in value:
            return value["buffer"]
        return {k: _decoded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    return value


@pytest.fixture
def comms(monkeypatch) -> list[RecordingComm]:
    return record_comms(monkeypatch)


def views_after_each_message(messages: list[dict], tmp_path: Path) -> list[tuple[dict, list[dict]]]:
    """Run the module in node: the model opens with ``messages[0]``; after every message a view is drawn."""
    esm = tmp_path / "plotly_esm.mjs"
    esm.write_text(ESM)
    events = [{"open": messages[0]}, {"render": True}]
    for m in messages[1:]:
        events += [{"update": m}, {"render": True}]
    (tmp_path / "events.json").write_text(json.dumps(events))
    done = subprocess.run(["node", str(HARNESS), str(esm), str(tmp_path / "events.json")],
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    return [(normalised(_decoded(v["layout"])), normalised(_decoded(v["data"]))) for v in json.loads(done.stdout)]


def bars(ys: list[int], title: str, **trace) -> go.Figure:
    return style(go.Figure(go.Bar(x=list(range(len(ys))), y=ys, **trace)), title)


def two(ys0: list[int], ys1: list[int], title: str, name0: str = "queued") -> go.Figure:
    """Two traces: an update that changes the first one's name and only the second one's y sends the first
    one's y as undefined (``"_undefined_"``)."""
    fig = bars(ys0, title, name=name0)
    return fig.add_trace(go.Bar(x=list(range(len(ys1))), y=ys1, name="running"))


def edits(fw: go.FigureWidget) -> list[tuple[str, Callable[[], None]]]:
    """Every kind of change a minivllm app makes, and each message plotly can send."""

    def player_tick() -> None:  # StepPlayer's way: changes alone, no whole figure after them
        with fw.batch_update():
            fw.data[0].y, fw.data[0].x = [2, 0, 1], np.array([1.5, 2.5, 3.5], dtype=np.float32)
            fw.layout.title.text = "after step 3"

    def moved() -> None:
        fw.data = fw.data[::-1]

    def deleted() -> None:
        fw.data = fw.data[1:]

    return [
        ("a chart replaces the message", lambda: sync_figure(fw, bars([3, 1, 2], "budget 512", marker_color="red"))),
        ("the same chart, new data and title", lambda: sync_figure(fw, bars([1, 1, 5, 7], "budget 2048"))),
        ("a second trace", lambda: sync_figure(fw, two([1, 1, 5, 7], [2, 2], "queued and running"))),
        ("one trace of two changes", lambda: sync_figure(fw, two([1, 1, 5, 7], [3, 0, 3], "budget 16", "queued (4)"))),
        ("a step of a player", player_tick),
        ("a trace added", lambda: fw.add_trace(go.Scatter(x=[0, 1], y=[None, 2.0], name="line"))),
        ("traces moved", moved),
        ("an axis range set", lambda: fw.update_layout(xaxis_range=[0, 5])),
        ("a nested property set", lambda: setattr(fw.data[0].marker, "color", "blue")),
        ("an axis range unset", lambda: fw.update_layout(xaxis_range=None)),
        ("a trace deleted", deleted),
        ("a message replaces the chart", lambda: sync_figure(fw, message_figure("Invalid setting: x", "Gantt"))),
        ("a chart again", lambda: sync_figure(fw, bars([4, 4], "budget 16"))),
    ]


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the front-end module")
def test_a_view_drawn_after_any_message_draws_the_kernels_figure(comms, tmp_path):
    """plotly's bundle may arrive, and a view be drawn, at any moment of the kernel's messages; the view then
    applies the changes that come after it and ignores later whole figures. So once an edit's last change
    message has come (``_py2js_*``: with ``sync_figure`` the whole figure follows it), a view drawn at any
    later moment of that edit must draw the kernel's figure. The module before this drew the last whole
    figure instead: a view drawn after a player's step, or between a chart's update and its whole figure,
    drew the older figure and kept it."""
    fw = FigureWidget(message_figure("running...", "Gantt"))
    W.VBox([fw])  # shown: the comm opens
    (c,) = figure_comms(comms)
    checks: list[tuple[int, str, tuple]] = [(0, "open", python_state(fw))]  # (message index, edit, figure)
    for what, edit in edits(fw):
        first = len(c.messages)
        edit()
        sent = list(range(first, len(c.messages)))
        changes = [i for i in sent if any(k.startswith("_py2js_") and v is not None for k, v in c.messages[i].items())]
        assert changes, f"{what}: no change message"
        checks += [(i, what, python_state(fw)) for i in sent if i >= changes[-1]]
    views = views_after_each_message(c.messages, tmp_path)
    assert len(views) == len(c.messages)
    for i, what, want in checks:
        assert views[i] == want, f"a view drawn after message {i} ({what}) is not the kernel's figure"
