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


Hint = Callable[[tuple, Any, Any], str | None]  # (args, expected, got) -> a hint for a typical wrong answer, or None


def check_cases(
    name: str, student: Callable[..., Any], cases: Iterable[tuple[tuple, Any]], hint: Hint | None = None
) -> bool:
    """Call ``student(*args)`` for each case; print "Correct" or the first case that differs (with ``hint``'s
    advice when it recognises the mistake). Never raises on a wrong or unfinished answer (an exercise stub
    returns None), so notebooks always run."""
    for args, expected in cases:
        try:
            got = student(*args)
        except Exception as e:  # a half-written answer: say what went wrong, keep the notebook running
            print(f"{name}: not yet — {type(e).__name__}: {e}")
            return False
        if got != expected:
            shown = ", ".join(map(show, args))
            advice = hint(args, expected, got) if hint is not None else None
            print(f"{name}: not yet — for ({shown}) expected {show(expected)}, got {show(got)}{hint_text(advice)}")
            return False
    print(f"{name}: correct!")
    return True


def hint_text(advice: str | None) -> str:
    return f"\n  Hint: {advice}" if advice else ""


LAST_TOKEN_RULE = (
    "the last-token rule: a prefix-cache hit never covers a prompt's last token (the step must compute it to get "
    "the logits to sample from), so when every full block of the prompt is cached the hit is one block short "
    "(vLLM's KVCacheManager.get_computed_blocks looks up num_tokens - 1 tokens)."
)


def last_token_rule_hint(got: Any, ignoring_the_rule: int, expected: Any) -> str | None:
    """The last-token-rule hint when ``got`` is the answer that ignores the rule (and that answer is wrong)."""
    return LAST_TOKEN_RULE if got == ignoring_the_rule != expected else None
