"""How a metric moves along a sweep, checked at every step (§11.7's four curves).

The book names each curve's shape ("单调下降", "单调上升", "倒 U 型", "Plateau"); a verdict that looks
only at the two ends cannot tell "rises at every step" from "rises, then flat" or from a dip in the
middle. :func:`segments` classifies every consecutive pair of points as rising, falling or flat
(a change of at most ``tol`` of the earlier value) and merges neighbours of one kind; :func:`describe`
says it in words with the curve's own numbers, e.g. "rises to 1024, then flat (within ±0.6%)".
Not a vLLM file: a lab helper for the chapter notebooks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

TOL = 0.02  # a step that moves a value by at most 2% is flat


@dataclass(frozen=True)
class Segment:
    """Consecutive points of one kind: ``way`` is "rises", "falls" or "flat"."""

    way: str
    start: int  # index of the first point
    end: int  # index of the last point


def _way(a: float, b: float, tol: float) -> str:
    if abs(b - a) <= tol * abs(a):
        return "flat"
    return "rises" if b > a else "falls"


def segments(ys: Sequence[float], tol: float = TOL) -> list[Segment]:
    """Every step of ``ys`` classified and merged: one Segment per run of steps of one kind."""
    if not 0 <= tol < 1:
        raise ValueError(f"tol must be in [0, 1), got {tol!r}.")
    out: list[Segment] = []
    for i in range(len(ys) - 1):
        way = _way(ys[i], ys[i + 1], tol)
        if out and out[-1].way == way:
            out[-1] = Segment(way, out[-1].start, i + 1)
        else:
            out.append(Segment(way, i, i + 1))
    return out


def monotone(ys: Sequence[float], way: str, tol: float = TOL) -> bool:
    """Whether every step of ``ys`` ``way`` ("rises" or "falls") by more than ``tol``."""
    segs = segments(ys, tol)
    return len(segs) == 1 and segs[0].way == way


def describe(xs: Sequence[Any], ys: Sequence[float], tol: float = TOL) -> str:
    """The curve in words, every step checked: "falls at every step", "rises to 1024, then flat (within
    ±0.6%)", "rises to 4096, then falls to 8192 (-3.5%)". A flat stretch gives the largest deviation of
    its points from their mean; a stretch that rises or falls after the first gives its total change."""
    if len(xs) != len(ys):
        raise ValueError(f"xs and ys must have the same length, got {len(xs)} and {len(ys)}.")
    segs = segments(ys, tol)
    if not segs:
        return "one point"
    if len(segs) == 1 and segs[0].way != "flat":
        return f"{segs[0].way} at every step"
    words = []
    for k, s in enumerate(segs):
        part = ys[s.start : s.end + 1]
        last = k == len(segs) - 1
        if s.way == "flat":
            mean = sum(part) / len(part)
            spread = max(abs(y - mean) for y in part) / abs(mean) if mean else 0.0
            where = "" if last else f" to {xs[s.end]}"
            words.append(f"flat{where} (within ±{spread:.1%})")
        elif k == 0:
            words.append(f"{s.way} to {xs[s.end]}")
        else:
            words.append(f"{s.way} to {xs[s.end]} ({part[-1] / part[0] - 1:+.1%})")
    return ", then ".join(words)
