"""What every widget app shares: moving a new figure into a FigureWidget, and HTML messages.

Widgets never draw by themselves: they call the pure builders and copy the result into
their ``go.FigureWidget`` inside ``batch_update()``, so one change sends one update to the
browser (plotly's ``FigureWidget.batch_update``).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping

import plotly.graph_objects as go

from minivllm.viz.figures.theme import OKABE_ITO


def sync_figure(fw: go.FigureWidget, fig: go.Figure) -> None:
    """Make ``fw`` show ``fig``: traces updated in place when their number and types match, else replaced."""
    same = len(fw.data) == len(fig.data) and all(a.type == b.type for a, b in zip(fw.data, fig.data))
    with fw.batch_update():
        if same:
            for tr, new in zip(fw.data, fig.data):
                spec = new.to_plotly_json()
                spec.pop("uid", None)
                tr.update(spec, overwrite=True)
        else:
            fw.data = ()
            fw.add_traces(list(fig.data))
        fw.layout = fig.layout


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
