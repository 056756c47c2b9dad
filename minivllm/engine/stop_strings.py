"""Stop strings: ``SamplingParams(stop=["\\n\\n", "User:"])`` ends a request when its text contains one (§11.9).

Mirrors vLLM V1, where the detokenizer of the output processor checks the new text after every step
(``vllm/v1/engine/detokenizer.py``, ``check_stop_strings``) and the engine core is then told to finish the
request (``vllm/v1/engine/output_processor.py``). Only the text after the last check (and the characters a
stop string could still straddle) is searched. The output's text is cut where the stop string begins (or
after it, with ``include_stop_str_in_output``); its ``finish_reason`` is "stop" and its ``stop_reason`` the
string. The token ids keep every generated token, including the one that completed the stop string.

Deviation: the whole completion is decoded at each step a request with stop strings gets tokens (vLLM
decodes incrementally); a request's answer is short, and requests without stop strings pay nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class StopStringChecker:
    """One request's stop strings and how much of its text has been checked."""

    stops: list[str]
    include_in_output: bool = False
    checked: int = 0  # characters of the text already searched

    def check(self, text: str) -> tuple[str, str] | None:
        """(the text to return, the stop string) if ``text`` now contains a stop string, else None."""
        longest = max(len(s) for s in self.stops)
        start = max(0, self.checked - longest + 1)  # a stop string may straddle the last check
        self.checked = len(text)
        found = [(i, s) for s in self.stops if (i := text.find(s, start)) >= 0]
        if not found:
            return None
        i, stop = min(found)  # the earliest stop string in the text ends the request
        return (text[: i + len(stop)] if self.include_in_output else text[:i]), stop


def checker_for(params: Any) -> StopStringChecker | None:
    """A checker for a request whose SamplingParams has stop strings, else None."""
    if not params.stop:
        return None
    return StopStringChecker(list(params.stop), params.include_stop_str_in_output)


def hold_back(params: Any) -> int | None:
    """How many characters at the end of a streamed text must wait (they may be the start of a stop string):
    the longest stop string less one, 0 when the stop string is kept in the output; None without stop strings."""
    if not params.stop:
        return None
    return 0 if params.include_stop_str_in_output else max(len(s) for s in params.stop) - 1
