"""``POST /demo/chats``: the demo page's chats, all over one connection (§11.1.1 live demo).

A browser opens at most six HTTP/1.1 connections to one host (Chromium's limit), and the demo page needs
one for its polls and one for the RAG prompt: with one connection per chat, a fifth chat would already
wait for a free connection and never stream. So the page sends all its chats in one request and reads one
SSE stream in which each event says which chat it belongs to.

Not in vLLM, whose OpenAI server has one request per HTTP request (a real client would use HTTP/2, or
several connections from several processes). Each chat here is still an ordinary engine request with its
own request id, validated exactly as ``/v1/chat/completions`` validates it (``serving.prepare``).

Body: ``{"chats": [chat completion bodies, 1 to MAX_DEMO_CHATS], "repeat": false}``. With ``repeat`` a chat
that finishes asks again (answer k + 1, its seed + k when it has a seed), until the client goes away: the
chats stream for the whole scene. SSE events (``data: {json}``):

* ``{"chat": i, "answer": k, "id": request_id, "event": "start"}``: answer k of chat i is queued;
* ``{"chat": i, "answer": k, "id": ..., "text": "...", "finish_reason": null | "length" | ...}``: a delta;
* ``{"chat": i, "answer": k, "id": ..., "error": {OpenAI error}}``: that chat ends, the others go on;
* ``data: [DONE]`` once no chat is left (never, with ``repeat``, while the engine runs).

Closing the connection aborts every chat's request (no KV block stays held).

Bounded (``DemoLimits``, flags ``--demo-max-connections`` and ``--demo-max-answers``): a stream past the
connection bound is refused (429), and with ``repeat`` each chat stops after its last allowed answer (the
stream then ends with ``[DONE]``). With ``--admin-token`` the request must carry ``Authorization: Bearer
TOKEN``, as ``/admin`` does: every chat holds an engine slot.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
import weakref
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from minivllm.serving.async_engine import EngineDeadError
from minivllm.serving.protocol import APIError, ChatCompletionRequest
from minivllm.serving.serving import Prepared, ServerState, prepare

MAX_DEMO_CHATS = 16  # chats per connection

router = APIRouter()


class DemoChatsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    chats: list[ChatCompletionRequest] = Field(min_length=1, max_length=MAX_DEMO_CHATS)
    repeat: StrictBool = False


@router.post("/demo/chats", include_in_schema=False)
async def demo_chats(body: DemoChatsRequest, raw: Request) -> StreamingResponse:
    """Every chat is validated before the first byte is sent: one bad chat refuses the whole request (400,
    ``param`` ``chats.<i>.<field>``), so the page sees the mistake instead of a missing pane."""
    state: ServerState = raw.app.state.minivllm
    state.admin_guard.check_token(raw)
    limits = state.demo_limits
    if state.demo_connections >= limits.max_connections:
        raise APIError(
            f"/demo/chats already has {state.demo_connections} stream(s) open; this server allows "
            f"{limits.max_connections} at once (--demo-max-connections).",
            status=429,
            code="too_many_requests",
        )
    prepared = []
    for i, chat in enumerate(body.chats):
        try:
            prepared.append(await prepare(state, chat))
        except APIError as e:
            param = f"chats.{i}" + (f".{e.param}" if e.param else "")
            raise APIError(f"chats[{i}]: {e.message}", param, e.status, e.code) from e
    slot = _Slot(state)  # released when the stream ends, or when it is dropped unread (a client gone at once)
    events = _events(state, prepared, [c.priority for c in body.chats], body.repeat, slot)
    weakref.finalize(events, slot.release)
    return StreamingResponse(events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


def _next_answer(p: Prepared) -> Prepared:
    """The chat's next answer: a new request id, and its seed moved on by one (if it has one)."""
    params = p.params
    if params.seed is not None:
        params = dataclasses.replace(params, seed=params.seed + 1)
    return dataclasses.replace(p, request_id=f"chatcmpl-{uuid.uuid4().hex}", params=params)


def _data(obj: Any) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


class _Slot:
    """One of the ``max_connections`` /demo/chats streams, released once."""

    def __init__(self, state: ServerState) -> None:
        self.state, self.held = state, True
        state.demo_connections += 1

    def release(self) -> None:
        if self.held:
            self.held = False
            self.state.demo_connections -= 1


async def _chat(state: ServerState, i: int, p: Prepared, priority: int, repeat: bool, out: asyncio.Queue) -> None:
    """One chat's answers, put on ``out`` as SSE events. Cancelled when the client goes away: the stream
    being closed aborts the request in progress (``AsyncEngine.generate``)."""
    answer = 0
    while True:
        head = {"chat": i, "answer": answer, "id": p.request_id}
        out.put_nowait(_data({**head, "event": "start"}))
        try:
            stream = state.engine.generate(p.request_id, p.prompt_token_ids, p.params, priority)
            async with aclosing(stream):
                async for delta in stream:
                    if delta.error:
                        out.put_nowait(_data({**head, **APIError(delta.error, status=delta.error_status).body()}))
                        return
                    out.put_nowait(_data({**head, "text": delta.text, "finish_reason": delta.finish_reason}))
        except (ValueError, EngineDeadError) as e:  # the engine refused it, or stopped
            status = 503 if isinstance(e, EngineDeadError) else 400
            out.put_nowait(_data({**head, **APIError(str(e), "messages", status).body()}))
            return
        if not repeat or answer + 1 >= state.demo_limits.max_answers:
            return
        answer += 1
        p = _next_answer(p)


async def _events(
    state: ServerState, prepared: list[Prepared], priorities: list[int], repeat: bool, slot: _Slot
) -> AsyncIterator[str]:
    """The merged SSE body. Starlette cancels it when the client disconnects; the chats are cancelled then."""
    out: asyncio.Queue[str | None] = asyncio.Queue()
    chats = enumerate(zip(prepared, priorities))
    tasks = [asyncio.create_task(_chat(state, i, p, pr, repeat, out)) for i, (p, pr) in chats]
    for t in tasks:
        t.add_done_callback(lambda _: out.put_nowait(None))  # one None per chat that has ended
    try:
        left = len(tasks)
        while left:
            event = await out.get()
            if event is None:
                left -= 1
            else:
                yield event
        yield "data: [DONE]\n\n"
    finally:  # no await here: a cancelled scope would cancel it again; each task aborts its own request
        slot.release()
        for t in tasks:
            t.cancel()
