"""Preemption and prefix-cache recovery timeline (§11.5, paths A and B).

Preemption forgets: the victim's blocks go back to the pool and ``num_computed_tokens``
returns to 0. Its full blocks keep their hashes, so at resumption the prefix cache may find
them again (path A: recovered, no compute) unless they were popped for reuse meanwhile
(path B: recomputed). Top panel, per engine step: the K/V tokens dropped by preemption
(below zero), then the tokens recovered from the cache at resumption and those recomputed
in the following chunks (above zero). Bottom panel: one bar per preemption with the same
split, so path A and path B read at a glance.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from minivllm.lab.viz.figures.theme import COLOURS, FONT_COLOUR, GREY, message_figure, style
from minivllm.lab.viz.figures.timeline import RecoveryEvent, recovery_events
from minivllm.metrics.trace import EngineTrace


def event_label(ev: RecoveryEvent) -> str:
    resumed = f"resumed @{ev.resume_step}" if ev.resume_step is not None else "not resumed"
    return f"{ev.request_id} · preempted @{ev.preempt_step} · {resumed}"


def recovery_timeline(
    trace: EngineTrace, title: str | None = None, block_size: int = 16, events: list[RecoveryEvent] | None = None
) -> go.Figure:
    """Tokens dropped by each preemption, and how they came back: prefix cache (A) or recompute (B)."""
    title = title or "Preemption and prefix-cache recovery (§11.5)"
    events = recovery_events(trace, block_size) if events is None else events
    if not events:
        return message_figure("No preemptions in this trace: nothing was dropped, nothing to recover.", title)
    fig = make_subplots(
        rows=2,
        cols=1,
        row_heights=[0.55, 0.45],
        vertical_spacing=0.22,
        subplot_titles=("tokens per engine step", "per preemption (path A: back from the cache; B: recomputed)"),
    )
    dropped: dict[int, int] = {}
    cached: dict[int, int] = {}
    redo: dict[int, int] = {}
    who: dict[int, list[str]] = {}
    for ev in events:
        dropped[ev.preempt_step] = dropped.get(ev.preempt_step, 0) + ev.computed_before
        who.setdefault(ev.preempt_step, []).append(ev.request_id)
        if ev.resume_step is not None:
            cached[ev.resume_step] = cached.get(ev.resume_step, 0) + ev.cached
        for k, n in ev.recompute_steps.items():
            redo[k] = redo.get(k, 0) + n
    bar = dict(width=0.8, marker_line_width=0)
    fig.add_trace(
        go.Bar(
            x=list(dropped),
            y=[-v for v in dropped.values()],
            customdata=[", ".join(who[k]) for k in dropped],
            name="K/V dropped by preemption",
            marker_color=GREY,
            hovertemplate="step %{x}: preempted %{customdata}, %{y} tokens of K/V dropped<extra></extra>",
            **bar,
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Bar(
            x=list(cached),
            y=list(cached.values()),
            name="recovered from the prefix cache (A)",
            legendgroup="recovered from the prefix cache (A)",
            marker_color=COLOURS["cached"],
            hovertemplate="step %{x}: %{y} tokens found again in the prefix cache<extra></extra>",
            **bar,
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Bar(
            x=list(redo),
            y=list(redo.values()),
            name="recomputed (B)",
            legendgroup="recomputed (B)",
            marker_color=COLOURS["recomputed"],
            hovertemplate="step %{x}: %{y} tokens recomputed<extra></extra>",
            **bar,
        ),
        row=1,
        col=1,
    )
    labels = [event_label(ev) for ev in events]
    for name, values, colour, show in (
        ("recovered from the prefix cache (A)", [ev.cached for ev in events], COLOURS["cached"], False),
        ("recomputed (B)", [ev.recomputed for ev in events], COLOURS["recomputed"], False),
        ("new prefill after resuming", [ev.new_tokens for ev in events], COLOURS["prefill"], True),
    ):
        fig.add_trace(
            go.Bar(
                orientation="h",
                y=labels,
                x=values,
                name=name,
                legendgroup=name,
                showlegend=show,
                marker=dict(color=colour, line=dict(width=0)),
                hovertemplate=f"%{{y}}<br>{name}: %{{x}} tokens<extra></extra>",
            ),
            row=2,
            col=1,
        )
    for ev, label in zip(events, labels):
        fig.add_annotation(
            x=ev.cached + ev.recomputed + ev.new_tokens,
            y=label,
            text=f" path {ev.path}",
            showarrow=False,
            xanchor="left",
            row=2,
            col=1,
        )
    fig.update_layout(barmode="relative", bargap=0.25)
    fig.update_xaxes(title=None, row=1, col=1)
    fig.update_yaxes(title="tokens (dropped < 0 < back)", row=1, col=1, zerolinecolor=FONT_COLOUR)
    fig.update_xaxes(title="tokens", row=2, col=1)
    fig.update_yaxes(autorange="reversed", row=2, col=1)
    fig.update_annotations(font=dict(color=FONT_COLOUR))
    return style(fig, title, height=420 + 26 * min(len(events), 20), top=115)
