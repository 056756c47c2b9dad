"""Goodput explorer (§11.7): move the TPOT SLO, see where the goodput peak of a budget sweep moves.

The runs are given (one EngineTrace per budget, already simulated); the slider only recounts which
requests met the SLO (:func:`minivllm.lab.metrics.goodput.goodput`) and redraws the curve through
``sync_figure``, so it costs no simulation. The "best" budget is the smallest whose goodput is within
``TIE`` of the highest: budgets closer than that are not told apart. Where no request of any run meets
the SLO there is no best budget, and the summary says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as W

from minivllm.lab.metrics.goodput import goodput
from minivllm.lab.metrics.summary import summarize
from minivllm.lab.viz.figures.tuning import goodput_curve
from minivllm.lab.viz.widgets.base import FigureWidget, message_html, sync_figure
from minivllm.metrics.trace import EngineTrace

SLOS_MS = (10, 15, 25, 35, 50, 75, 100, 150, 200, 300)
TIE = 0.01  # goodputs within 1% of the best are a tie


def best_budget(curve: Mapping[int, float], tie: float = TIE) -> int | None:
    """The smallest budget whose goodput is within ``tie`` of the highest; None when no budget has any
    goodput (no request met the SLO), since a zero goodput is no peak."""
    top = max(curve.values(), default=0.0)
    if not top > 0:
        return None
    return min(b for b, g in curve.items() if g >= top * (1 - tie))


class GoodputExplorer:
    """A TPOT-SLO slider over a budget sweep; ``explorer.slo.value = 100`` redraws the goodput curve."""

    def __init__(self, traces: Mapping[int, EngineTrace], slos_ms: Sequence[float] = SLOS_MS, value: float = 50):
        if not traces:
            raise ValueError("GoodputExplorer needs at least one run (a {budget: trace} mapping).")
        if value not in slos_ms:
            raise ValueError(f"value must be one of slos_ms {tuple(slos_ms)}, got {value!r}.")
        self.traces = dict(sorted(traces.items()))
        self.throughput = {b: summarize(t).output_throughput for b, t in self.traces.items()}
        self.slo = W.SelectionSlider(
            options=list(slos_ms), value=value, description="TPOT SLO (ms)", style={"description_width": "initial"}
        )
        self.info = W.HTML()
        curve = self.curve(value)
        self.fig = FigureWidget(goodput_curve(curve, self.throughput, value))
        self.info.value = message_html(self._summary(value, curve), "info")
        self.slo.observe(self._redraw, names="value")
        self.ui = W.VBox([self.slo, self.info, self.fig])

    def curve(self, slo_ms: float) -> dict[int, float]:
        """Goodput (tokens/s) per budget at this SLO."""
        return {b: goodput(t, slo_ms / 1e3) for b, t in self.traces.items()}

    def _redraw(self, change: Any = None) -> None:
        slo = self.slo.value
        curve = self.curve(slo)  # once per move of the slider: the figure and the summary share it
        sync_figure(self.fig, goodput_curve(curve, self.throughput, slo))
        self.info.value = message_html(self._summary(slo, curve), "info")

    def summary(self) -> str:
        return self._summary(self.slo.value, self.curve(self.slo.value))

    def _summary(self, slo: float, curve: Mapping[int, float]) -> str:
        best = best_budget(curve)
        if best is None:
            return (
                f"TPOT SLO {slo:g} ms: no budget meets it (no request's TPOT is within {slo:g} ms in any of the "
                f"{len(self.traces)} runs), so goodput is 0 at every budget and there is no best budget"
            )
        return (
            f"TPOT SLO {slo:g} ms: goodput is highest at budget {best} ({curve[best]:.0f} tok/s; "
            f"raw throughput there {self.throughput[best]:.0f} tok/s)"
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.ui._repr_mimebundle_(**kwargs)
