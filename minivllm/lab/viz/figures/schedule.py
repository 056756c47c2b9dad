"""Chunk schedule (§11.3): how each step's token budget was filled.

Per step, one column: decode tokens (blue) at the bottom, then speculative draft tokens
(purple), then one orange block per prefill chunk (hover names its request), under the
dashed budget line (``max_num_batched_tokens``). A column that reaches the line is a full
step; the gap under it is budget left unused. :func:`step_view` is the same step seen
from the requests, for the step player.
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from minivllm.lab.viz.figures.theme import COLOURS, message_figure, style
from minivllm.metrics.trace import EngineTrace, StepRecord


@dataclass
class ScheduleColumns:
    """The chunk schedule as flat lists (one entry per bar), ready for go.Bar."""

    steps: list[int]
    decode: list[int]
    spec: list[int]
    budget: list[int]
    chunk_step: list[int]  # one entry per prefill chunk
    chunk_base: list[int]
    chunk_tokens: list[int]
    chunk_request: list[str]


def schedule_columns(trace: EngineTrace) -> ScheduleColumns:
    cols = ScheduleColumns([], [], [], [], [], [], [], [])
    for s in trace.steps:
        d, k = sum(s.decode_tokens.values()), sum(s.spec_tokens.values())
        cols.steps.append(s.step)
        cols.decode.append(d)
        cols.spec.append(k)
        cols.budget.append(s.token_budget)
        base = d + k
        for req_id, n in s.prefill_tokens.items():
            cols.chunk_step.append(s.step)
            cols.chunk_base.append(base)
            cols.chunk_tokens.append(n)
            cols.chunk_request.append(req_id)
            base += n
    return cols


def chunk_schedule(trace: EngineTrace, title: str | None = None, height: int = 420) -> go.Figure:
    """Stacked tokens per step (decode, drafts, prefill chunk per request) under the budget line."""
    title = title or "Chunk schedule: the token budget of every step (§11.3)"
    if not trace.steps:
        return message_figure("This trace has no steps: run the engine first.", title)
    c = schedule_columns(trace)
    bar = dict(width=0.85, marker_line_width=0)
    fig = go.Figure(
        [
            go.Bar(
                x=c.steps,
                y=c.decode,
                name="decode tokens",
                marker_color=COLOURS["decode"],
                hovertemplate="step %{x}: %{y} decode tokens<extra></extra>",
                **bar,
            ),
            go.Bar(
                x=c.steps,
                y=c.spec,
                base=c.decode,
                name="draft (spec) tokens",
                marker_color=COLOURS["spec"],
                customdata=c.spec,  # on a bar drawn from base, plotly's %{y} is its top (base + y)
                hovertemplate="step %{x}: %{customdata} draft tokens verified<extra></extra>",
                **bar,
            ),
            go.Bar(
                x=c.chunk_step,
                y=c.chunk_tokens,
                base=c.chunk_base,
                customdata=[[r, n] for r, n in zip(c.chunk_request, c.chunk_tokens)],
                name="prefill chunk (one per request)",
                marker=dict(color=COLOURS["prefill"], line=dict(width=0.6, color="rgba(128,128,128,0.9)")),
                width=0.85,
                hovertemplate="step %{x}: %{customdata[0]} prefill chunk of %{customdata[1]} tokens<extra></extra>",
            ),
            go.Scatter(
                x=c.steps,
                y=c.budget,
                mode="lines",
                line=dict(color=COLOURS["budget"], dash="dash", width=1.5, shape="hvh"),
                name="budget (max_num_batched_tokens)",
                hovertemplate="step %{x}: budget %{y} tokens<extra></extra>",
            ),
        ]
    )
    fig.update_layout(barmode="overlay", bargap=0.1)
    fig.update_xaxes(title="engine step")
    fig.update_yaxes(title="tokens scheduled in the step", rangemode="tozero")
    return style(fig, title, height=height)


def step_view(trace: EngineTrace, k: int) -> dict:
    """Step ``k`` seen from the requests: per request its prefill / decode / draft tokens, and a title.

    Returns ``{"requests", "prefill", "decode", "spec", "title", "step"}`` (lists aligned with
    "requests", which are the requests scheduled in the step, in schedule order, then the ones
    preempted in it with zeros).
    """
    s: StepRecord = trace.steps[k]
    reqs = list(dict.fromkeys([*s.decode_tokens, *s.spec_tokens, *s.prefill_tokens, *s.preempted]))
    used = s.num_scheduled_tokens
    parts = [
        f"step {s.step}: {used}/{s.token_budget} tokens",
        f"{(s.end - s.start) * 1e3:.2f} ms",
        f"{s.num_running} running, {s.num_waiting} waiting",
        f"KV {s.kv_usage:.0%}",
    ]
    if s.preempted:
        parts.append("preempted " + ", ".join(s.preempted))
    return {
        "step": s.step,
        "requests": reqs,
        "prefill": [s.prefill_tokens.get(r, 0) for r in reqs],
        "decode": [s.decode_tokens.get(r, 0) for r in reqs],
        "spec": [s.spec_tokens.get(r, 0) for r in reqs],
        "title": " · ".join(parts),
    }
