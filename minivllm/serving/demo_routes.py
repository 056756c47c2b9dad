"""The live demo page (``/``) and the admin endpoints behind it (§11.1.1, §11.2, §11.9).

Not part of vLLM's API (vLLM changes scheduler settings only at start-up, ``vllm/engine/arg_utils.py``):
these endpoints let a class watch the complaint of §11.1.1 happen and go away on one running server.

* ``GET /admin/scheduling`` / ``POST /admin/scheduling``: read (from the published snapshot, at once even
  during a long step) or change the scheduler settings between two steps (``LLMEngine.set_scheduling``).
  ``{"enable_chunked_prefill": false}`` also raises the token budget to ``max_model_len`` and clears
  ``long_prefill_token_threshold`` (what vLLM requires without chunking); ``true`` restores the chunked
  budget the server started with (or the one sent).
* ``GET /admin/state``: KV blocks (total, free), queue lengths and the last steps (who got how many tokens),
  from the snapshot the engine thread publishes after each step (``state_snapshot``): it answers at once,
  even during a long step, and says since when the step in progress has been running (``step_started``).
* ``GET /admin/trace``: per-request timelines from the engine trace (engine clock; add ``clock_offset`` to get
  ``time.perf_counter()`` of the server process, which on Linux is CLOCK_MONOTONIC, shared by processes).
* ``GET /admin/rag_prompt?num_tokens=N&seed=S``: token ids of a long RAG-style prompt of exactly N tokens,
  a user message in the model's chat template (with the generation prompt, so the answer starts as an
  assistant's turn); each seed gives different tokens right after the template's opening, so the prefix
  cache cannot hide the prefill (at most the opening's full blocks are shared).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse

from minivllm.engine.llm_engine import LLMEngine
from minivllm.serving.protocol import APIError
from minivllm.serving.serving import FALLBACK_CHAT_TEMPLATE
from minivllm.serving.state_snapshot import MAX_STATE_STEPS, SCHEDULING_FIELDS
from minivllm.serving.state_snapshot import scheduling as _scheduling

STATIC_DIR = Path(__file__).parent / "static"
PASSAGE = (
    "The Roman aqueducts carried water from distant springs into the cities, using gravity alone. Engineers "
    "surveyed the land so that each channel dropped only a little over many kilometres, and where valleys "
    "crossed the route they built arched bridges of stone. "
)

MAX_TRACE_PAGE = 1000  # requests per /admin/trace page
MAX_TRACE_OFFSET = 2**31 - 1  # far more requests than a trace keeps


def guarded(raw: Request) -> None:
    """Every /admin route: the checks of ``admin_guard`` (host, origin, JSON, token, switched off)."""
    raw.app.state.minivllm.admin_guard.check(raw)


router = APIRouter()
admin = APIRouter(dependencies=[Depends(guarded)])


@router.get("/", include_in_schema=False)
async def demo_page() -> FileResponse:
    return FileResponse(STATIC_DIR / "demo.html", headers={"Cache-Control": "no-cache"})


@router.get("/static/{name}", include_in_schema=False)
async def static_file(name: str) -> FileResponse:
    path = STATIC_DIR / name
    if path.parent != STATIC_DIR or not path.is_file():
        raise APIError(f"No static file {name!r}.", status=404, code="not_found")
    return FileResponse(path, headers={"Cache-Control": "no-cache"})


def published(raw: Request) -> dict[str, Any]:
    """The snapshot the engine thread published last (after its last step or batch of commands)."""
    snap = raw.app.state.minivllm.engine.snapshot
    if snap is None:
        raise APIError("The engine has not published its state yet.", status=503, code="engine_starting")
    return snap


@admin.get("/admin/scheduling")
async def get_scheduling(raw: Request) -> dict[str, Any]:
    # From the published snapshot, never the engine thread: a page reloaded during a long step reads it at once
    # (asking the engine thread waited behind the step: 27.8 s of "connecting..."). A change (POST) is published
    # with the batch of commands that made it, before the next step.
    return dict(published(raw)["scheduling"])


@admin.post("/admin/scheduling")
async def set_scheduling(raw: Request) -> dict[str, Any]:
    state = raw.app.state.minivllm
    try:
        body = await raw.json()
    except ValueError as e:
        raise APIError(f"Malformed JSON body: {e}.") from e
    if not isinstance(body, dict):
        raise APIError("The body must be a JSON object of scheduler settings.")
    unknown = sorted(set(body) - set(SCHEDULING_FIELDS))
    if unknown:
        raise APIError(f"Unknown scheduler setting {unknown[0]!r}; allowed: {list(SCHEDULING_FIELDS)}.", unknown[0])
    state.admin_limits.check(body)

    def apply(engine: LLMEngine) -> dict[str, Any]:
        changes = dict(body)
        config = engine.scheduler.scheduler_config
        max_model_len, budget = config.max_model_len, config.max_num_batched_tokens
        if max_model_len is None or budget is None:  # SchedulerConfig.__post_init__ sets both
            raise RuntimeError(
                f"Unresolved SchedulerConfig: max_model_len={max_model_len}, max_num_batched_tokens={budget}."
            )
        if changes.get("enable_chunked_prefill") is False:
            changes.setdefault("max_num_batched_tokens", max(max_model_len, budget))
            changes.setdefault("long_prefill_token_threshold", 0)
        elif changes.get("enable_chunked_prefill") is True and not config.enable_chunked_prefill:
            changes.setdefault("max_num_batched_tokens", state.chunked_budget)
        engine.set_scheduling(**changes)
        if config.enable_chunked_prefill and not engine.scheduler.scheduler_config.enable_chunked_prefill:
            state.chunked_budget = budget  # remember it for the way back
        return _scheduling(engine)

    asked = time.perf_counter()
    try:
        result = await state.engine.call(apply)
    except ValueError as e:
        first = str(e).split(" ", 1)[0]
        raise APIError(str(e), param=first if first in SCHEDULING_FIELDS else None) from e
    # The engine thread publishes right after the batch of commands that ran ``apply``, before any step: wait for
    # that snapshot, so that a GET after this reply reads the new settings (microseconds; 1 s guards a hang).
    for _ in range(1000):
        if published(raw)["published"] >= asked:
            break
        await asyncio.sleep(0.001)
    return result


@admin.get("/admin/state")
async def get_state(raw: Request, last_steps: int = 50) -> dict[str, Any]:
    if not 0 <= last_steps <= MAX_STATE_STEPS:
        raise APIError(f"last_steps must be in [0, {MAX_STATE_STEPS}], got {last_steps}.", "last_steps")

    engine = raw.app.state.minivllm.engine
    snap, started = published(raw), engine.step_started  # read once: the engine thread replaces them
    steps = snap["steps"]
    # "now", "published" and "step_started" are time.perf_counter() of the server process (CLOCK_MONOTONIC on
    # Linux); the steps' start/end are on the engine's clock (add clock_offset).
    return {
        **snap,
        "now": time.perf_counter(),
        "alive": engine.alive,
        "step_started": started,
        "clock_offset": engine.clock_offset,
        "steps": list(steps[len(steps) - min(last_steps, len(steps)) :]),
    }


@admin.get("/admin/trace")
async def get_trace(raw: Request, request_ids: str | None = None, offset: int = 0, limit: int = 100) -> dict[str, Any]:
    """The trace's requests, oldest first, one page of at most ``limit`` (``MAX_TRACE_PAGE``) from ``offset``
    (``next_offset`` is the next page's, null after the last); ``request_ids=a,b`` picks requests by id."""
    if not 1 <= limit <= MAX_TRACE_PAGE:
        raise APIError(f"limit must be in [1, {MAX_TRACE_PAGE}], got {limit}.", "limit")
    if not 0 <= offset <= MAX_TRACE_OFFSET:  # itertools.islice takes at most sys.maxsize: a 500 before
        raise APIError(f"offset must be in [0, {MAX_TRACE_OFFSET}], got {offset}.", "offset")
    wanted = request_ids.split(",") if request_ids else None
    if wanted is not None and len(wanted) > MAX_TRACE_PAGE:
        raise APIError(f"request_ids names at most {MAX_TRACE_PAGE} requests, got {len(wanted)}.", "request_ids")

    def read(engine: LLMEngine) -> dict[str, Any]:
        recs = engine.trace.requests
        if wanted is not None:
            ids, total = [r for r in wanted if r in recs], None
        else:
            total = len(recs)
            ids = list(itertools.islice(recs, offset, offset + limit))
        clock_offset = time.perf_counter() - engine.clock.now()
        nxt = offset + limit if total is not None and offset + limit < total else None
        return {
            "clock_offset": clock_offset,
            "total": total,
            "next_offset": nxt,
            "requests": {r: dataclasses.asdict(recs[r]) for r in ids},
        }

    return await raw.app.state.minivllm.engine.call(read)


@admin.get("/admin/rag_prompt")
async def rag_prompt(raw: Request, num_tokens: int = 2000, seed: int = 0) -> dict[str, Any]:
    state = raw.app.state.minivllm
    limit = state.limits.max_model_len - 32
    if not 16 <= num_tokens <= limit:
        raise APIError(f"num_tokens must be in [16, {limit}] (max_model_len - 32), got {num_tokens}.", "num_tokens")
    tok = state.tokenizer
    if tok is None:
        raise APIError("This model has no tokenizer.", status=400)
    # The template around one user message, split at a marker: its opening, then the question and its closing
    # (end of turn + the assistant's generation prompt). The documents fill the middle to exactly num_tokens.
    marker = "\x00DOCUMENTS\x00"
    template = None if getattr(tok, "chat_template", None) else FALLBACK_CHAT_TEMPLATE
    text = tok.apply_chat_template(
        [{"role": "user", "content": marker}], chat_template=template, add_generation_prompt=True, tokenize=False
    )
    opening, closing = text.split(marker)
    head = list(tok.encode(opening, add_special_tokens=False))
    question = "\nUsing only the documents above, summarise how the aqueducts worked in one sentence."
    tail = list(tok.encode(question + closing, add_special_tokens=False))
    room = num_tokens - len(head) - len(tail)
    if room < 1:
        raise APIError(f"num_tokens must be at least {len(head) + len(tail) + 1} (the chat template and the "
                       f"question take {len(head) + len(tail)}), got {num_tokens}.", "num_tokens")  # fmt: skip
    body: list[int] = []
    i = 0
    while len(body) < room:
        body += tok.encode(f"[Document {seed}.{i}] {PASSAGE}", add_special_tokens=False)
        i += 1
    ids = head + body[:room] + tail
    return {"prompt_token_ids": ids, "num_tokens": len(ids), "num_template_tokens": len(head) + len(tail)}
