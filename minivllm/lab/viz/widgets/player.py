"""Step player (§11.3, §11.5): Play / slider over a finished trace, one engine step at a time.

Top: the whole run's chunk schedule with a marker on the current step. Below: the current
step seen from the requests (prefill / decode / draft tokens each) and, when the trace was
recorded with ``record_block_pool=True``, the KV block map after that step. Play and the
slider are joined with ``widgets.link`` (kernel side: works in pytest and in Colab); every
figure changes inside one ``batch_update``.

Every figure has a fixed width, so the player fits a 1366-px-wide screen in JupyterLab
(``PLAYER_WIDTH``); the block map wraps its blocks into as many rows as the pool needs
(``blocks.fitted_columns``), and on a narrower screen the block map moves under the step chart.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as W
import plotly.graph_objects as go

from minivllm.lab.viz.figures.blocks import block_map_data, fitted_columns, kv_block_map
from minivllm.lab.viz.figures.schedule import chunk_schedule, step_view
from minivllm.lab.viz.figures.theme import COLOURS, OKABE_ITO, message_figure, style
from minivllm.lab.viz.widgets.base import FigureWidget, message_html
from minivllm.metrics.trace import EngineTrace

EMPTY = "This trace has no steps: run the engine first (e.g. run_workload(engine, workload.requests))."
SCREEN_WIDTH = 1366  # a common laptop screen, the narrowest the player is laid out for
# What JupyterLab 4.6 leaves to a cell's output on that screen with its file browser open (as it opens by
# default; measured in Chromium): the side bars, the prompt column and the padding take the rest.
OUTPUT_WIDTH = 934
PLAYER_WIDTH = 920  # every figure of the player fits in this
STEP_WIDTH = 360  # the step chart; the block map gets the rest of the row


def step_figure(view: dict | None = None, width: int | None = None) -> go.Figure:
    """Horizontal stacked bars: tokens each request got in one step (three traces: prefill, decode, spec)."""
    view = view or {"requests": [], "prefill": [], "decode": [], "spec": [], "title": ""}
    fig = go.Figure(
        [
            go.Bar(
                orientation="h",
                y=view["requests"],
                x=view[kind],
                name=name,
                marker_color=COLOURS[kind],
                hovertemplate=f"%{{y}}: %{{x}} {name}<extra></extra>",
            )
            for kind, name in (("decode", "decode tokens"), ("spec", "draft tokens"), ("prefill", "prefill tokens"))
        ]
    )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title="tokens in this step", rangemode="tozero")
    fig.update_yaxes(autorange="reversed", title="request")
    return style(fig, short_title(view["title"]), height=360, width=width)


def short_title(title: str) -> str:
    """The step chart's title: the first part of ``step_view``'s (the info line above shows all of it)."""
    return title.split(" · ")[0]


class StepPlayer:
    """Step through ``trace``: ``player.slider.value = k`` (or press Play) shows step k."""

    def __init__(self, trace: EngineTrace, interval_ms: int = 400) -> None:
        self.trace = trace
        n = len(trace.steps)
        self.play = W.Play(min=0, max=max(n - 1, 0), interval=interval_ms, description="play", disabled=n == 0)
        self.slider = W.IntSlider(min=0, max=max(n - 1, 0), description="step", disabled=n == 0)
        W.link((self.play, "value"), (self.slider, "value"))
        self.info = W.HTML(message_html(EMPTY, "warning") if n == 0 else "")
        self.has_blocks = n > 0 and trace.steps[0].block_pool is not None
        if n == 0:
            self.schedule = FigureWidget(message_figure(EMPTY, "Chunk schedule (§11.3)"))
            self.step_fig = FigureWidget(message_figure(EMPTY, "Step (§11.3)"))
        else:
            sched = chunk_schedule(trace, height=320)
            sched.update_layout(width=PLAYER_WIDTH)
            top = max(max(s.token_budget, s.num_scheduled_tokens) for s in trace.steps)
            sched.add_trace(
                go.Scatter(
                    x=[0, 0],
                    y=[0, top * 1.05],
                    mode="lines",
                    name="current step",
                    line=dict(color=OKABE_ITO["vermillion"], width=3),
                    hoverinfo="skip",
                )
            )
            self.schedule = FigureWidget(sched)
            self.step_fig = FigureWidget(step_figure(step_view(trace, 0), width=STEP_WIDTH))
        self.blocks = None
        if self.has_blocks:
            s = trace.steps[0]
            assert s.block_pool is not None
            width = PLAYER_WIDTH - STEP_WIDTH
            self.block_cols = fitted_columns(len(s.block_pool), width)
            fig = kv_block_map(s.block_pool, s.block_tables, "KV block map (§11.5)", ncols=self.block_cols, width=width)
            self.blocks = FigureWidget(fig)
        self.slider.observe(self._render, names="value")
        self._render()
        lower = [self.step_fig] + ([self.blocks] if self.blocks is not None else [])
        row = W.HBox(lower, layout=W.Layout(flex_flow="row wrap"))  # narrower screens: the map goes below
        self.ui = W.VBox([W.HBox([self.play, self.slider]), self.info, self.schedule, row])

    def _render(self, change: Any = None) -> None:
        if not self.trace.steps:
            return
        k = self.slider.value
        view = step_view(self.trace, k)
        with self.schedule.batch_update():
            self.schedule.data[-1].x = [k, k]
        with self.step_fig.batch_update():
            for tr, kind in zip(self.step_fig.data, ("decode", "spec", "prefill")):
                tr.y, tr.x = view["requests"], view[kind]
            self.step_fig.layout.title.text = short_title(view["title"])
        if self.blocks is not None:
            s = self.trace.steps[k]
            data = block_map_data(s.block_pool, s.block_tables, self.block_cols)
            with self.blocks.batch_update():
                heat = self.blocks.data[0]
                heat.z, heat.text, heat.hovertext = data.z, data.text, data.hover
                for tr, (name, count) in zip(self.blocks.data[2:], data.counts.items()):
                    tr.name = f"{name} ({count})"
                self.blocks.layout.title.text = f"KV block map after step {k} (§11.5)"
        self.info.value = message_html(view["title"])

    def state(self) -> dict:
        """What the player shows now, as plain data (notebooks print it for nbval)."""
        if not self.trace.steps:
            return {"step": None, "message": EMPTY}
        k = self.slider.value
        s = self.trace.steps[k]
        view = step_view(self.trace, k)
        cells = {}
        for r, p, d, sp in zip(view["requests"], view["prefill"], view["decode"], view["spec"]):
            cells[r] = (
                "--" if r in s.preempted else "+".join(f"{c}{n}" for c, n in (("P", p), ("D", d), ("S", sp)) if n)
            )
        out = {
            "step": k,
            "time_ms": round(s.start * 1e3, 3),
            "duration_ms": round(s.duration * 1e3, 3),
            "tokens": f"{s.num_scheduled_tokens}/{s.token_budget}",
            "cells": cells,
            "running": s.num_running,
            "waiting": s.num_waiting,
            "kv_usage": round(s.kv_usage, 4),
            "preempted": list(s.preempted),
            "finished": list(s.finished),
        }
        if s.block_pool is not None:
            out["blocks"] = block_map_data(s.block_pool, s.block_tables).counts
        return out

    def summary(self) -> str:
        st = self.state()
        if st["step"] is None:
            return st["message"]
        cells = " ".join(f"{r}:{c}" for r, c in st["cells"].items())
        return f"step {st['step']}: {st['tokens']} tokens [{cells}] running {st['running']} waiting {st['waiting']}"

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.ui._repr_mimebundle_(**kwargs)
