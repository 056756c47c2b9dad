"""One look for every figure: Okabe-Ito colours, transparent backgrounds, mid-tone text.

The figures must read in JupyterLab's light and dark themes alike, so nothing is drawn
in black or white: text and grid lines are mid grey, backgrounds are transparent, and
the colours are the Okabe-Ito palette (Okabe & Ito 2008), safe for the common kinds of
colour blindness. Every chapter-11 figure uses the same colour for the same thing:
prefill is orange, decode is blue, preemption is vermillion, the prefix cache is green.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
}
GREY = "#999999"
FONT_COLOUR = "#808080"  # contrast ~3.9:1 on white and ~4.6:1 on JupyterLab's dark background
GRID_COLOUR = "rgba(128,128,128,0.25)"
SEQUENCE = [OKABE_ITO[k] for k in ("blue", "orange", "bluish_green", "vermillion", "reddish_purple", "sky_blue")]

# What a request is doing, and where tokens come from: one colour each, in every figure.
COLOURS = {
    "queued": "rgba(153,153,153,0.45)",
    "prefill": OKABE_ITO["orange"],
    "decode": OKABE_ITO["blue"],
    "spec": OKABE_ITO["reddish_purple"],
    "stalled": OKABE_ITO["reddish_purple"],  # a decode step stretched by someone's prefill (Gantt)
    "preempted": OKABE_ITO["vermillion"],
    "cached": OKABE_ITO["bluish_green"],  # tokens / blocks found again in the prefix cache
    "recomputed": OKABE_ITO["vermillion"],
    "budget": GREY,
}


def style(
    fig: go.Figure,
    title: str | None = None,
    height: int | None = None,
    legend: bool = True,
    top: int | None = None,
    **layout: Any,
) -> go.Figure:
    """Apply the shared look in place and return ``fig``.

    The title sits top left and the legend on one line under it, both in the top margin
    (``top`` px; more when there are subplot titles), so neither covers the data.
    """
    h = height or fig.layout.height or 450
    top = top or (95 if legend else 60)
    fig.update_layout(
        template="none",
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
        font=dict(color=FONT_COLOUR, size=12, family="Helvetica Neue, Arial, sans-serif"),
        title=dict(text=title, x=0.01, xanchor="left", y=1 - 10 / h, yanchor="top", font=dict(size=15))
        if title
        else None,
        showlegend=legend,
        legend=dict(
            orientation="h",
            x=0.01,
            xanchor="left",
            y=1 - 38 / h,
            yanchor="top",
            yref="container",
            bgcolor="rgba(0,0,0,0)",
            tracegroupgap=4,
        ),
        margin=dict(l=70, r=30, t=top, b=55),
        hoverlabel=dict(font=dict(size=12)),
        height=h,
        **layout,
    )
    axis = dict(gridcolor=GRID_COLOUR, zerolinecolor=GRID_COLOUR, linecolor=FONT_COLOUR, tickcolor=FONT_COLOUR)
    fig.update_xaxes(automargin=True, **axis)
    fig.update_yaxes(automargin=True, **axis)
    return fig


def message_figure(text: str, title: str | None = None, height: int = 300) -> go.Figure:
    """An empty figure that says why there is nothing to draw (empty trace, no snapshot...)."""
    fig = go.Figure()
    fig.add_annotation(text=text, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font=dict(size=14))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return style(fig, title, height=height, legend=False)


def legend_swatch(name: str, colour: str, group: str | None = None) -> go.Scatter:
    """A legend entry with no data (for heatmap categories, which have no legend of their own)."""
    return go.Scatter(
        x=[None],
        y=[None],
        mode="markers",
        marker=dict(symbol="square", size=12, color=colour),
        name=name,
        legendgroup=group or name,
        showlegend=True,
        hoverinfo="skip",
    )
