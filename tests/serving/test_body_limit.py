"""Bounded work per request on the event loop: a huge body is refused before it is read, a text too long for
max_model_len is refused before it is tokenized, and neither stalls the streams in flight.

Measured in CPU time of the server's event-loop thread while the refusal is in flight, not in wall seconds (which
a loaded machine stretches): a stream stalls only while that thread is busy, and the pathology this guards
against (parsing and tokenizing a 30 MB prompt on the loop: 37 s before) is CPU work there."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.helpers.server import running_server, stream, wait_idle

# The event loop's CPU while one refusal is in flight beside a 150-token stream: a bound on the pathology (37 s
# of parsing and tokenizing before), not a speed goal. Measured: 0.023 s (30 MB), 0.005 s (800 kB text).
LOOP_CPU_BOUND_S = 0.5
FLAGS = ("--max-model-len", "256", "--num-gpu-blocks", "64", "--max-num-batched-tokens", "64", "--max-num-seqs", "8")


@pytest.fixture(scope="module")
def srv(tiny_qwen2):
    with running_server(tiny_qwen2, *FLAGS, "--max-request-body-bytes", "1000000") as srv:
        yield srv


@pytest.fixture
def server(srv):
    return srv.base_url


def loop_cpu_seconds(srv) -> float:
    """CPU seconds used so far by the thread the server's event loop runs in."""
    return time.clock_gettime(time.pthread_getcpuclockid(srv.thread.ident))


async def refused_beside_a_stream(srv, send) -> tuple[httpx.Response, float]:
    """Run ``send(client)`` while a stream is decoding; return its answer and the CPU seconds the server's event
    loop spent meanwhile (on this request and the stream). The stream must still get every token."""
    async with httpx.AsyncClient(timeout=60) as c:
        body = {"prompt": "the cat", "max_tokens": 150, "temperature": 0, "ignore_eos": True}
        streaming = asyncio.ensure_future(stream(c, f"{srv.base_url}/v1/completions", body))
        await asyncio.sleep(0.2)
        cpu0 = loop_cpu_seconds(srv)
        resp = await send(c)
        loop_cpu = loop_cpu_seconds(srv) - cpu0
        got = await streaming
    assert got.status == 200 and got.done and got.finish_reason == "length"  # all 150 tokens
    return resp, loop_cpu


def test_a_30_mb_prompt_is_refused_before_it_is_read(srv, server):
    huge = '{"prompt": "' + "the cat " * (30 * 2**20 // 8) + '", "max_tokens": 4}'
    send = lambda c: c.post(f"{server}/v1/completions", content=huge, headers={"Content-Type": "application/json"})  # noqa: E731
    resp, loop_cpu = asyncio.run(refused_beside_a_stream(srv, send))
    assert resp.status_code == 413 and "1000000 bytes" in resp.json()["error"]["message"]
    assert loop_cpu < LOOP_CPU_BOUND_S, loop_cpu
    wait_idle(server)


def test_a_body_without_content_length_is_counted_as_it_arrives(srv, server):
    async def chunks():
        yield b'{"prompt": "'
        for _ in range(40):
            yield b"x" * 50_000

    async def send(c):
        return await c.post(f"{server}/v1/completions", content=chunks(), headers={"Content-Type": "application/json"})

    resp, _ = asyncio.run(refused_beside_a_stream(srv, send))
    assert resp.status_code == 413 and resp.json()["error"]["message"].startswith("The request body is larger")


@pytest.mark.parametrize("route", ["completions", "chat/completions"])
def test_a_text_that_cannot_fit_max_model_len_is_refused_untokenized(srv, server, route):
    text = "the cat " * 100_000  # 800 kB: under the body limit, far over 256 tokens of any length
    body = {"prompt": text} if route == "completions" else {"messages": [{"role": "user", "content": text}]}
    send = lambda c: c.post(f"{server}/v1/{route}", json={**body, "max_tokens": 4})  # noqa: E731
    resp, loop_cpu = asyncio.run(refused_beside_a_stream(srv, send))
    err = resp.json()["error"]
    assert resp.status_code == 400 and err["param"] == ("prompt" if route == "completions" else "messages")
    chars = "800000 characters" if route == "completions" else "800004 characters (roles and contents)"
    assert "maximum context length is 256" in err["message"] and chars in err["message"]  # untokenized
    assert loop_cpu < LOOP_CPU_BOUND_S, loop_cpu
