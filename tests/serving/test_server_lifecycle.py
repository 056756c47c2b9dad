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


CLIENT = """
import httpx, json, sys
url, stream = sys.argv[1], sys.argv[2] == "stream"
body = {"prompt": "the cat", "max_tokens": 240, "ignore_eos": True, "stream": stream}
try:
    if stream:
        with httpx.stream("POST", url + "/v1/completions", json=body, timeout=60) as r:
            lines = [x for x in r.iter_lines() if x]
        errors = [json.loads(x[6:])["error"] for x in lines[:-1] if '"error"' in x]
        ok = lines[-1] == "data: [DONE]"
        shut = ok and errors and "server shutting down" in errors[0]["message"]
        print("SHUTDOWN" if shut else "DONE" if ok and not errors else "CUT")
    else:
        r = httpx.post(url + "/v1/completions", json=body, timeout=60)
        err = r.json().get("error") if r.headers.get("content-type") == "application/json" else None
        shut = err is not None and "server shutting down" in err["message"]
        print("DONE" if r.status_code == 200 else f"SHUTDOWN {r.status_code}" if shut else f"PLAIN {r.status_code}")
except httpx.HTTPError:
    print("CUT")
"""


@pytest.mark.slow  # a server process
def test_sigterm_ends_every_request_in_the_openai_error_shape_and_logs_cleanly(tiny_qwen2):
    """Finding 6 (SIGTERM with 32 in flight: 28 streams cut mid-body, 8 plain-text 500s, an uvicorn ERROR) and
    the terminal of finding 7 (the page's address printed, polls and the admin token not in the access log)."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "minivllm", "serve", "--model", tiny_qwen2, "--port", str(port), *FLAGS]
    cmd += ["--log-level", "info", "--admin-token", "s3cret"]
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
        auth = {"Authorization": "Bearer s3cret"}
        assert httpx.get(f"{url}/?admin_token=s3cret").status_code == 200
        for _ in range(5):
            assert httpx.get(f"{url}/admin/state", headers=auth).status_code == 200
        # max_num_seqs 1 and 16 long requests: they stay in flight for many seconds
        kinds = ["stream"] * 12 + ["plain"] * 4
        clients = [
            subprocess.Popen([sys.executable, "-c", CLIENT, url, k], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            for k in kinds
        ]
        while httpx.get(f"{url}/admin/state", headers=auth).json()["num_unfinished"] < len(kinds):
            assert all(c.poll() is None for c in clients), "a request finished before SIGTERM: make them longer"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)  # a guard against a hang, not a speed bound: the outcome below is the check
        log = proc.stdout.read().decode()
        # uvicorn re-raises the SIGTERM it handled once it has shut down: -15 is a clean exit here
        assert proc.returncode in (0, -signal.SIGTERM), log[-2000:]
        outcomes = [c.communicate(timeout=60)[0].decode().strip() for c in clients]
        # Every request in flight finished or ended with the "server shutting down" error, in the OpenAI shape:
        # each stream with its error event and [DONE], each plain request with a JSON 503; none cut, none plain.
        assert all(o in ("DONE", "SHUTDOWN", "SHUTDOWN 503") for o in outcomes), (outcomes, log[-2000:])
        # How many finish between the moment all 16 were in flight and the abort depends on the machine's speed
        # (one runs at a time; a loaded CI run finished 3 of them): the shutdown must have met some in flight.
        assert any(o.startswith("SHUTDOWN") for o in outcomes), outcomes
        assert "ERROR" not in log and "Traceback" not in log, log[-3000:]
        assert f"the demo page: http://127.0.0.1:{port}/" in log and "stopped cleanly" in log, log[-3000:]
        assert "s3cret" not in log and "admin_token=***" in log, log[-3000:]
        assert "/admin/state" not in log, log[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
