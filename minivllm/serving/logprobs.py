"""The OpenAI ``logprobs`` objects of a choice, from a completion's ``{token id: Logprob}`` per token (§11.9).

Mirrors vLLM 0.8.5's ``OpenAIServingCompletion._create_completion_logprobs`` and
``OpenAIServingChat._create_chat_logprobs`` / ``_get_top_logprobs``, quirks included:

- a token's string is its ``decoded_token`` (the tokenizer's token, e.g. ``"ĠParis"``), and ``text_offset``
  adds up those strings' lengths from the text already sent (0, or what earlier stream chunks carried);
- completions: ``top_logprobs`` per token is ``{token: logprob}`` of the first k + 1 entries (the sampled
  token, then the top k; a repeated token string keeps one entry);
- chat: ``top_logprobs`` lists the first k entries of the same dict (the sampled token first);
- a log-probability is at least -9999.0 (OpenAI's stand-in for -inf, which JSON cannot carry);
- ``prompt_logprobs`` (vLLM's extra field): the list of ``RequestOutput.prompt_logprobs``, per choice for
  completions, beside ``choices`` for chat.
"""

from __future__ import annotations

from typing import Any

from minivllm.sequence import Logprob

FLOOR = -9999.0


def _token(lp: Logprob, token_id: int, tokenizer: Any) -> str:
    if lp.decoded_token is not None:
        return lp.decoded_token
    return str(tokenizer.decode([token_id])) if tokenizer is not None else f"token_id:{token_id}"


def completion_logprobs(
    token_ids: list[int], logprobs: list[dict[int, Logprob]], k: int, tokenizer: Any, initial_text_offset: int = 0
) -> dict[str, Any]:
    """``choice.logprobs`` of ``/v1/completions``: tokens, token_logprobs, top_logprobs, text_offset."""
    tokens: list[str] = []
    token_logprobs: list[float] = []
    top: list[dict[str, float]] = []
    offsets: list[int] = []
    last_len = 0
    for token_id, position in zip(token_ids, logprobs):
        token = _token(position[token_id], token_id, tokenizer)
        tokens.append(token)
        token_logprobs.append(max(position[token_id].logprob, FLOOR))
        top.append(
            {_token(lp, t, tokenizer): max(lp.logprob, FLOOR) for i, (t, lp) in enumerate(position.items()) if i <= k}
        )
        offsets.append(initial_text_offset if not offsets else offsets[-1] + last_len)
        last_len = len(token)
    return {"text_offset": offsets, "token_logprobs": token_logprobs, "tokens": tokens, "top_logprobs": top}


def _entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": max(logprob, FLOOR), "bytes": list(token.encode("utf-8", errors="replace"))}


def chat_logprobs(token_ids: list[int], logprobs: list[dict[int, Logprob]], k: int, tokenizer: Any) -> dict[str, Any]:
    """``choice.logprobs`` of ``/v1/chat/completions``: ``{"content": [{token, logprob, bytes, top_logprobs}]}``."""
    content = []
    for token_id, position in zip(token_ids, logprobs):
        entry = _entry(_token(position[token_id], token_id, tokenizer), position[token_id].logprob)
        entry["top_logprobs"] = [
            _entry(_token(lp, t, tokenizer), lp.logprob) for i, (t, lp) in enumerate(position.items()) if i < k
        ]
        content.append(entry)
    return {"content": content}


def prompt_logprobs_json(prompt_logprobs: list[dict[int, Logprob] | None] | None) -> list[Any] | None:
    """``RequestOutput.prompt_logprobs`` as vLLM's server returns it (``clamp_prompt_logprobs``: -inf becomes
    -9999.0): None first, then ``{token id: {logprob, rank, decoded_token}}`` per prompt token."""
    if prompt_logprobs is None:
        return None
    return [
        None
        if position is None
        else {
            t: {"logprob": max(lp.logprob, FLOOR), "rank": lp.rank, "decoded_token": lp.decoded_token}
            for t, lp in position.items()
        }
        for position in prompt_logprobs
    ]
