"""Incremental detokenization: the text each step adds to a request (§11.9): the server's streams and the
output processor's stop-string check (which then costs O(new tokens) per step, not O(text so far)).

Mirrors ``vllm/v1/engine/detokenizer.py`` (``IncrementalDetokenizer``) and the offset rule of
``vllm/transformers_utils/detokenizer_utils.py`` (``detokenize_incrementally``): decode a small
window of the output tokens twice, with and without the new tokens, and emit the difference. A
window whose text ends in U+FFFD (an unfinished UTF-8 character: a byte-level BPE token can be half a
character) is held back until the next token completes it, or until the request finishes.

Only the output tokens are decoded (as ``LLM.generate`` decodes ``RequestOutput.text``), so the
concatenated deltas equal ``tokenizer.decode(output_ids, skip_special_tokens=True)``.
"""

from __future__ import annotations

from typing import Any

REPLACEMENT_CHAR = "\ufffd"


class IncrementalDetokenizer:
    """Feed it new token ids step by step; it returns the new text."""

    def __init__(self, tokenizer: Any | None) -> None:
        self.tokenizer = tokenizer
        self.token_ids: list[int] = []
        self.prefix_offset = 0  # start of the window already turned into text
        self.read_offset = 0  # end of that window: tokens after it are new
        self.text = ""

    @staticmethod
    def _decode(tokenizer: Any, ids: list[int]) -> str:
        text: str = tokenizer.decode(ids, skip_special_tokens=True)
        return text

    def update(self, new_token_ids: list[int], finished: bool = False) -> str:
        """Add tokens; return the text they complete ("" when held back or without a tokenizer)."""
        self.token_ids.extend(new_token_ids)
        tokenizer = self.tokenizer
        if tokenizer is None or self.read_offset == len(self.token_ids):
            return ""
        prefix = self._decode(tokenizer, self.token_ids[self.prefix_offset : self.read_offset])
        full = self._decode(tokenizer, self.token_ids[self.prefix_offset :])
        if full.endswith(REPLACEMENT_CHAR) and not finished:
            return ""  # half a character: wait for the rest
        delta = full[len(prefix) :] if full.startswith(prefix) else full
        # The emitted window ended on a whole character, so the next window can start there.
        self.prefix_offset, self.read_offset = self.read_offset, len(self.token_ids)
        self.text += delta
        return delta
