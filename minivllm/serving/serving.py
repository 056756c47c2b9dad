"""``/v1/completions`` and ``/v1/chat/completions``: validate, queue, stream (§11.9).

Mirrors ``vllm/entrypoints/openai/serving_completion.py`` and ``serving_chat.py``: one request id
per call (``cmpl-…`` / ``chatcmpl-…``), one SSE chunk per engine step that gave the request tokens
(``data: {json}\\n\\n``; text may be "" while a UTF-8 character is half done; the last chunk carries
``finish_reason``; with ``logprobs``, each chunk carries its tokens' logprobs: minivllm.serving.logprobs),
an optional usage chunk (``stream_options.include_usage``), then ``data: [DONE]``.
A client that goes away has its request aborted, streaming or not (vLLM's ``with_cancellation``).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from minivllm.sequence import Logprob
from minivllm.serving.admin_guard import AdminGuard, AdminLimits
from minivllm.serving.async_engine import AsyncEngine, Delta
from minivllm.serving.logprobs import chat_logprobs, completion_logprobs, prompt_logprobs_json
from minivllm.serving.protocol import (
    APIError,
    ChatCompletionRequest,
    CompletionRequest,
    Limits,
    build_sampling_params,
    check_token_ids,
    completion_prompt,
)
from minivllm.serving.request_caps import DemoLimits, message_chars

# Used only when the tokenizer has no chat template (e.g. the tiny test models); logged at start-up.
FALLBACK_CHAT_TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"


@dataclass
class ServerState:
    engine: AsyncEngine
    model_name: str
    limits: Limits
    tokenizer: Any
    created: int
    admin_limits: AdminLimits
    chunked_budget: int = 256  # what the demo's "chunked" switch restores when the server started unchunked
    admin_guard: AdminGuard = field(default_factory=AdminGuard)
    max_prompt_chars: int | None = None  # longer text cannot fit in max_model_len tokens: refused untokenized
    demo_limits: DemoLimits = field(default_factory=DemoLimits)
    demo_connections: int = 0  # /demo/chats streams open now

    def check_model(self, model: str | None) -> None:
        if model is not None and model != self.model_name:
            raise APIError(
                f"The model `{model}` does not exist; this server serves `{self.model_name}`.",
                param="model",
                status=404,
            )


def max_prompt_chars(tokenizer: Any, max_model_len: int) -> int | None:
    """No token is longer than the vocabulary's longest entry (byte-level tokens: one character per byte),
    so a text over max_model_len x that many characters cannot fit in max_model_len tokens."""
    if tokenizer is None:
        return None
    return max_model_len * max(len(t) for t in tokenizer.get_vocab())


def check_prompt_chars(state: ServerState, num_chars: int, field_name: str) -> None:
    """Refuse a text prompt that is certainly too long before it is tokenized (which takes ~1 s per MB)."""
    limit = state.max_prompt_chars
    if limit is not None and num_chars > limit:
        mml = state.limits.max_model_len
        raise APIError(
            f"The {field_name} has {num_chars} characters; this model's maximum context length is {mml} "
            f"tokens, which no text over {limit} characters fits in.",
            field_name,
        )


def chat_prompt_ids(state: ServerState, req: ChatCompletionRequest) -> list[int]:
    """The chat template applied with the generation prompt, then encoded (as ``LLM.chat`` does)."""
    tok = state.tokenizer
    if tok is None:
        raise APIError("This model has no tokenizer, so it cannot serve chat; use /v1/completions.", "messages")
    messages = [{"role": m.role, "content": m.text} for m in req.messages]
    if not messages:
        raise APIError("messages must not be empty.", "messages")
    check_prompt_chars(state, message_chars(messages), "messages")  # roles count too: empty messages cost tokens
    template = None if getattr(tok, "chat_template", None) else FALLBACK_CHAT_TEMPLATE
    text = tok.apply_chat_template(messages, chat_template=template, add_generation_prompt=True, tokenize=False)
    return list(tok.encode(text, add_special_tokens=False))


async def _unless_disconnected(raw: Request, awaitable: Any) -> tuple[bool, Any]:
    """(True, result) of ``awaitable``, or (False, None) if the client disconnects first (it is then cancelled:
    a cancelled stream aborts its request)."""

    async def disconnected() -> None:
        while (await raw.receive())["type"] != "http.disconnect":
            pass

    work, gone = asyncio.ensure_future(awaitable), asyncio.ensure_future(disconnected())
    await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
    gone.cancel()
    if not work.done():
        work.cancel()
        return False, None
    return True, work.result()


def _usage(num_prompt: int, num_output: int) -> dict[str, int]:
    return {"prompt_tokens": num_prompt, "completion_tokens": num_output, "total_tokens": num_prompt + num_output}


@dataclass
class Prepared:
    """A validated request, ready to queue: its id, prompt token ids and SamplingParams."""

    request_id: str
    prompt_token_ids: list[int]
    params: Any  # SamplingParams
    prompt_field: str  # "messages" or "prompt": where the engine's own refusals point
    chat: bool


async def prepare(state: ServerState, req: CompletionRequest | ChatCompletionRequest) -> Prepared:
    """Model, prompt (templated and tokenized off the event loop, so streams go on) and SamplingParams."""
    state.check_model(req.model)
    chat = isinstance(req, ChatCompletionRequest)
    prompt_field = "messages" if chat else "prompt"
    if isinstance(req, ChatCompletionRequest):
        ids = await asyncio.to_thread(chat_prompt_ids, state, req)
    else:
        if isinstance(req.prompt, str):
            check_prompt_chars(state, len(req.prompt), "prompt")
        ids = (await asyncio.to_thread(completion_prompt, req, state.tokenizer))[0]
    check_token_ids(ids, state.limits, prompt_field)
    params = build_sampling_params(req, len(ids), state.limits, prompt_field, None if chat else 16)
    request_id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
    return Prepared(request_id, ids, params, prompt_field, chat)


async def serve(state: ServerState, raw: Request, req: CompletionRequest | ChatCompletionRequest) -> Response:
    """Shared path of both endpoints: prepare, queue, then stream or collect."""
    p = await prepare(state, req)
    request_id, ids, params, prompt_field, chat = p.request_id, p.prompt_token_ids, p.params, p.prompt_field, p.chat
    stream = state.engine.generate(request_id, ids, params, req.priority, cache_salt=req.cache_salt)
    try:  # the engine's own checks (ValueError) surface with the first delta, before any byte is sent
        alive, first = await _unless_disconnected(raw, anext(stream))
    except ValueError as e:
        raise APIError(str(e), param=prompt_field) from e
    if not alive:
        return Response(status_code=499)  # nginx's "client closed request"; nobody reads it
    base = {"id": request_id, "created": int(time.time()), "model": state.model_name}
    if req.stream:
        include_usage = bool(req.stream_options and req.stream_options.include_usage)
        body = _sse(base, chat, first, stream, len(ids), include_usage, _stream_logprobs(state, chat, params.logprobs))
        return StreamingResponse(body, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
    alive, result = await _unless_disconnected(raw, _collect(first, stream))
    if not alive:
        return Response(status_code=499)
    text, last, token_ids, logprobs, prompt_logprobs = result
    if last.error:
        raise APIError(last.error, status=last.error_status)
    choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": last.finish_reason}
    if params.logprobs is not None:
        choice["logprobs"] = _logprobs(state, chat, params.logprobs, token_ids, logprobs, 0)
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    choice["stop_reason"] = last.stop_reason  # vLLM's: the stop string or stop token id that ended it
    obj = "chat.completion" if chat else "text_completion"
    usage = _usage(len(ids), last.num_output_tokens)
    extra: dict[str, Any] = {}
    if params.prompt_logprobs is not None:  # vLLM: in the choice for completions, beside the choices for chat
        (extra if chat else choice)["prompt_logprobs"] = prompt_logprobs_json(prompt_logprobs)
    return JSONResponse({**base, "object": obj, "choices": [choice], "usage": usage, **extra})


async def _collect(
    first: Delta, stream: AsyncGenerator[Delta, None]
) -> tuple[str, Delta, list[int], list[dict[int, Logprob]], list[dict[int, Logprob] | None] | None]:
    """(the whole text, the last delta, every token id, their logprobs: empty unless the request asked, the
    prompt's logprobs: None unless it asked)."""
    parts, last, ids, logprobs = [first.text], first, list(first.token_ids), list(first.logprobs or [])
    prompt_logprobs = first.prompt_logprobs
    async with aclosing(stream):
        if not first.finished:
            async for delta in stream:
                parts.append(delta.text)
                ids += delta.token_ids
                logprobs += delta.logprobs or []
                prompt_logprobs = prompt_logprobs or delta.prompt_logprobs
                last = delta
    return "".join(parts), last, ids, logprobs, prompt_logprobs


def _logprobs(
    state: ServerState, chat: bool, k: int, ids: list[int], logprobs: list[dict[int, Logprob]], text_offset: int
) -> dict[str, Any]:
    """A choice's OpenAI ``logprobs`` object (minivllm.serving.logprobs), for ``ids`` and their logprobs."""
    if chat:
        return chat_logprobs(ids, logprobs, k, state.tokenizer)
    return completion_logprobs(ids, logprobs, k, state.tokenizer, text_offset)


def _chunk(base: dict[str, Any], chat: bool, delta: Delta, logprobs: dict[str, Any] | None = None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "logprobs": logprobs, "finish_reason": delta.finish_reason}
    if chat:
        choice["delta"] = {"content": delta.text}
    else:
        choice["text"] = delta.text
    choice["stop_reason"] = delta.stop_reason  # null until the last chunk, as vLLM streams it
    return {**base, "object": "chat.completion.chunk" if chat else "text_completion", "choices": [choice]}


def _stream_logprobs(state: ServerState, chat: bool, k: int | None) -> Callable[[Delta, int], dict[str, Any]] | None:
    """What gives each stream chunk its ``logprobs`` (vLLM: the delta's tokens; completions' ``text_offset``
    counts from the text already streamed); None when the request asked for none."""
    if k is None:
        return None
    return lambda delta, sent: _logprobs(state, chat, k, delta.token_ids, delta.logprobs or [], sent)


def _data(obj: Any) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


async def _sse(
    base: dict[str, Any],
    chat: bool,
    first: Delta,
    stream: AsyncGenerator[Delta, None],
    num_prompt: int,
    include_usage: bool,
    logprobs_of: Callable[[Delta, int], dict[str, Any]] | None = None,
) -> AsyncIterator[str]:
    """The SSE body. Cancelled by Starlette when the client disconnects: the stream's ``finally`` aborts.
    ``logprobs_of(delta, characters sent before it)``: each chunk's ``logprobs`` (None: the request has none)."""
    num_chars = 0
    async with aclosing(stream):
        if chat:  # vLLM's first chat chunk carries the role only
            role = {**base, "object": "chat.completion.chunk"}
            yield _data({**role, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        delta = first
        while True:
            if delta.error:
                yield _data(APIError(delta.error, status=delta.error_status).body())
                break
            yield _data(_chunk(base, chat, delta, logprobs_of(delta, num_chars) if logprobs_of else None))
            num_chars += len(delta.text)
            if delta.finished:
                break
            delta = await anext(stream)
        if include_usage:
            obj = "chat.completion.chunk" if chat else "text_completion"
            yield _data({**base, "object": obj, "choices": [], "usage": _usage(num_prompt, delta.num_output_tokens)})
        yield "data: [DONE]\n\n"
