"""Curves over runs and over time (§11.7, §11.9).

* :func:`chunk_size_curves` (§11.7): the four curves of a chunk-size sweep: TTFT, TPOT, output
  throughput and compute utilisation (the share of peak FLOP/s, ``metrics["utilisation"]`` from
  :func:`minivllm.lab.sim.utilisation.trace_utilisation`) against the budget (max_num_batched_tokens);
  results without a utilisation show mean tokens per step in the 4th panel, titled as such. The book
  expects TTFT to fall, TPOT to rise, throughput to be an inverted U and utilisation to plateau; each
  panel's title says what its own data does (:func:`trend`), so a flat line is titled flat.
* :func:`latency_cdfs`: TTFT and TPOT distributions of one or more runs.
* :func:`queue_kv_over_time`: running / waiting queue lengths and KV-cache usage per step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from minivllm.lab.viz.figures.theme import FONT_COLOUR, GREY, OKABE_ITO, SEQUENCE, message_figure, style
from minivllm.metrics.trace import EngineTrace

MS = 1e3
# (panel name, [(metric key, line label, dash)], scale, y-axis title); the title adds the first line's trend
PANELS = (
    ("TTFT p50", [("ttft_p50", "TTFT p50", "solid"), ("ttft_p99", "TTFT p99", "dash")], MS, "TTFT (ms)"),
    ("TPOT p50", [("tpot_p50", "TPOT p50", "solid"), ("tpot_p99", "TPOT p99", "dash")], MS, "TPOT (ms)"),
    ("output throughput", [("output_throughput", "output tok/s", "solid")], 1.0, "output tokens / s"),
    ("mean tokens per step", [("tokens_per_step", "tokens per step", "solid")], 1.0, "mean tokens per step"),
)
# the 4th panel when every point has a "utilisation" (fraction of peak FLOP/s): shown in percent
UTILISATION = ("compute utilisation, % of peak", [("utilisation", "% of peak FLOP/s", "solid")], 100.0, "% of peak")
FLAT = 0.05  # a curve whose values stay within +-5% of their mean is called flat


def _short(v: float) -> str:
    return f"{v / 1e3:.3g}k" if abs(v) >= 1e3 else f"{v:.3g}"


def trend(xs: Sequence[Any], ys: Sequence[float], plateau: bool = False) -> str:
    """What a curve does as x grows, in words and its own numbers: flat (all values within FLAT of their
    mean), else whether it rises or falls from the first point to the last, and where it is highest or
    lowest when that is inside the range by more than FLAT. With ``plateau``, also where it levels off:
    the first x from which at least the last 3 points stay within FLAT of their mean. NaNs are left out."""
    pairs = [(x, y) for x, y in zip(xs, ys) if not math.isnan(y)]
    if len(pairs) < 2:
        return "one point"
    xs, ys = [x for x, _ in pairs], [y for _, y in pairs]
    mean = sum(ys) / len(ys)
    if mean == 0 or (max(ys) - min(ys)) <= 2 * FLAT * abs(mean):
        return f"flat (within ±{FLAT:.0%})"
    way = "rises" if ys[-1] > ys[0] else "falls" if ys[-1] < ys[0] else "ends where it starts"
    words = f"{way}, {_short(ys[0])} → {_short(ys[-1])}"
    top, bottom, ends = ys.index(max(ys)), ys.index(min(ys)), (ys[0], ys[-1])
    if 0 < top < len(ys) - 1 and max(ys) - max(ends) > FLAT * abs(mean):
        words += f"; highest at {xs[top]}"
    elif 0 < bottom < len(ys) - 1 and min(ends) - min(ys) > FLAT * abs(mean):
        words += f"; lowest at {xs[bottom]}"
    if plateau:
        for i in range(len(ys) - 3 + 1):
            tail = ys[i:]
            m = sum(tail) / len(tail)
            if i > 0 and (max(tail) - min(tail)) <= 2 * FLAT * abs(m):
                words += f"; levels off from {xs[i]} (within ±{FLAT:.0%})"
                break
    return words


def tokens_per_step(metrics: Mapping[str, float]) -> float:
    """Mean tokens per engine step (prompt + output tokens / steps): how full the batches ran.
    Grows with the budget until the workload cannot fill bigger steps, then flattens."""
    if metrics.get("tokens_per_step") is not None:
        return float(metrics["tokens_per_step"])
    steps = metrics.get("num_steps") or 0
    tokens = (metrics.get("num_prompt_tokens") or 0) + (metrics.get("num_output_tokens") or 0)
    return tokens / steps if steps else math.nan


def sweep_points(results: Any, param: str = "max_num_batched_tokens") -> list[tuple[Any, Mapping[str, float]]]:
    """(value, metrics) pairs sorted by value, from ``{value: metrics}``, ``[(value, metrics)]`` or
    ``bench`` results (``[{"point": {param: v}, "metrics": {...}}]``)."""
    if isinstance(results, Mapping):
        pairs = list(results.items())
    else:
        pairs = []
        for r in results:
            if isinstance(r, Mapping) and "metrics" in r:
                point = {**r.get("config", {}), **r.get("point", {})}
                if param not in point:
                    raise ValueError(f"sweep result has no value for {param!r}; it has {sorted(point)}.")
                pairs.append((point[param], r["metrics"]))
            else:
                value, metrics = r
                pairs.append((value, metrics))
    return sorted(pairs, key=lambda p: p[0])


def _number(v: Any) -> float:
    return math.nan if v is None else float(v)


def chunk_size_curves(
    results: Any, param: str = "max_num_batched_tokens", title: str | None = None, height: int = 600
) -> go.Figure:
    """The four §11.7 curves against ``param`` (log axis when the values span 8x or more)."""
    title = title or "Chunk size: the four curves (§11.7)"
    points = sweep_points(results, param)
    if not points:
        return message_figure("No sweep results: run one engine per chunk size first.", title)
    xs = [p[0] for p in points]

    def values(key: str, scale: float) -> list[float]:
        return [(tokens_per_step(m) if key == "tokens_per_step" else _number(m.get(key))) * scale for _, m in points]

    has_util = all(m.get("utilisation") is not None for _, m in points)
    panels = (*PANELS[:3], UTILISATION if has_util else PANELS[3])
    titles = [
        f"{name}: {trend(xs, values(lines[0][0], scale), plateau=lines[0][0] == 'utilisation')}"
        for name, lines, scale, _ in panels
    ]
    fig = make_subplots(rows=2, cols=2, subplot_titles=titles, vertical_spacing=0.2)
    for i, (_, lines, scale, y_title) in enumerate(panels):
        row, col = divmod(i, 2)
        for j, (key, label, dash) in enumerate(lines):
            ys = values(key, scale)
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines+markers",
                    name=label,
                    line=dict(color=SEQUENCE[i], dash=dash, width=2),
                    marker=dict(size=7, symbol="circle" if j == 0 else "diamond"),
                    hovertemplate=f"{param} = %{{x}}<br>{label}: %{{y:.3g}}<extra></extra>",
                ),
                row=row + 1,
                col=col + 1,
            )
        fig.update_yaxes(title=y_title, rangemode="tozero", row=row + 1, col=col + 1)
    numeric = [x for x in xs if isinstance(x, (int, float)) and x > 0]
    log = len(numeric) == len(xs) and max(numeric) >= 8 * min(numeric)
    fig.update_xaxes(title=f"{param} (tokens)", type="log" if log else None)
    if log:
        fig.update_xaxes(tickvals=xs, ticktext=[str(x) for x in xs])
    fig.update_annotations(font=dict(color=FONT_COLOUR, size=13))
    return style(fig, title, height=height, top=115)


def _cdf(values: Sequence[float]) -> tuple[list[float], list[float]]:
    xs = sorted(values)
    n = len(xs)
    return xs, [(i + 1) / n for i in range(n)]


def request_latencies(trace: EngineTrace) -> tuple[list[float], list[float]]:
    """(TTFTs, TPOTs) in seconds, with metrics.py's definitions (TPOT for requests with > 1 token)."""
    ttft = [t for r in trace.requests.values() if (t := r.ttft) is not None]  # None: no token out
    tpot = [r.tpot for r in trace.requests.values() if r.tpot is not None]
    return ttft, tpot


