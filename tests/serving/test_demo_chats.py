"""``POST /demo/chats`` (the demo page's chats over one connection, §11.1.1): each chat gets exactly the tokens the
same body gets from /v1/chat/completions, ``repeat`` asks again with the seed moved on, a bad chat is refused
before any byte (400 naming ``chats.<i>.<field>``), and closing the connection aborts every chat's request."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from minivllm.serving.demo_chats import MAX_DEMO_CHATS
from tests.helpers.server import TINY_SERVER_FLAGS, running_server, stream, wait_idle

QUESTIONS = ["the cat sat on the mat", "hello world, the dog", "the dog ran far"]


@pytest.fixture(scope="module")
def server(tiny_qwen2):
    with running_server(tiny_qwen2, *TINY_SERVER_FLAGS) as srv:
        yield srv


def chat(question: str, **kw) -> dict:
    return {"messages": [{"role": "user", "content": question}], "max_tokens": 8, **kw}


async def read_events(url: str, body: dict, until=lambda events: False) -> tuple[list[dict], bool]:
    """The SSE events of one /demo/chats call, and whether [DONE] came; ``until(events)`` true closes early."""
    events: list[dict] = []
    async with httpx.AsyncClient(timeout=60) as c, c.stream("POST", f"{url}/demo/chats", json=body) as resp:
        assert resp.status_code == 200, await resp.aread()
        async for line in resp.aiter_lines():
            if not line:
                continue
            if line == "data: [DONE]":
                return events, True
            events.append(json.loads(line.removeprefix("data: ")))
            if until(events):
                return events, False
    return events, False


def answers(events: list[dict]) -> dict[tuple[int, int], str]:
    """(chat, answer) -> its text."""
    out: dict[tuple[int, int], str] = {}
    for e in events:
        if "text" in e:
            out[e["chat"], e["answer"]] = out.get((e["chat"], e["answer"]), "") + e["text"]
    return out


async def single(url: str, body: dict) -> str:
    async with httpx.AsyncClient(timeout=60) as c:
        s = await stream(c, f"{url}/v1/chat/completions", body)
    assert s.done, s.body
    return s.text


def test_each_chat_gets_what_its_own_request_gets(server):
    bodies = [chat(q, temperature=0) for q in QUESTIONS]
    events, done = asyncio.run(read_events(server.base_url, {"chats": bodies}))
    assert done
    starts = [e for e in events if e.get("event") == "start"]
    assert sorted(e["chat"] for e in starts) == [0, 1, 2] and len({e["id"] for e in starts}) == 3
    assert all(e["id"].startswith("chatcmpl-") for e in starts)
    finals = [e for e in events if e.get("finish_reason")]
    assert sorted(e["chat"] for e in finals) == [0, 1, 2] and {e["finish_reason"] for e in finals} <= {"length", "stop"}
    got = answers(events)
    for i, body in enumerate(bodies):
        assert got[i, 0] == asyncio.run(single(server.base_url, body))
    assert wait_idle(server.base_url)["num_free_blocks"] == 127


def test_repeat_asks_again_with_the_seed_moved_on_and_a_close_aborts_all(server):
    bodies = [chat(q, temperature=0.8, seed=7 + i, ignore_eos=True) for i, q in enumerate(QUESTIONS[:2])]

    def two_answers_each(events):
        return sum(1 for e in events if e.get("finish_reason")) >= 4 and any(e.get("answer") == 2 for e in events)

    events, done = asyncio.run(read_events(server.base_url, {"chats": bodies, "repeat": True}, two_answers_each))
    assert not done  # repeat never ends by itself; leaving closed the connection mid-answer
    got = answers(events)
    for i, body in enumerate(bodies):
        for k in (0, 1):  # answer k is the same body with seed + k
            assert got[i, k] == asyncio.run(single(server.base_url, {**body, "seed": body["seed"] + k}))
    state = wait_idle(server.base_url)  # the answers in progress at the close were aborted
    assert state["num_free_blocks"] == state["num_gpu_blocks"] - 1


@pytest.mark.parametrize(
    "body, param, words, status",
    [
        ({"chats": [chat("a"), chat("b", max_tokens=0)]}, "chats.1.max_tokens", "at least 1", 400),
        ({"chats": [chat("a", temperature=-1)]}, "chats.0.temperature", "temperature", 400),
        ({"chats": [chat("a", model="other")]}, "chats.0.model", "does not exist", 404),
        ({"chats": []}, "chats", "at least 1", 400),
        ({"chats": [chat("a")] * (MAX_DEMO_CHATS + 1)}, "chats", f"at most {MAX_DEMO_CHATS}", 400),
        ({"chats": [chat("a")], "repeat": "yes"}, "repeat", "boolean", 400),
        ({"chats": [chat("a")], "n": 2}, "n", "Extra", 400),
    ],
)
def test_a_bad_chat_refuses_the_request_naming_it(server, body, param, words, status):
    r = httpx.post(f"{server.base_url}/demo/chats", json=body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["param"] == param and words.lower() in err["message"].lower(), err
    assert wait_idle(server.base_url)["num_unfinished"] == 0
