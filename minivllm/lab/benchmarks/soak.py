"""Soak test of ``python -m minivllm serve``: good, bad and disconnecting clients for minutes on end (§11.9).

``python -m minivllm.lab.benchmarks.soak --minutes 10`` starts ``python -m minivllm serve`` in a process of its
own on 127.0.0.1 (the real model by default; its RSS is read from /proc), measures each good prompt's greedy
text served alone, then runs ``--clients`` loops that each pick, at random: a good request (streamed; its
text must equal the one served alone), a bad one (an invalid body: it must get a 4xx), or one that
disconnects at a random moment (before admission, queued, mid-prefill, mid-stream). Every minute it prints
what was served and the server's RSS; at the end the good requests' TTFT / ITL percentiles, the failures of
good requests (must be 0), the engine's gauges and free KV blocks once idle, and the RSS growth since the
first minute of load (which warms up allocator pools). Only loopback traffic; it stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from minivllm.metrics.stats import percentile

GOOD = [
    "What is the capital of France?",
    "Name three colours.",
    "Count from one to five.",
    "Say hello in Spanish.",
    "What is two plus two?",
    "Write one word about the sea.",
]
BAD: list[dict[str, Any]] = [
    {"prompt": "hi", "seed": 2**64},
    {"prompt": "hi", "min_tokens": 2, "stop_token_ids": [10**6]},
    {"prompt": "hi", "max_tokens": True},
    {"prompt": [1, True]},
    {"prompt": "a \ud800 b"},
    {"prompt": "hi", "max_tokens": 0},
    {"prompt": "hi", "n": 3},
    {"messages": []},
    {"prompt": "hi", "top_p": 7},
]


def rss_mib(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))


@dataclass
class Tally:
    good: int = 0
    good_failed: int = 0
    bad: int = 0
    bad_not_refused: int = 0
    disconnects: int = 0
    ttfts: list[float] = field(default_factory=list)
    itls: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)  # MiB, once a minute


def body(prompt: str, max_tokens: int) -> dict:
    return {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "temperature": 0}


async def good_request(c: httpx.AsyncClient, url: str, prompt: str, n: int, want: str, tally: Tally) -> None:
    t0, times, text = time.perf_counter(), [], []
    try:
        async with c.stream("POST", f"{url}/v1/chat/completions", json={**body(prompt, n), "stream": True}) as r:
            ok = r.status_code == 200
            async for line in r.aiter_lines():
                if line.startswith("data: {"):
                    chunk = json.loads(line[6:])
                    ok &= "error" not in chunk
                    for ch in chunk.get("choices", []):
                        if ch.get("delta", {}).get("content"):
                            times.append(time.perf_counter())
                            text.append(ch["delta"]["content"])
    except httpx.HTTPError as e:
        ok, text = False, [f"{type(e).__name__}: {e}"]
    tally.good += 1
    if not ok or "".join(text) != want:
        tally.good_failed += 1
        tally.failures.append(f"{prompt!r}: got {''.join(text)[:80]!r}, want {want[:80]!r}")
        return
    if times:
        tally.ttfts.append(times[0] - t0)
        tally.itls += [b - a for a, b in zip(times, times[1:])]


async def bad_request(c: httpx.AsyncClient, url: str, rng: random.Random, tally: Tally) -> None:
    b = rng.choice(BAD)
    route = "chat/completions" if "messages" in b else "completions"
    r = await c.post(f"{url}/v1/{route}", content=json.dumps(b), headers={"Content-Type": "application/json"})
    tally.bad += 1
    tally.bad_not_refused += not (400 <= r.status_code < 500 and "error" in r.json())


async def disconnecting(c: httpx.AsyncClient, url: str, rng: random.Random, tally: Tally) -> None:
    prompt = " ".join(rng.choice(["the", "river", "stone", "light"]) for _ in range(rng.randint(4, 600)))
    task = asyncio.ensure_future(
        c.post(f"{url}/v1/completions", json={"prompt": prompt, "max_tokens": 64, "stream": rng.random() < 0.7})
    )
    await asyncio.sleep(rng.uniform(0, 2.0))
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    tally.disconnects += 1


async def soak(url: str, pid: int, want: dict[str, str], args: argparse.Namespace, tally: Tally) -> None:
    end = time.monotonic() + args.minutes * 60
    rss0 = rss_mib(pid)

    async def client(i: int) -> None:
        rng = random.Random(args.seed * 1000 + i)
        async with httpx.AsyncClient(timeout=600) as c:
            while time.monotonic() < end:
                kind = rng.random()
                if kind < 0.5:
                    prompt = rng.choice(GOOD)
                    await good_request(c, url, prompt, args.max_tokens, want[prompt], tally)
                elif kind < 0.75:
                    await bad_request(c, url, rng, tally)
                else:
                    await disconnecting(c, url, rng, tally)

    async def reporter() -> None:
        start = time.monotonic()
        while time.monotonic() < end:
            await asyncio.sleep(min(60, max(0.1, end - time.monotonic())))
            tally.rss.append(rss_mib(pid))
            print(
                f"{(time.monotonic() - start) / 60:5.1f} min: good {tally.good} (failed {tally.good_failed}), "
                f"bad {tally.bad}, disconnects {tally.disconnects}, server RSS {tally.rss[-1]:.0f} MiB "
                f"({tally.rss[-1] / rss0 - 1:+.1%})",
                flush=True,
            )

    await asyncio.gather(reporter(), *(client(i) for i in range(args.clients)))


def start_server(model: str, flags: str) -> tuple[subprocess.Popen, str]:
    """``python -m minivllm serve`` in its own process on a free loopback port (its RSS is the server's alone)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    serve = ["serve", "--model", model, "--port", str(port), "--log-level", "warning", *flags.split()]
    cmd = [sys.executable, "-m", "minivllm", *serve]
    proc = subprocess.Popen(cmd)
    url = f"http://127.0.0.1:{port}"
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m minivllm.lab.benchmarks.soak", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2")
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=24)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--server-flags",
        default="--max-num-batched-tokens 256 --max-num-seqs 16",
        help="flags for the server, as for python -m minivllm serve",
    )
    args = p.parse_args(argv)
    proc, url = start_server(args.model, args.server_flags)
    try:
        report(url, proc.pid, args)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def report(url: str, pid: int, args: argparse.Namespace) -> None:
    want = {}
    for prompt in GOOD:  # each good prompt alone: the text every later answer must equal
        r = httpx.post(f"{url}/v1/chat/completions", json=body(prompt, args.max_tokens), timeout=600)
        want[prompt] = r.json()["choices"][0]["message"]["content"]
    rss0 = rss_mib(pid)
    print(
        f"serving {args.model} on {url} (pid {pid}); {args.clients} clients for {args.minutes} min; "
        f"server RSS {rss0:.0f} MiB",
        flush=True,
    )
    tally = Tally()
    asyncio.run(soak(url, pid, want, args, tally))
    while (state := httpx.get(f"{url}/admin/state", params={"last_steps": 0}).json())["num_unfinished"]:
        time.sleep(0.1)
    metrics = httpx.get(f"{url}/metrics").text.splitlines()
    gauges = {
        name: next(float(x.rsplit(" ", 1)[1]) for x in metrics if x.startswith(name + "{"))
        for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc")
    }
    ms = lambda xs, q: f"{percentile(xs, q) * 1e3:.0f}"  # noqa: E731
    print(f"requests: good {tally.good}, bad {tally.bad}, disconnects {tally.disconnects}")
    print(
        f"failures of good requests: {tally.good_failed}; bad requests not refused with a 4xx: {tally.bad_not_refused}"
    )
    print(
        f"good TTFT p50/p99 {ms(tally.ttfts, 50)}/{ms(tally.ttfts, 99)} ms, ITL p50/p99 "
        f"{ms(tally.itls, 50)}/{ms(tally.itls, 99)} ms"
    )
    alive = httpx.get(f"{url}/health").status_code == 200
    print(
        f"idle: gauges {gauges}, free KV blocks {state['num_free_blocks']} of {state['num_gpu_blocks']} "
        f"(1 is the null block), /health {'200' if alive else 'not 200'}"
    )
    end = rss_mib(pid)
    line = f"server RSS before the load {rss0:.0f} MiB, at the end {end:.0f} MiB ({end / rss0 - 1:+.1%})"
    if len(tally.rss) > 1:  # the first minute warms allocator pools and caches up: growth after it is the leak
        line += f"; after the first minute {tally.rss[0]:.0f} MiB, growth since {end / tally.rss[0] - 1:+.1%}"
    print(line)
    for failure in tally.failures[:10]:
        print("  FAILED", failure)


if __name__ == "__main__":
    main()
