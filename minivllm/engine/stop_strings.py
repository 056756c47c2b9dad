"""Stop strings: ``SamplingParams(stop=["\\n\\n", "User:"])`` ends a request when its text contains one (§11.9).

Mirrors vLLM V1, where the detokenizer of the output processor checks the new text after every step
(``vllm/v1/engine/detokenizer.py``, ``check_stop_strings``) and the engine core is then told to finish the
request (``vllm/v1/engine/output_processor.py``). Only the text after the last check (and the characters a
stop string could still straddle) is searched. The output's text is cut where the stop string begins (or
after it, with ``include_stop_str_in_output``); its ``finish_reason`` is "stop" and its ``stop_reason`` the
string. The token ids keep every generated token, including the one that completed the stop string.

The text comes from an incremental detokenizer (``minivllm.engine.detokenizer``, as vLLM's), so a step
costs O(new tokens + number of stop strings x longest stop string), whatever the length of the text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minivllm.engine.detokenizer import REPLACEMENT_CHAR  # what a decoder gives for half a character


@dataclass
class StopStringChecker:
    """One request's stop strings and how much of its text has been checked.

    Each check searches, for each stop string ``s``, only the text the new characters can complete: from
    ``len(s) - 1`` characters before the last check's end (vLLM's ``check_stop_strings`` window). The cost of
    a step is O(number of stop strings x (new characters + longest stop string)), which the server bounds
    (``--max-stop-strings``, ``--max-stop-string-len``), never O(text so far). A text that ends in U+FFFD
    (a character whose UTF-8 bytes are not all decoded yet) is checked only up to that character until the
    request finishes, so a stop string is matched on whole characters: "\ufffd" never matches half an "é".
    """

    stops: list[str]
    include_in_output: bool = False
    checked: int = 0  # characters of the text already searched

    def check(self, text: str, finished: bool = False) -> tuple[str, str] | None:
        """(the text to return, the stop string) if ``text`` now contains a stop string, else None. As in
        vLLM's ``check_stop_strings``, the first stop string of the list found in the window wins, even when
        another one of the list starts earlier in the text (possible only when both complete in one step)."""
        end = len(text)
        if not finished:
            while end > self.checked and text[end - 1] == REPLACEMENT_CHAR:
                end -= 1  # an unfinished character: wait for its last bytes
        if end <= self.checked:
            return None
        found = []
        for s in self.stops:
            if (i := text.find(s, max(0, self.checked - len(s) + 1), end)) >= 0:
                found.append((i, s))
        self.checked = end
        if not found:
            return None
        i, stop = found[0]  # list order, as vLLM: not the earliest match in the text
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
