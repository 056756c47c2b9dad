"""Fault injection on the real server (tiny Qwen2, 127.0.0.1 only, bounded in count and time): one request's
trouble stays its own.

Each round mixes good greedy streams (their tokens known from a clean run), clients that disconnect at
random moments (before admission, queued, mid-prefill, mid-stream), bad requests, requests the engine
fails on purpose (a wrapper runner raises for them inside the step: tests/helpers/faulty_runner.py) and,
in one round, ``max_num_seqs`` lowered under load. After every round: each good request got exactly its
clean-run text and length, the gauges are back to 0, no KV block is held, the engine is alive, and RSS has
not grown.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import threading
import time

import httpx
import pytest

from minivllm.core.rollback import RequestError
from tests.helpers.faulty_runner import inject
from tests.helpers.server import HANG_S, TINY_SERVER_FLAGS, running_server, stream, wait_idle

FLAGS = ("--max-model-len", "256", "--num-gpu-blocks", "40", "--max-num-batched-tokens", "48", "--max-num-seqs", "8")
GOOD = [
    ("the cat sat on the mat", 24),
    ("hello world, the dog", 40),
    ("the dog ran far and the cat", 16),
    ("world", 32),
    ("the mat and the dog ran", 28),
    ("hello", 20),
]
POISON = 317  # a token id only the requests the engine must fail carry
BAD = [  # (raw JSON body, the param the 400 must name)
    (json.dumps({"prompt": "the cat", "seed": 2**64}), "seed"),
    (json.dumps({"prompt": "the cat", "min_tokens": 2, "stop_token_ids": [5000]}), "stop_token_ids"),
    (json.dumps({"prompt": "the cat", "max_tokens": True}), "max_tokens"),
    (json.dumps({"prompt": [5, True, 7]}), "prompt"),
    (json.dumps({"prompt": "the \ud800 cat"}), "prompt"),  # a lone surrogate, as a JSON escape
    ('{"prompt": "the cat", "temperature": NaN}', "temperature"),
]


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


class Faults:
    """The FaultyRunner's fault: fails POISON requests inside the step; ``pause`` stalls one step."""

    def __init__(self, engine) -> None:
        self.engine, self.pause, self.failed = engine, 0.0, 0

    def __call__(self, out) -> None:
        if self.pause:
            time.sleep(self.pause)
            self.pause = 0.0
        requests = self.engine.scheduler.requests
        poisoned = [r for r in out.num_scheduled_tokens if POISON in requests[r].prompt_token_ids]
        if poisoned:
            self.failed += len(poisoned)
            raise RequestError(poisoned, "injected fault")


@pytest.fixture(scope="module")
def server(tiny_qwen2):
    with running_server(tiny_qwen2, *FLAGS) as srv:
        srv.faults = Faults(srv.engine.engine)
        inject(srv.engine.engine, srv.faults)
        yield srv


def completion(prompt, max_tokens: int) -> dict:
    return {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}


@pytest.fixture(scope="module")
def clean(server) -> dict[str, str]:
    """Each good prompt's greedy text, served alone."""
    url = f"{server.base_url}/v1/completions"
    return {p: httpx.post(url, json=completion(p, n), timeout=30).json()["choices"][0]["text"] for p, n in GOOD}


def check_server_clean(server, headers: dict[str, str] | None = None) -> None:
    url = server.base_url
    state = wait_idle(url, headers=headers)
    assert state["num_free_blocks"] == state["num_gpu_blocks"] - 1, "a KV block leaked"
    metrics = httpx.get(f"{url}/metrics").text
    for gauge in ("vllm:num_requests_running", "vllm:num_requests_waiting"):
        line = next(x for x in metrics.splitlines() if x.startswith(gauge + "{"))
        assert line.endswith(" 0") or line.endswith(" 0.0"), line
    assert httpx.get(f"{url}/health").status_code == 200 and server.engine.alive


