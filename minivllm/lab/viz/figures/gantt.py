"""Latency Gantt chart (§11.1.3): what every request was doing, step by step, on one time axis.

One row per request (first arrival on top): grey while queued, orange for each prefill
chunk, blue for each decode step, vermillion while preempted. All bars of one step start
and end together, and thin vertical lines mark the step boundaries, so a step stretched
by a long prefill shows as a wide column in which *every* decoding request stalls: such
decode steps (longer than STALL_FACTOR x the run's median step) are drawn purple.
:func:`gantt_compare` puts two runs (chunked and unchunked) side by side on one time scale.

Bars are ``go.Bar(orientation="h", base=start, x=duration)`` (plotly 7 has no
``create_gantt``, and ``px.timeline`` turns numbers into dates), one trace per kind.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from minivllm.lab.metrics.summary import STALL_FACTOR  # the lab's one stall definition (5x the median)
from minivllm.lab.viz.figures.theme import COLOURS, FONT_COLOUR, message_figure, style
from minivllm.lab.viz.figures.timeline import request_order, request_segments
from minivllm.metrics.trace import EngineTrace

MS = 1e3  # the figures speak milliseconds; traces keep seconds
BARS = ("queued", "prefill", "decode", "stalled", "preempted")
LABELS = {
    "queued": "queued",
    "prefill": "prefill chunk",
    "decode": "decode step",
    "stalled": f"decode step > {STALL_FACTOR:g}x median step (stall)",
    "preempted": "preempted",
}
MAX_BOUNDARY_LINES = 2000  # beyond this many steps the boundary lines would be a solid wash


def median_step(trace: EngineTrace) -> float:
    """Median duration (s) of the steps that ran tokens; inf without any (then nothing is a stall)."""
    durations = sorted(s.duration for s in trace.steps if s.num_scheduled_tokens)
    return durations[len(durations) // 2] if durations else float("inf")


def gantt_traces(trace: EngineTrace, showlegend: bool = True, order: list[str] | None = None) -> list[go.BaseTraceType]:
    """The Gantt's traces: one horizontal go.Bar per kind (times in ms), then the step boundaries.

    Arrays are numpy (plotly validates them in one go: a 500-step trace builds in milliseconds);
    ``customdata`` rows are (step or -1, tokens, start ms, end ms, duration ms), ``hovertext`` the request id.
    The hover reads every number from ``customdata``: on a bar drawn from ``base``, plotly's ``%{x}`` is
    where the bar ends (base + x), not its length.
    """
    order = order if order is not None else request_order(trace)
    row = {req_id: i for i, req_id in enumerate(order)}
    by_kind: dict[str, list[tuple]] = {k: [] for k in BARS}
    stall = STALL_FACTOR * median_step(trace)
    for seg in request_segments(trace):
        if seg.request_id in row:
            kind = "stalled" if seg.kind == "decode" and seg.duration > stall else seg.kind
            step = -1 if seg.step is None else seg.step
            by_kind[kind].append((row[seg.request_id], seg.start, seg.end, step, seg.tokens, seg.request_id))
    traces: list[go.BaseTraceType] = []
    for rank, kind in enumerate(BARS):
        rows = by_kind[kind]
        cols = list(zip(*rows)) if rows else [()] * 6
        start, end = np.array(cols[1], dtype=float) * MS, np.array(cols[2], dtype=float) * MS
        traces.append(
            go.Bar(
                orientation="h",
                y=np.array(cols[0], dtype=int),
                base=start,
                x=end - start,
                customdata=np.column_stack([cols[3], cols[4], start, end, end - start]) if rows else np.empty((0, 5)),
                hovertext=np.array(cols[5], dtype=str),
                name=LABELS[kind],
                legendgroup=kind,
                legendrank=100 + rank,
                showlegend=showlegend,
                marker=dict(color=COLOURS[kind], line=dict(width=0)),
                width=0.7,
                hovertemplate=(
                    f"%{{hovertext}}: {LABELS[kind]}<br>step %{{customdata[0]}}, %{{customdata[1]}} tokens"
                    "<br>%{customdata[2]:.1f} - %{customdata[3]:.1f} ms, lasting %{customdata[4]:.1f} ms<extra></extra>"
                ),
            )
        )
    steps = trace.steps if len(trace.steps) <= MAX_BOUNDARY_LINES else []
    ends = np.array([s.end * MS for s in steps], dtype=float)
    gap = np.full(len(steps), np.nan)  # NaN breaks the line between two boundaries
    traces.append(
        go.Scatter(
            x=np.column_stack([ends, ends, gap]).ravel(),
            y=np.column_stack([np.full(len(steps), -0.5), np.full(len(steps), len(order) - 0.5), gap]).ravel(),
            mode="lines",
            line=dict(color="rgba(128,128,128,0.35)", width=0.6),
            name="step boundary",
            legendgroup="boundary",
            legendrank=200,
            showlegend=showlegend and bool(steps),
            hoverinfo="skip",
        )
    )
    return traces


def _request_axis(order: list[str]) -> dict:
    """Numeric rows labelled with request ids, first arrival on top."""
    show = len(order) <= 60
    return dict(
        tickmode="array",
        tickvals=list(range(len(order))) if show else [],
        ticktext=order if show else [],
        range=[len(order) - 0.5, -0.5],
        showgrid=False,
        title="request" if show else f"{len(order)} requests (by arrival)",
    )


def latency_gantt(trace: EngineTrace, title: str | None = None, height: int | None = None) -> go.Figure:
    """Per request: queued, prefill chunks, decode steps and preempted gaps against time (ms)."""
    title = title or "Latency Gantt: every request, every step (§11.1.3)"
    if not trace.requests:
        return message_figure("No requests in this trace: run the engine on a workload first.", title)
    order = request_order(trace)
    fig = go.Figure(gantt_traces(trace, order=order))
    fig.update_layout(barmode="overlay", bargap=0.2)
    fig.update_xaxes(title="time since the first arrival (ms)", rangemode="tozero")
    fig.update_yaxes(**_request_axis(order))
    return style(fig, title, height=height or max(320, 150 + 22 * min(len(order), 40)))


def gantt_compare(traces: Mapping[str, EngineTrace], title: str | None = None, height: int | None = None) -> go.Figure:
    """Several runs of one workload side by side (e.g. {"chunked": t1, "unchunked": t2}), same time scale."""
    title = title or "Latency Gantt, side by side (§11.1.3)"
    if not traces or not any(t.requests for t in traces.values()):
        return message_figure("No requests in these traces: run the engine on a workload first.", title)
    labels = list(traces)
    fig = make_subplots(rows=1, cols=len(labels), shared_yaxes=True, subplot_titles=labels, horizontal_spacing=0.03)
    # Rows follow the union of the requests, by arrival, so the same request sits on the same row.
    seen: dict[str, tuple[float, str]] = {}
    for t in traces.values():
        for r in t.requests.values():
            seen.setdefault(r.request_id, (r.arrival_time, r.request_id))
    order = sorted(seen, key=lambda r: seen[r])
    t_max = 0.0
    for col, label in enumerate(labels, start=1):
        trace = traces[label]
        for tr in gantt_traces(trace, showlegend=col == 1, order=order):
            fig.add_trace(tr, row=1, col=col)
        t_max = max(t_max, trace.steps[-1].end if trace.steps else 0.0)
        fig.update_xaxes(title="time (ms)", range=[0, t_max * MS * 1.02 or 1], row=1, col=col)
    fig.update_xaxes(range=[0, t_max * MS * 1.02 or 1])
    shown: set[str] = set()
    for tr in fig.data:  # one legend entry per kind, from the first panel that has any of it
        has_data = tr.x is not None and len(tr.x) > 0
        tr.showlegend = has_data and tr.legendgroup not in shown
        if tr.showlegend:
            shown.add(tr.legendgroup)
    fig.update_yaxes(**_request_axis(order), row=1, col=1)
    fig.update_layout(barmode="overlay", bargap=0.2)
    fig.update_annotations(font=dict(color=FONT_COLOUR, size=13))
    return style(fig, title, height=height or max(320, 150 + 22 * min(len(order), 40)), top=115)
