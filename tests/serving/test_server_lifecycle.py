"""The server's life: if the engine loop itself stops, /health says 503, every stream gets the error and the
process exits; SIGTERM stops it within seconds even with streams open."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.helpers.server import running_server

FLAGS = ("--max-model-len", "256", "--num-gpu-blocks", "64", "--max-num-batched-tokens", "64", "--max-num-seqs", "1")
ROOT = Path(__file__).resolve().parents[2]


def break_the_scheduler(engine) -> None:
    """A bug in the engine's own code (not one request's): schedule() raises from the next step on."""

    def schedule():
        raise RuntimeError("scheduler bug")

    engine.engine.scheduler.schedule = schedule


def test_a_dead_engine_loop_says_so(tiny_qwen2):
    with running_server(tiny_qwen2, *FLAGS) as srv:
        url = srv.base_url
        srv.engine.on_dead = None  # keep the server up to look at it
        break_the_scheduler(srv.engine)
        resp = httpx.post(f"{url}/v1/completions", json={"prompt": "the cat", "max_tokens": 8}, timeout=10)
        assert resp.status_code == 500 and "scheduler bug" in resp.json()["error"]["message"]
        assert httpx.get(f"{url}/health").status_code == 503
        again = httpx.post(f"{url}/v1/completions", json={"prompt": "the cat", "max_tokens": 8}, timeout=10)
        assert again.status_code == 503 and again.json()["error"]["code"] == "engine_dead"
        assert httpx.get(f"{url}/metrics").status_code == 503  # answered at once, not hung


def test_a_dead_engine_loop_stops_the_server(tiny_qwen2):
    with running_server(tiny_qwen2, *FLAGS) as srv:
        with httpx.Client(timeout=10) as client:
            break_the_scheduler(srv.engine)
            with client.stream(
                "POST", f"{srv.base_url}/v1/completions", json={"prompt": "the", "max_tokens": 8, "stream": True}
            ) as resp:
                events = [line for line in resp.iter_lines() if line]
        assert any("scheduler bug" in e for e in events) and events[-1] == "data: [DONE]"
        deadline = time.monotonic() + 10
        while srv.thread.is_alive():
            assert time.monotonic() < deadline, "the server did not exit after its engine died"
            time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # a server process
def test_sigterm_stops_the_server_within_seconds_with_streams_open(tiny_qwen2):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "minivllm", "serve", "--model", tiny_qwen2, "--port", str(port), *FLAGS]
    cmd += ["--log-level", "warning"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.1)
        # max_num_seqs 1 and 12 long requests: their streams stay open for many seconds
        clients = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    (
                        "import httpx\n"
                        "try:\n"
                        f"    with httpx.stream('POST', '{url}/v1/completions', "
                        "json={'prompt': 'the cat', 'max_tokens': 240, 'ignore_eos': True, 'stream': True}, "
                        "timeout=60) as r:\n"
                        "        text = '\\n'.join(r.iter_lines())\n"
                        "    print('SHUTDOWN' if 'server shutting down' in text else 'DONE' if '[DONE]' in text "
                        "else 'CUT')\n"
                        "except httpx.HTTPError:\n"
                        "    print('CUT')\n"
                    ),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(12)
        ]
        time.sleep(1.5)
        assert all(c.poll() is None for c in clients), "the streams finished before SIGTERM: make them longer"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)  # a guard against a hang, not a speed bound: the outcome below is the check
        # uvicorn re-raises the SIGTERM it handled once it has shut down: -15 is a clean exit here
        assert proc.returncode in (0, -signal.SIGTERM), proc.stdout.read().decode()[-2000:]
        outcomes = [c.communicate(timeout=60)[0].decode().strip() for c in clients]
        # Every client's stream ended: finished ([DONE]), failed by the engine ("server shutting down") or closed
        # by the exiting server; the server did not wait for the queued ones (12 x 240 tokens, one at a time).
        assert all(o in ("DONE", "SHUTDOWN", "CUT") for o in outcomes), outcomes
        assert any(o != "DONE" for o in outcomes), outcomes
    finally:
        if proc.poll() is None:
            proc.kill()