def _as_runs(traces: EngineTrace | Mapping[str, EngineTrace]) -> dict[str, EngineTrace]:
    return {"run": traces} if isinstance(traces, EngineTrace) else dict(traces)


def latency_cdfs(traces: EngineTrace | Mapping[str, EngineTrace], title: str | None = None) -> go.Figure:
    """Empirical CDFs of TTFT and TPOT (ms), one line per run."""
    title = title or "TTFT and TPOT distributions (§11.7)"
    runs = _as_runs(traces)
    if not any(t.requests for t in runs.values()):
        return message_figure("No requests in this trace: run the engine on a workload first.", title)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("TTFT", "TPOT"), shared_yaxes=True)
    for i, (label, trace) in enumerate(runs.items()):
        for col, values in enumerate(request_latencies(trace), start=1):
            xs, ys = _cdf([v * MS for v in values])
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines",
                    line=dict(color=SEQUENCE[i % len(SEQUENCE)], shape="hv", width=2),
                    name=label,
                    legendgroup=label,
                    showlegend=col == 1,
                    hovertemplate=f"{label}: %{{y:.0%}} of requests ≤ %{{x:.1f}} ms<extra></extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(title="TTFT (ms)", rangemode="tozero", row=1, col=1)
    fig.update_xaxes(title="TPOT (ms per output token)", rangemode="tozero", row=1, col=2)
    fig.update_yaxes(title="fraction of requests", range=[0, 1.02], tickformat=".0%", row=1, col=1)
    fig.update_annotations(font=dict(color=FONT_COLOUR, size=13))
    return style(fig, title, height=400, top=115)