async def disconnecting(client: httpx.AsyncClient, url: str, rng: random.Random) -> None:
    """A client that goes away at a random moment: before its request is admitted, queued, mid-prefill or
    mid-stream (the task is cancelled, which closes its connection)."""
    body = completion(" ".join(rng.choice(["the", "cat", "dog", "mat"]) for _ in range(rng.randint(2, 120))), 60)
    body["stream"] = rng.random() < 0.7
    task = asyncio.ensure_future(client.post(f"{url}/v1/completions", json=body))
    await asyncio.sleep(rng.uniform(0.0, 0.4))
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def one_round(server, rng: random.Random, reconfigure: bool) -> tuple[list, list, list]:
    url = server.base_url
    async with httpx.AsyncClient(timeout=60) as c:
        good = [stream(c, f"{url}/v1/completions", completion(p, n)) for p, n in GOOD]
        gone = [disconnecting(c, url, rng) for _ in range(6)]
        headers = {"Content-Type": "application/json"}
        bad = [c.post(f"{url}/v1/completions", content=b, headers=headers) for b, _ in BAD]
        poisoned = [
            stream(c, f"{url}/v1/completions", completion([POISON, 5, 6, 7], 8)),
            c.post(f"{url}/v1/completions", json=completion([8, POISON, 9], 8)),
        ]
        jobs = good + gone + bad + poisoned
        rng.shuffle(jobs)
        if reconfigure:
            jobs.append(reconfiguration(c, url))
        results = await asyncio.gather(*jobs)
    by_kind = {id(j): r for j, r in zip(jobs, results)}
    order = good + bad + poisoned
    got = [by_kind[id(j)] for j in order]
    return got[: len(good)], got[len(good) : len(good) + len(bad)], got[len(good) + len(bad) :]


async def reconfiguration(client: httpx.AsyncClient, url: str) -> None:
    await asyncio.sleep(0.05)
    low = await client.post(f"{url}/admin/scheduling", json={"max_num_seqs": 1})
    assert low.status_code == 200, low.text
    await asyncio.sleep(0.3)
    back = await client.post(f"{url}/admin/scheduling", json={"max_num_seqs": 8})
    assert back.status_code == 200, back.text


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_round_of_faults_leaves_good_requests_exact_and_the_server_clean(server, clean, seed):
    rss_before = rss_bytes()
    good, bad, (poisoned_stream, poisoned_plain) = asyncio.run(one_round(server, random.Random(seed), seed == 1))
    for (prompt, n), got in zip(GOOD, good):
        assert got.status == 200 and got.done and got.finish_reason == "length"
        assert got.text == clean[prompt] and len(got.times) == n
    for (_, param), resp in zip(BAD, bad):
        assert resp.status_code == 400 and resp.json()["error"]["param"] == param, resp.text
    errors = [str(c.get("error")) for c in poisoned_stream.chunks]
    assert poisoned_stream.status == 200 and any("injected fault" in e for e in errors)
    assert poisoned_plain.status_code == 500 and "injected fault" in poisoned_plain.json()["error"]["message"]
    check_server_clean(server)
    assert rss_bytes() - rss_before < 64 * 2**20


def test_a_client_gone_while_its_request_is_queued_does_not_stop_the_engine(server, clean):
    """Finding 1: the engine thread died setting a result on the cancelled future of a queued request."""
    url = server.base_url
    host, port = url.removeprefix("http://").split(":")
    answers = []
    for _ in range(3):
        server.faults.pause = 0.6  # the next step takes 0.6 s: a request sent meanwhile waits in the inbox
        busy = threading.Thread(
            target=lambda: answers.append(
                httpx.post(f"{url}/v1/completions", json=completion("hello", 4), timeout=30).status_code
            )
        )
        busy.start()
        time.sleep(0.15)
        body = b'{"prompt": "the cat sat", "max_tokens": 50, "stream": true}'
        sock = socket.create_connection((host, int(port)))
        sock.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        time.sleep(0.1)
        sock.close()
        busy.join()
    assert answers == [200, 200, 200]
    got = httpx.post(f"{url}/v1/completions", json=completion("world", 32), timeout=30).json()
    assert got["choices"][0]["text"] == clean["world"]
    check_server_clean(server)


