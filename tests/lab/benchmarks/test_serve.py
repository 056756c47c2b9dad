"""``python -m minivllm serve`` as a real process and the ``bench serve`` client against it (§11.9).

The client's TTFT / ITL must agree with the server's own trace. Both processes read CLOCK_MONOTONIC
(``time.perf_counter`` on Linux), and /admin/trace gives the offset of the engine clock, so every streamed chunk
can be matched with the step end that produced its token. Asserted are orders of events, which hold however
loaded the machine is (no wall-clock margin: on a machine at load average 20 the send -> handler hop alone took
a median 140 ms, against ~1 ms quiet):

* causality both ways: each request reaches the server's handler after the client sent it, and each chunk reaches
  the client after its token was made. Together these bracket the clock offset: an offset wrong by more than the
  smallest one-way hop in either direction fails.
* streamed as made, not buffered: every request's first chunk reaches the client before the server makes that
  request's last token, and each request's TPOT as the client measured it (its chunks' span / (n - 1)) is within
  half of the server's (that span differs from the server's by two deliveries, ~1 ms each quiet and at most
  ~0.1 s under load, against spans of 0.7-2 s); a server that held the chunks back would fail both.
* the bench's summary (TTFT p50, ITL p50) is what its own per-request records say.

The hop times (delivery, send -> handler) are printed for the record: how fast they are is a benchmark's
business, not this test's.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from minivllm.metrics.stats import percentile
from tests.helpers.server import wait_idle

REPO = Path(__file__).resolve().parents[3]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cli_server(tiny_qwen2):
    port = free_port()
    flags = "--max-model-len 256 --num-gpu-blocks 256 --max-num-batched-tokens 128 --max-num-seqs 16"
    cmd = [sys.executable, "-m", "minivllm", "serve", "--model", tiny_qwen2, "--port", str(port), *flags.split()]
    cmd += ["--log-level", "warning"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300  # a hang guard: it answers in ~5 s quiet, ~30 s at load average 20
    try:
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server's /health did not answer 200 within 300 s"
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_cli_rejects_bad_flags():
    from minivllm.serving import server

    with pytest.raises(SystemExit):
        server.build_parser().parse_args(["--max-num-batched-tokens", "lots"])
    args = server.build_parser().parse_args(["--no-enable-chunked-prefill", "--long-prefill-token-threshold", "0"])
    assert args.enable_chunked_prefill is False and args.port == 8000 and args.host == "127.0.0.1"


@pytest.mark.slow  # starts a server process
def test_bench_client_agrees_with_server_trace(cli_server, tmp_path, capsys):
    from minivllm.lab.benchmarks import serve as bench_serve

    out = tmp_path / "serve.json"
    argv = [
        "--base-url",
        cli_server,
        "--workload",
        "uniform",
        "--num-prompts",
        "12",
        "--request-rate",
        "30",
        "--vocab-size",
        "320",
        "--seed",
        "1",
        "--save-detailed",
        "--output-json",
        str(out),
        "--no-progress",
    ]
    bench_serve.main(argv)
    printed = capsys.readouterr().out
    assert "TTFT p50 ms" in printed and "ITL" in printed
    doc = json.loads(out.read_text())
    assert doc["mode"] == "serve" and doc["argv"] == argv
    (result,) = doc["results"]
    m = result["metrics"]
    assert m["num_completed"] == 12 and m["num_failed"] == 0 and m["num_preemptions"] == 0
    for key in ("ttft_p50", "ttft_p99", "tpot_p50", "itl_p50", "itl_p99", "e2e_p50", "output_throughput"):
        assert m[key] > 0, key

    detailed = result["requests"]
    server = httpx.get(f"{cli_server}/admin/trace").json()
    offset = server["clock_offset"]
    deliveries, one_way, ttft_diffs, itl_client, itl_server = [], [], [], [], []
    for r in detailed:
        rec = server["requests"][r["response_id"]]
        token_times = [t + offset for t in rec["token_times"]]
        chunks, n = r["chunk_times"], r["max_tokens"]
        assert len(token_times) == len(chunks) == r["usage_completion_tokens"] == n
        one_way.append(rec["arrival_time"] + offset - r["send_time"])
        deliveries += [c - t for c, t in zip(chunks, token_times)]
        ttft_diffs.append((chunks[0] - r["send_time"]) - (token_times[0] - (rec["arrival_time"] + offset)))
        itl_client += [b - a for a, b in zip(chunks, chunks[1:])]
        itl_server += [b - a for a, b in zip(token_times, token_times[1:])]
        assert n > 1, "the workload's requests must stream more than one token"
        assert chunks[0] < token_times[-1], f"{r['response_id']}: no chunk reached the client while it generated"
        tpot_client, tpot_server = (chunks[-1] - chunks[0]) / (n - 1), (token_times[-1] - token_times[0]) / (n - 1)
        assert abs(tpot_client - tpot_server) < 0.5 * tpot_server, (r["response_id"], tpot_client, tpot_server)
    assert min(one_way) > 0, "a request reached the server's handler before the client sent it"
    assert min(deliveries) > 0, "a chunk arrived before its token was made"
    assert min(ttft_diffs) > 0, "a client TTFT shorter than the server's"
    ttft_client = [r["chunk_times"][0] - r["send_time"] for r in detailed]
    assert m["ttft_p50"] == pytest.approx(percentile(ttft_client, 50), rel=1e-9, abs=1e-9)
    assert m["itl_p50"] == pytest.approx(percentile(itl_client, 50), rel=1e-9, abs=1e-9)
    diffs = [abs(c - s) for c, s in zip(itl_client, itl_server)]
    ms = lambda x: f"{x * 1e3:.2f} ms"  # noqa: E731
    print(
        f"delivery p50 {ms(percentile(deliveries, 50))}, max {ms(max(deliveries))}; send -> handler p50 "
        f"{ms(percentile(one_way, 50))}; TTFT diff p50 {ms(percentile(ttft_diffs, 50))}; |ITL diff| p50 "
        f"{ms(percentile(diffs, 50))}; ITL p50 client {ms(percentile(itl_client, 50))}, server "
        f"{ms(percentile(itl_server, 50))}"
    )
    state = wait_idle(cli_server)
    assert state["num_free_blocks"] == state["num_gpu_blocks"] - 1
