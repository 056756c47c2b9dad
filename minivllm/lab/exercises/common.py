"""Shared helpers for exercise checks: run a student's function, compare, print a friendly verdict."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


def rounded(value: Any, digits: int = 4) -> Any:
    """``value`` with every float in it rounded to ``digits`` decimals (lists, tuples and dicts walked), so a
    message shows 0.3 rather than 0.30000000000000004; floats that are already short print unchanged."""
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*(rounded(v, digits) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(rounded(v, digits) for v in value)
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    return value


def show(value: Any) -> str:
    """``repr`` of ``value`` with its floats rounded (:func:`rounded`)."""
    return repr(rounded(value))


def check_cases(name: str, student: Callable[..., Any], cases: Iterable[tuple[tuple, Any]]) -> bool:
    """Call ``student(*args)`` for each case; print "Correct" or the first case that differs. Never raises
    on a wrong or unfinished answer (an exercise stub returns None), so notebooks always run."""
    for args, expected in cases:
        try:
            got = student(*args)
        except Exception as e:  # a half-written answer: say what went wrong, keep the notebook running
            print(f"{name}: not yet — {type(e).__name__}: {e}")
            return False
        if got != expected:
            shown = ", ".join(map(show, args))
            print(f"{name}: not yet — for ({shown}) expected {show(expected)}, got {show(got)}")
            return False
    print(f"{name}: correct!")
    return True
