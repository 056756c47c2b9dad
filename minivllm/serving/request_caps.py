"""Caps on the work one request may ask for, checked on the parsed JSON before anything else (§11.9).

Not in vLLM, whose server bounds neither list: a single valid-looking request with a million
``stop_token_ids`` or ``stop`` strings made every engine step slower for everyone, and a chat of 200,000
empty messages was templated and tokenized (tens of seconds) before its length was found too long. Here
the raw JSON object is checked first: list lengths, message count, characters. A request over a cap is
refused with a 400 naming the field and the allowed range before pydantic builds it (pydantic alone took
6 s on those 200,000 messages), before the chat template and before the tokenizer.

The caps are the server's flags (``--max-stop-token-ids``, ``--max-stop-strings``, ``--max-stop-string-len``,
``--max-chat-messages``, ``--max-prompt-chars``). The defaults fit the model: a chat message costs at least
the template's tokens per message, so more than ``max_model_len`` / that many messages cannot fit; no text
over ``max_model_len`` x the longest token's characters can fit either (``serving.max_prompt_chars``).

The server sets the caps for each request (``CapsContext``, an ASGI middleware setting ``CURRENT``);
the request models' ``mode="before"`` validators read them. ``APIError`` is not a ``ValueError``, so it
passes through pydantic and FastAPI unchanged and becomes the 400.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from minivllm.serving.errors import APIError

DEFAULT_MAX_STOP_TOKEN_IDS = 256  # a model has a handful of special tokens; 256 stop ids is already generous
DEFAULT_MAX_STOP_STRINGS = 64  # OpenAI allows 4
DEFAULT_MAX_STOP_STRING_LEN = 256  # characters; a streamed text holds back this many less one
DEFAULT_MAX_CHAT_MESSAGES = 4096  # without a model (the server derives it from the template and max_model_len)


@dataclass(frozen=True)
class RequestCaps:
    """What one request may send. ``None``: not bounded here (checked later against the model)."""

    max_stop_token_ids: int = DEFAULT_MAX_STOP_TOKEN_IDS
    max_stop_strings: int = DEFAULT_MAX_STOP_STRINGS
    max_stop_string_len: int = DEFAULT_MAX_STOP_STRING_LEN
    max_chat_messages: int = DEFAULT_MAX_CHAT_MESSAGES
    max_prompt_chars: int | None = None  # characters of a prompt, or of all messages (roles and contents)
    max_prompt_tokens: int | None = None  # a prompt sent as token ids: fewer than max_model_len


@dataclass(frozen=True)
class DemoLimits:
    """``/demo/chats`` (the demo page's chats, which may repeat): how many streams at once, how many answers
    each chat of one stream gives. Four unbounded connections once raised another user's TTFT from 0.13 s to
    32-36 s; the page needs one (two while it reloads)."""

    max_connections: int = 2
    max_answers: int = 1000  # per chat per stream: about an hour of the page's short answers


CURRENT: ContextVar[RequestCaps | None] = ContextVar("minivllm_request_caps", default=None)
DEFAULT_CAPS = RequestCaps()


def current() -> RequestCaps:
    """The caps of the request being validated (the defaults outside a server, e.g. a script's own models)."""
    return CURRENT.get() or DEFAULT_CAPS


class CapsContext:
    """ASGI middleware: the requests of this app are checked against ``caps``."""

    def __init__(self, app: Any, caps: RequestCaps) -> None:
        self.app, self.caps = app, caps

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        token = CURRENT.set(self.caps)
        try:
            await self.app(scope, receive, send)
        finally:
            CURRENT.reset(token)


def _too_many(field: str, got: int, high: int, what: str, flag: str) -> APIError:
    return APIError(f"{field} has {got} {what}; this server allows 0 to {high} ({flag}).", field)


def check_sampling_fields(body: Any) -> None:
    """The lists of the sampling fields (both endpoints), on the raw JSON object."""
    if not isinstance(body, dict):
        return
    caps = current()
    ids = body.get("stop_token_ids")
    if isinstance(ids, list) and len(ids) > caps.max_stop_token_ids:
        raise _too_many("stop_token_ids", len(ids), caps.max_stop_token_ids, "entries", "--max-stop-token-ids")
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    if len(stops) > caps.max_stop_strings:
        raise _too_many("stop", len(stops), caps.max_stop_strings, "strings", "--max-stop-strings")
    for i, s in enumerate(stops):
        if isinstance(s, str) and len(s) > caps.max_stop_string_len:
            raise APIError(
                f"stop string {i} has {len(s)} characters; this server allows 1 to {caps.max_stop_string_len} "
                "(--max-stop-string-len).",
                "stop",
            )


def check_prompt(body: Any) -> None:
    """``prompt`` of a completion: its characters, or its number of token ids."""
    if not isinstance(body, dict):
        return
    caps, prompt = current(), body.get("prompt")
    if isinstance(prompt, str) and caps.max_prompt_chars is not None and len(prompt) > caps.max_prompt_chars:
        raise APIError(_too_long("prompt has", len(prompt), caps), "prompt")
    high = caps.max_prompt_tokens
    if isinstance(prompt, list) and high is not None and len(prompt) > high:
        raise APIError(
            f"prompt has {len(prompt)} token ids; this server allows 1 to {high} (max_model_len - 1).", "prompt"
        )


def _too_long(what: str, chars: int, caps: RequestCaps, counted: str = "") -> str:
    context = (
        ""
        if caps.max_prompt_tokens is None
        else (f"; this model's maximum context length is {caps.max_prompt_tokens + 1} tokens")
    )
    return (
        f"The {what} {chars} characters{counted}{context}; this server allows 1 to {caps.max_prompt_chars} "
        "(--max-prompt-chars: no longer text fits in the context)."
    )


def message_chars(messages: list[Any]) -> int:
    """Characters of every role and content (text parts included) in raw messages; other values count 0."""
    total = 0
    for m in messages:
        if not isinstance(m, dict):
            continue
        role, content = m.get("role"), m.get("content")
        total += len(role) if isinstance(role, str) else 0
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            total += sum(len(p["text"]) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return total


def check_messages(body: Any) -> None:
    """``messages`` of a chat: how many, and their characters (roles too: empty contents still cost tokens)."""
    if not isinstance(body, dict) or not isinstance(messages := body.get("messages"), list):
        return
    caps = current()
    if len(messages) > caps.max_chat_messages:
        raise APIError(
            f"messages has {len(messages)} messages; this server allows 1 to {caps.max_chat_messages} "
            "(--max-chat-messages: each message costs the chat template's tokens, and more cannot fit in the "
            "model's context).",
            "messages",
        )
    chars = message_chars(messages)
    if caps.max_prompt_chars is not None and chars > caps.max_prompt_chars:
        raise APIError(_too_long("messages have", chars, caps, " (roles and contents)"), "messages")
