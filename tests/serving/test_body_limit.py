"""Bounded work per request on the event loop: a huge body is refused before it is read, a text too long for
max_model_len is refused before it is tokenized, and neither stalls the streams in flight."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.helpers.server import running_server, stream, wait_idle

FLAGS = ("--max-model-len", "256", "--num-gpu-blocks", "64", "--max-num-batched-tokens", "64", "--max-num-seqs", "8")


@pytest.fixture(scope="module")
def server(tiny_qwen2):
    with running_server(tiny_qwen2, *FLAGS, "--max-request-body-bytes", "1000000") as srv:
        yield srv.base_url


async def refused_beside_a_stream(url: str, send) -> tuple[httpx.Response, float, float]:
    """Run ``send(client)`` while a stream is decoding; return its answer, how long it took, and the
    stream's largest gap between chunks meanwhile."""
    async with httpx.AsyncClient(timeout=60) as c:
        body = {"prompt": "the cat", "max_tokens": 150, "temperature": 0, "ignore_eos": True}
        streaming = asyncio.ensure_future(stream(c, f"{url}/v1/completions", body))
        await asyncio.sleep(0.2)
        t0 = time.perf_counter()
        resp = await send(c)
        took = time.perf_counter() - t0
        got = await streaming
    gaps = [b - a for a, b in zip(got.times, got.times[1:]) if b > t0 - 0.05]
    return resp, took, max(gaps, default=0.0)


def test_a_30_mb_prompt_is_refused_before_it_is_read(server):
    huge = '{"prompt": "' + "the cat " * (30 * 2**20 // 8) + '", "max_tokens": 4}'
    send = lambda c: c.post(f"{server}/v1/completions", content=huge, headers={"Content-Type": "application/json"})  # noqa: E731
    resp, took, gap = asyncio.run(refused_beside_a_stream(server, send))
    assert resp.status_code == 413 and "1000000 bytes" in resp.json()["error"]["message"]
    assert took < 5.0 and gap < 2.5  # a bound on the pathology (37 s before), not a speed goal
    wait_idle(server)


def test_a_body_without_content_length_is_counted_as_it_arrives(server):
    async def chunks():
        yield b'{"prompt": "'
        for _ in range(40):
            yield b"x" * 50_000

    async def send(c):
        return await c.post(f"{server}/v1/completions", content=chunks(), headers={"Content-Type": "application/json"})

    resp, took, gap = asyncio.run(refused_beside_a_stream(server, send))
    assert resp.status_code == 413 and resp.json()["error"]["message"].startswith("The request body is larger")


@pytest.mark.parametrize("route", ["completions", "chat/completions"])
def test_a_text_that_cannot_fit_max_model_len_is_refused_untokenized(server, route):
    text = "the cat " * 100_000  # 800 kB: under the body limit, far over 256 tokens of any length
    body = {"prompt": text} if route == "completions" else {"messages": [{"role": "user", "content": text}]}
    send = lambda c: c.post(f"{server}/v1/{route}", json={**body, "max_tokens": 4})  # noqa: E731
    resp, took, gap = asyncio.run(refused_beside_a_stream(server, send))
    err = resp.json()["error"]
    assert resp.status_code == 400 and err["param"] == ("prompt" if route == "completions" else "messages")
    assert "maximum context length is 256" in err["message"] and "800000 characters" in err["message"]  # untokenized
    assert took < 5.0 and gap < 2.5  # a bound on the pathology (37 s before), not a speed goal