def queue_kv_over_time(traces: EngineTrace | Mapping[str, EngineTrace], title: str | None = None) -> go.Figure:
    """Running and waiting requests (top) and KV-cache usage (bottom) at the end of each step (ms).

    One run: one colour per series. Several runs: one colour per run, one dash per series."""
    title = title or "Queues and KV-cache usage over time (§11.9)"
    runs = _as_runs(traces)
    if not any(t.steps for t in runs.values()):
        return message_figure("This trace has no steps: run the engine first.", title)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.6, 0.4])
    multi = len(runs) > 1
    names = ("running", "waiting", "KV usage")
    dashes = ("solid", "dot", "dash") if multi else ("solid",) * 3
    for i, (label, trace) in enumerate(runs.items()):
        t = [s.end * MS for s in trace.steps]
        values = (
            [s.num_running for s in trace.steps],
            [s.num_waiting for s in trace.steps],
            [s.kv_usage for s in trace.steps],
        )
        own = [OKABE_ITO[c] for c in ("blue", "orange", "bluish_green")]
        colours = [SEQUENCE[i % len(SEQUENCE)]] * 3 if multi else own
        for j, (name, ys) in enumerate(zip(names, values)):
            fig.add_trace(
                go.Scatter(
                    x=t,
                    y=ys,
                    mode="lines",
                    line=dict(color=colours[j], dash=dashes[j], shape="hv", width=1.8),
                    name=label if multi else name,
                    legendgroup=label if multi else name,
                    showlegend=not multi or j == 0,
                    hovertemplate=f"{label}<br>{name} %{{y{':.0%' if j == 2 else ''}}} at %{{x:.1f}} ms<extra></extra>",
                ),
                row=2 if j == 2 else 1,
                col=1,
            )
    if multi:  # a key for the dashes
        for name, dash in zip(names, dashes):
            fig.add_trace(
                go.Scatter(x=[None], y=[None], mode="lines", line=dict(color=GREY, dash=dash), name=name),
                row=1,
                col=1,
            )
    fig.update_yaxes(title="requests", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title="KV blocks in use", range=[0, 1.05], tickformat=".0%", row=2, col=1)
    fig.update_xaxes(title="time since the first arrival (ms)", row=2, col=1)
    return style(fig, title, height=480)
