"""What every widget app shares: moving a new figure into a FigureWidget, and HTML messages.

Widgets never draw by themselves: they call the pure builders and copy the result into
their ``go.FigureWidget`` inside ``batch_update()``, so one change sends one update to the
browser (plotly's ``FigureWidget.batch_update``).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from copy import deepcopy

import plotly.graph_objects as go
from plotly.basedatatypes import BasePlotlyType

from minivllm.viz.figures.theme import OKABE_ITO


def _clear(obj: BasePlotlyType, keys: set[str]) -> None:
    """Unset ``keys`` of a layout or trace: sent as ``null`` (container arrays such as annotations as ``[]``)."""
    for key in keys:
        obj[key] = None


def sync_figure(fw: go.FigureWidget, fig: go.Figure) -> None:
    """Make ``fw`` show ``fig``, in Python and in every browser view of it.

    Traces are updated in place when their number and types match, else replaced. The front end
    applies plotly's messages as merges (``Plotly.update`` / ``relayout`` / ``restyle``, and
    lodash ``set`` on the widget model): a key the new figure does not have stays on screen
    unless it is sent as ``null``. So a key of the old layout or trace that ``fig`` lacks (the
    "Invalid setting ..." or "running..." annotation of a message figure) is cleared explicitly,
    and the rest goes in with ``update(..., overwrite=True)``: one ``update`` message carries the
    layout and the restyles. ``_widget_layout`` / ``_widget_data`` (the state a view starts from
    when it is created later, e.g. after a page reload) are refreshed too; plotly refreshes them
    only when the FigureWidget itself is displayed, never when it sits inside a VBox.
    """
    same = len(fw.data) == len(fig.data) and all(a.type == b.type for a, b in zip(fw.data, fig.data))
    layout = fig.layout.to_plotly_json()
    with fw.batch_update():
        if same:
            for tr, new in zip(fw.data, fig.data):
                spec = new.to_plotly_json()
                spec.pop("uid", None)
                _clear(tr, set(tr.to_plotly_json()) - set(spec) - {"uid", "type"})
                tr.update(spec, overwrite=True)
        else:
            fw.data = ()
            fw.add_traces(list(fig.data))
        _clear(fw.layout, set(fw.layout.to_plotly_json()) - set(layout))
        fw.layout.update(layout, overwrite=True)
    fw._widget_layout = deepcopy(fw._layout_obj._props)
    fw._widget_data = deepcopy(fw._data)


def message_html(text: str, level: str = "info") -> str:
    """A short coloured note (level: info / warning / error) for an ipywidgets HTML widget."""
    if not text:
        return ""
    colour = {"info": OKABE_ITO["blue"], "warning": OKABE_ITO["orange"], "error": OKABE_ITO["vermillion"]}[level]
    return (
        f'<div style="border-left: 4px solid {colour}; padding: 2px 8px; margin: 4px 0">'
        f"{html.escape(text).replace(chr(10), '<br>')}</div>"
    )


def _fmt(value: float, scale: float, digits: int) -> str:
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
