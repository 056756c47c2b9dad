"""Budget-tuning figures (§11.7): goodput under a TPOT SLO, and KV memory against the budget.

* :func:`goodput_curve`: goodput (output tokens/s of requests within a TPOT SLO) and raw output
  throughput against ``max_num_batched_tokens``, for one SLO; the widget
  :class:`minivllm.lab.viz.widgets.goodput.GoodputExplorer` redraws it as the SLO moves.
* :func:`memory_curves`: what the profiling run's activation reserve does at a fixed GPU size
  (:mod:`minivllm.lab.sim.memory`): KV blocks, throughput and preemptions against the budget.

Titles describe the plotted data: :func:`minivllm.lab.viz.figures.curves.trend` for the goodput curve,
first → last value and relative change for the memory panels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from minivllm.lab.viz.figures.curves import _short, trend
from minivllm.lab.viz.figures.theme import FONT_COLOUR, GREY, SEQUENCE, message_figure, style


def _log_axis(fig: go.Figure, xs: Sequence[int], title: str = "max_num_batched_tokens (tokens)") -> None:
    fig.update_xaxes(title=title, type="log", tickvals=list(xs), ticktext=[str(x) for x in xs])


def change(ys: Sequence[float]) -> str:
    """First → last value and the relative change, e.g. "638 → 601 (-6%)": small changes keep their sign
    (trend() calls a curve within ±5% flat; here a consistent few-percent fall is the point)."""
    first, last = ys[0], ys[-1]
    rel = f" ({(last - first) / first:+.0%})" if first else ""
    return f"{_short(first)} → {_short(last)}{rel}"


def goodput_curve(
    goodput: Mapping[int, float], throughput: Mapping[int, float], slo_ms: float, title: str | None = None
) -> go.Figure:
    """Goodput at one TPOT SLO and raw output throughput (tokens/s) against the budget."""
    xs = sorted(goodput)
    if not xs:
        return message_figure("No runs: simulate one engine per budget first.", title or "Goodput")
    good = [goodput[x] for x in xs]
    raw = [throughput[x] for x in xs]
    shape = trend(xs, good) if any(g > 0 for g in good) else "0 at every budget (no request meets the SLO)"
    title = title or f"Goodput at TPOT ≤ {slo_ms:g} ms: {shape}; raw throughput: {trend(xs, raw)}"
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=raw,
            mode="lines+markers",
            name="raw output throughput",
            line=dict(color=GREY, dash="dash", width=2),
            hovertemplate="budget %{x}: %{y:.0f} tok/s<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=good,
            mode="lines+markers",
            name=f"goodput (TPOT ≤ {slo_ms:g} ms)",
            line=dict(color=SEQUENCE[2], width=3),
            hovertemplate="budget %{x}: %{y:.0f} tok/s within the SLO<extra></extra>",
        )
    )
    _log_axis(fig, xs)
    fig.update_yaxes(title="output tokens / s", rangemode="tozero")
    return style(fig, title, height=380)


def memory_curves(
    rows: Sequence[Mapping[str, float]], title: str | None = None, reference: Mapping[str, float] | None = None
) -> go.Figure:
    """KV blocks, output throughput and preemptions against the budget, one row per budget
    (keys ``budget``, ``kv_blocks``, ``output_throughput``, ``num_preemptions``). ``reference``: one
    run at the largest budget with the smallest budget's KV blocks, drawn as a hollow marker."""
    title = title or "KV memory against the budget (§11.7)"
    if not rows:
        return message_figure("No runs: simulate one engine per budget first.", title)
    xs = [int(r["budget"]) for r in rows]
    panels = (
        ("KV blocks", "kv_blocks", "blocks of 16 tokens"),
        ("output throughput", "output_throughput", "output tokens / s"),
        ("preemptions", "num_preemptions", "preemptions"),
    )
    titles = [f"{name}: {change([float(r[key]) for r in rows])}" for name, key, _ in panels]
    fig = make_subplots(rows=1, cols=3, subplot_titles=titles, horizontal_spacing=0.09)
    for i, (name, key, y_title) in enumerate(panels):
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[r[key] for r in rows],
                mode="lines+markers",
                name=name,
                showlegend=False,
                line=dict(color=SEQUENCE[i], width=2),
                hovertemplate=f"budget %{{x}}: {name} %{{y:.4g}}<extra></extra>",
            ),
            row=1,
            col=i + 1,
        )
        if reference is not None and key in reference:
            fig.add_trace(
                go.Scatter(
                    x=[reference["budget"]],
                    y=[reference[key]],
                    mode="markers",
                    name=f"budget {reference['budget']:g} with the KV blocks of budget {xs[0]}",
                    showlegend=i == 1,
                    marker=dict(color=SEQUENCE[i], size=11, symbol="circle-open", line=dict(width=2)),
                ),
                row=1,
                col=i + 1,
            )
        # from 0: a panel starting at its smallest value (545 blocks) makes a 10% change look like a collapse
        fig.update_yaxes(title=y_title, rangemode="tozero", row=1, col=i + 1)
    _log_axis(fig, xs, "budget (tokens)")
    fig.update_annotations(font=dict(color=FONT_COLOUR, size=12))
    return style(fig, title, height=400, top=115)
