"""What every widget app shares: a FigureWidget that opens with its figure, moving a new figure into
one, and HTML messages.

Widgets never draw by themselves: they call the pure builders and copy the result into
their ``go.FigureWidget`` inside ``batch_update()``, so one change sends one update to the
browser (plotly's ``FigureWidget.batch_update``).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from copy import deepcopy
from typing import Any

import plotly.graph_objects as go
import traitlets
from plotly.basedatatypes import BasePlotlyType

from minivllm.lab.viz.figures.theme import OKABE_ITO
from minivllm.lab.viz.widgets.plotly_esm import ESM, plotly_bundle


def _clear(obj: BasePlotlyType, keys: set[str]) -> None:
    """Unset ``keys`` of a layout or trace: sent as ``null`` (container arrays such as annotations as ``[]``)."""
    for key in keys:
        obj[key] = None


def _lists(value: Any) -> Any:
    """``value`` with every numpy array as (nested) lists.

    plotly's FigureWidget cannot always take an array back from the front end: when the browser's
    copy of a typed array differs from plotly.js's cleaned one (NaN gaps in a line trace, a 2-D
    ``customdata``), its trace delta holds a dict for that key and ``_remove_overlapping_props``
    evaluates ``not array``, raising ``ValueError: The truth value of an array ... is ambiguous``
    in the comm handler (plotly 7.1, the Gantt after budget 16). Lists are compared as lists; NaN and
    infinities become ``None`` (a gap to plotly, as NaN is)."""
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_lists(v) for v in value)
    if hasattr(value, "tolist") and getattr(value, "ndim", 0) >= 1:
        return _lists(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None  # a gap, as NaN is; JSON has no NaN (the comm would warn "not JSON compliant")
    return value


class FigureWidget(go.FigureWidget):
    """plotly's ``go.FigureWidget`` whose comm opens, with the figure it shows then, when it is first shown.

    plotly.py 7 (``plotly/basewidget.py``) opens the comm inside ``super().__init__`` with an empty
    ``_widget_data`` / ``_widget_layout`` and sets the figure a moment later, so the figure reaches
    the browser as an ``update`` message, as does every change made before the figure is shown.
    anywidget's front end (0.9 to 0.11) handles a model's updates only once that model's ESM is loaded
    and bound, and drops them all for good when that takes over 2 s (``AbortSignal.timeout(2000)`` in
    anywidget's runtime); plotly's view never redraws on a later ``_widget_data``. Two changes here:

    - the comm opens only when the widget is first needed (shown, or put in a box: ``model_id``), and
      its open message carries the whole current figure, so a view drawn at any moment draws it (with
      plotly's own open, 11_3's StepPlayer stayed blank in a fresh page);
    - the ESM is ``plotly_esm.ESM``, a small module that loads plotly's 5 MB bundle once per page,
      outside anywidget's 2 s window (plotly's own ESM is the whole bundle, parsed again for every figure:
      on a busy page a figure kept its first state), and keeps the kernel's figure, every change applied,
      for plotly's views: a view drawn late, or shown again, draws what the kernel has.
    """

    _esm = ESM
    _plotly_bundle = traitlets.Unicode(plotly_bundle()).tag(sync=True)

    def __init__(self, fig: go.Figure | None = None) -> None:
        self._hold_comm = True  # ipywidgets' Widget.__init__ calls open(): not yet
        super().__init__(fig)

    def open(self) -> None:
        if getattr(self, "_hold_comm", False):
            return
        if self.comm is None:  # the state a view starts from: the figure as it is now (as plotly's __init__ sets it)
            self._widget_data, self._widget_layout = _lists(deepcopy(self._data)), deepcopy(self._layout)
        super().open()

    @property
    def model_id(self) -> str:
        if self.comm is None:
            self._hold_comm = False
            self.open()
        return self.comm.comm_id


def sync_figure(fw: go.FigureWidget, fig: go.Figure) -> None:
    """Make ``fw`` show ``fig``, in Python and in every browser view of it.

    Traces are updated in place when their number and types match, else replaced. The front end
    applies plotly's messages as merges (``Plotly.update`` / ``relayout`` / ``restyle``, and
    lodash ``set`` on the widget model): a key the new figure does not have stays on screen
    unless it is sent as ``null``. So a key of the old layout or trace that ``fig`` lacks (the
    "Invalid setting ..." or "running..." annotation of a message figure) is cleared explicitly,
    and the rest goes in with ``update(..., overwrite=True)``: one ``update`` message carries the
    layout and the restyles. ``_widget_layout`` / ``_widget_data`` (the state a view starts from
    when it is created later, e.g. after a page reload) are set to ``fig`` too; plotly refreshes
    them only when the FigureWidget itself is displayed, never when it sits inside a VBox.
    """
    same = len(fw.data) == len(fig.data) and all(a.type == b.type for a, b in zip(fw.data, fig.data))
    layout = fig.layout.to_plotly_json()
    with fw.batch_update():
        if same:
            for tr, new in zip(fw.data, fig.data):
                spec = _lists(new.to_plotly_json())
                spec.pop("uid", None)
                _clear(tr, set(tr.to_plotly_json()) - set(spec) - {"uid", "type"})
                tr.update(spec, overwrite=True)
        else:
            fw.data = ()
            fw.add_traces([_lists(t.to_plotly_json()) for t in fig.data])
        _clear(fw.layout, set(fw.layout.to_plotly_json()) - set(layout))
        fw.layout.update(layout, overwrite=True)
    data = _lists(deepcopy(fig._data))  # the whole new figure: fw._data may lack what the front end called a default
    for trace, shown in zip(data, fw.data):
        trace["uid"] = shown.uid
    with fw.hold_sync():  # one message: a view never sees the new data under the older layout
        fw._widget_data, fw._widget_layout = data, deepcopy(fig._layout)


def message_html(text: str, level: str = "info") -> str:
    """A short coloured note (level: info / warning / error) for an ipywidgets HTML widget."""
    if not text:
        return ""
    colour = {"info": OKABE_ITO["blue"], "warning": OKABE_ITO["orange"], "error": OKABE_ITO["vermillion"]}[level]
    return (
        f'<div style="border-left: 4px solid {colour}; padding: 2px 8px; margin: 4px 0">'
        f"{html.escape(text).replace(chr(10), '<br>')}</div>"
    )


def _fmt(value: float | None, scale: float, digits: int) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value * scale:.{digits}f}"


METRIC_ROWS = (  # (key, label, scale, digits)
    ("ttft_p50", "TTFT p50 (ms)", 1e3, 1),
    ("ttft_p99", "TTFT p99 (ms)", 1e3, 1),
    ("tpot_p50", "TPOT p50 (ms)", 1e3, 2),
    ("itl_p99", "ITL p99 (ms)", 1e3, 2),
    ("itl_max", "ITL max (ms)", 1e3, 1),
    ("output_throughput", "output throughput (tok/s)", 1.0, 0),
    ("num_preemptions", "preemptions", 1.0, 0),
    ("num_steps", "engine steps", 1.0, 0),
)


def metrics_table(metrics: Mapping[str, float]) -> str:
    """The headline metrics as a small HTML table."""
    rows = "".join(
        f'<tr><td style="padding: 0 12px 0 0">{label}</td><td style="text-align: right">'
        f"{_fmt(metrics.get(key), scale, digits)}</td></tr>"
        for key, label, scale, digits in METRIC_ROWS
    )
    return f"<table>{rows}</table>"
