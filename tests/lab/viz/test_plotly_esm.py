"""widgets/plotly_esm.py: the small front-end module every minivllm FigureWidget carries (the browser side is
tests/lab/viz/test_jupyterlab_widgets.py)."""

from __future__ import annotations

import re

import plotly.graph_objects as go

from minivllm.lab.viz.widgets.base import FigureWidget
from minivllm.lab.viz.widgets.plotly_esm import ESM, PLOTLY_BUNDLE_PATH


def test_the_widget_carries_the_small_module_and_plotlys_bundle_beside_it():
    state = FigureWidget(go.Figure(go.Bar(x=[1, 2], y=[3, 4]))).get_state()
    assert state["_esm"] == ESM and len(ESM) < 10_000
    assert state["_plotly_bundle"] == PLOTLY_BUNDLE_PATH.read_text(encoding="utf-8")
    assert "export" in state["_plotly_bundle"] and "FigureModel" in state["_plotly_bundle"]


def test_every_change_message_plotly_sends_is_kept_while_the_bundle_loads():
    """The module keeps the changes named in DELTAS for plotly's model: a plotly release with a new
    ``_py2js_*`` message must be added there, or that change would be lost on a slow page."""
    kept = set(re.search(r"const DELTAS = \[(.*?)\];", ESM, re.S).group(1).replace('"', "").replace(",", " ").split())
    sent = {name for name in go.FigureWidget().trait_names() if name.startswith("_py2js_")}
    assert kept == sent


def test_the_page_wide_key_names_plotlys_version():
    """Two plotly versions in one page (two kernels) never share a loaded bundle."""
    import plotly

    assert plotly.__version__.replace(".", "_") in ESM
