"""Shared helpers for exercise checks: run a student's function, compare, print a friendly verdict."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


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
            shown = ", ".join(map(repr, args))
            print(f"{name}: not yet — for ({shown}) expected {expected!r}, got {got!r}")
            return False
    print(f"{name}: correct!")
    return True