# ---------------------------------------------------------------- issue 30: oversized valid input beside good streams
ATTACK_FLAGS = (*TINY_SERVER_FLAGS, "--admin-token", "tok")
AUTH = {"Authorization": "Bearer tok"}
LONG = [("the cat sat on the mat", 120), ("hello world, the dog", 120), ("the dog ran far and the cat", 120)]
ATTACKS = [  # (endpoint, raw body, the param its 400 names): each once cost every other stream dearly
    ("completions", {"prompt": "the cat", "min_tokens": 100, "max_tokens": 120, "stop_token_ids": [5] * 1_000_000},
     "stop_token_ids"),
    ("completions", {"prompt": "the cat", "max_tokens": 120, "stop": ["zq"] * 300_000}, "stop"),
    ("chat/completions", {"messages": [{"role": "user", "content": ""}] * 200_000}, "messages"),
]  # fmt: skip


def gaps(streams: list) -> list[float]:
    return [b - a for s in streams for a, b in zip(s.times, s.times[1:])]


def median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


async def good_streams(url: str) -> list:
    async with httpx.AsyncClient(timeout=HANG_S) as c:
        return await asyncio.gather(*(stream(c, f"{url}/v1/completions", completion(p, n)) for p, n in LONG))


async def attackers(url: str, rng: random.Random) -> tuple[list, list]:
    """One of each kind: huge stop_token_ids, a huge stop list, 200k empty messages, /demo/chats without the
    token and with repeat (4 connections), and clients that disconnect mid-request."""
    headers = {"Content-Type": "application/json"}
    async with httpx.AsyncClient(timeout=HANG_S) as c:
        bodies = [(e, json.dumps(b).encode(), p) for e, b, p in ATTACKS]
        refused = [c.post(f"{url}/v1/{e}", content=b, headers=headers) for e, b, _ in bodies]
        demo = {"chats": [{"messages": [{"role": "user", "content": "x"}], "max_tokens": 200}] * 16, "repeat": True}
        chats = [c.post(f"{url}/demo/chats", json=demo) for _ in range(4)]
        gone = [disconnecting(c, url, rng) for _ in range(4)]
        results = await asyncio.gather(*refused, *chats, *gone)
    return list(zip(bodies, results[: len(refused)])), results[len(refused) : len(refused) + len(chats)]


def test_oversized_valid_input_beside_good_streams_leaves_them_exact_and_unseen_by_the_engine(tiny_qwen2):
    """Issue 30: one attacker of each kind beside three good greedy streams. The attackers are refused (400 naming
    the field, 401 for /demo/chats without the token) before the engine sees them (its trace runs the six good
    requests to their end, and no other), and the good streams get exactly their clean tokens. Their median
    inter-token gap beside the attack, against the clean run's, is printed, not asserted: a wall-clock ratio on
    a shared CPU is a benchmark's business (it read 0.7-1.3x here and 1.9x once in a loaded CI run)."""
    with running_server(tiny_qwen2, *ATTACK_FLAGS) as srv:
        url = srv.base_url
        clean = asyncio.run(good_streams(url))
        clean_median = median(gaps(clean))

        async def attacked() -> tuple[list, tuple[list, list]]:
            good = asyncio.ensure_future(good_streams(url))
            async with httpx.AsyncClient(timeout=HANG_S) as c:  # the attack starts once every good stream runs
                while (await c.get(f"{url}/admin/state", headers=AUTH)).json()["num_running"] < len(LONG):
                    await asyncio.sleep(0.01)
            bad = await attackers(url, random.Random(0))
            return await good, bad

        good, (refused, chats) = asyncio.run(attacked())
        for s, c in zip(good, clean):
            assert s.status == 200 and s.done and s.text == c.text and len(s.times) == len(c.times) == 120
        for (_, _, param), resp in refused:
            assert resp.status_code == 400 and resp.json()["error"]["param"] == param, resp.text
        assert all(r.status_code == 401 for r in chats), [r.status_code for r in chats]
        ratio = median(gaps(good)) / clean_median
        print(f"median ITL attacked {median(gaps(good)) * 1e3:.2f} ms, clean {clean_median * 1e3:.2f} ms: {ratio:.2f}x")
        # the engine saw the clean three, the good three (120 tokens each) and the disconnecting clients (aborted
        # before 60): an oversized attacker that got in would be a 7th request run to its end
        recs = httpx.get(f"{url}/admin/trace", headers=AUTH, params={"limit": 1000}).json()["requests"].values()
        finished = [(r["finish_reason"], len(r["token_times"])) for r in recs if r["finish_reason"] != "abort"]
        assert finished == [("length", 120)] * 2 * len(LONG), finished
        check_server_clean(srv, headers=AUTH)
