"""Helpers for the HTTP tests (§11.9): a uvicorn server on 127.0.0.1 in a thread, SSE reading, idle waits."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


# The loopback server most HTTP tests run (the tiny models): room for 16 requests in 128 blocks, a 64-token budget.
TINY_SERVER_FLAGS = (
    "--max-model-len", "256", "--num-gpu-blocks", "128", "--max-num-batched-tokens", "64", "--max-num-seqs", "16",
)  # fmt: skip
# The safety timeout of the waits below: it guards against a hang only (each event comes in well under a second
# on a quiet machine, a few seconds at load average 20); the waits themselves end on the event.
HANG_S = 120.0


@dataclass
class Server:
    base_url: str
    engine: Any  # the AsyncEngine; tests only read it between requests (via /admin/*) or after idle
    thread: threading.Thread | None = None  # the one uvicorn runs in


@contextmanager
def running_server(model: str, *flags: str, loaded: Any = None) -> Iterator[Server]:
    """``python -m minivllm serve --model MODEL FLAGS`` in this process, on a free loopback port."""
    from minivllm.serving import server

    args = server.parse_args(["--model", model, *flags])
    engine = server.build_engine(args, loaded)
    srv = server.build_server(args, engine, port=0, log_level="warning")
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + HANG_S
    while not srv.started:
        assert thread.is_alive(), "the server thread stopped before uvicorn started"
        assert time.monotonic() < deadline, f"uvicorn did not start within {HANG_S:.0f} s"
        time.sleep(0.01)
    port = srv.servers[0].sockets[0].getsockname()[1]
    try:
        yield Server(f"http://127.0.0.1:{port}", engine, thread)
    finally:
        srv.should_exit = True
        thread.join(timeout=15)


@dataclass
class Streamed:
    """One streamed response as a client saw it."""

    status: int
    chunks: list[dict] = field(default_factory=list)  # every data: JSON object
    times: list[float] = field(default_factory=list)  # perf_counter of each chunk with choices
    done: bool = False  # saw data: [DONE]
    body: Any = None  # the JSON body of a non-200 answer

    @property
    def text(self) -> str:
        out = []
        for c in self.chunks:
            for ch in c.get("choices", []):
                out.append(ch.get("text") if "text" in ch else ch.get("delta", {}).get("content") or "")
        return "".join(out)

    @property
    def finish_reason(self) -> str | None:
        reasons = [ch.get("finish_reason") for c in self.chunks for ch in c.get("choices", [])]
        return next((r for r in reversed(reasons) if r), None)

    @property
    def usage(self) -> dict | None:
        return next((c["usage"] for c in self.chunks if c.get("usage")), None)


async def stream(client: httpx.AsyncClient, url: str, body: dict, stop_after: int | None = None) -> Streamed:
    """POST with stream=True and read SSE events; ``stop_after`` chunks closes the connection early."""
    async with client.stream("POST", url, json={**body, "stream": True}) as resp:
        out = Streamed(resp.status_code)
        if resp.status_code != 200:
            out.body = json.loads(await resp.aread())
            return out
        assert resp.headers["content-type"].startswith("text/event-stream")
        async for line in resp.aiter_lines():
            if not line:
                continue
            assert line.startswith("data: "), line
            if line == "data: [DONE]":
                out.done = True
                continue
            chunk = json.loads(line[len("data: ") :])
            out.chunks.append(chunk)
            if chunk.get("choices"):
                out.times.append(time.perf_counter())
            if stop_after is not None and len(out.times) >= stop_after:
                return out  # leaving the context manager closes the connection
    return out


def wait_idle(base_url: str, timeout: float = HANG_S, headers: dict[str, str] | None = None) -> dict:
    """Poll /admin/state (with ``headers``, e.g. the admin token) until no request is left in the engine."""
    deadline = time.monotonic() + timeout
    while True:
        state = httpx.get(f"{base_url}/admin/state", params={"last_steps": 0}, headers=headers).json()
        if state["num_unfinished"] == 0:
            return state
        assert time.monotonic() < deadline, f"engine not idle after {timeout} s: {state}"
        time.sleep(0.05)


def trace_of(base_url: str, *request_ids: str) -> dict:
    params = {"request_ids": ",".join(request_ids)} if request_ids else {}
    return httpx.get(f"{base_url}/admin/trace", params=params).json()


async def give_up_while_generating(base_url: str, body: dict, timeout: float = HANG_S) -> str:
    """POST a non-streaming completion, wait until the engine has made a token of it, then close the connection
    (a client that gives up) and return the request's id. No other request may arrive meanwhile (the new request
    is the first one /admin/trace lists after those already there)."""
    async with httpx.AsyncClient(timeout=timeout) as admin:
        known = (await admin.get(f"{base_url}/admin/trace", params={"limit": 1})).json()["total"]
        quitter = httpx.AsyncClient(timeout=timeout)
        post = asyncio.create_task(quitter.post(f"{base_url}/v1/completions", json={**body, "stream": False}))
        deadline = time.monotonic() + timeout
        while True:
            new = (await admin.get(f"{base_url}/admin/trace", params={"offset": known})).json()["requests"]
            if new and next(iter(new.values()))["token_times"]:
                break
            assert not post.done(), f"the request ended before the test gave up on it: {post.result()}"
            assert time.monotonic() < deadline, f"the engine made no token of the request within {timeout:.0f} s"
            await asyncio.sleep(0.02)
        post.cancel()
        await asyncio.gather(post, return_exceptions=True)
        await quitter.aclose()  # the connection closes: the server sees the client go
        return next(iter(new))
