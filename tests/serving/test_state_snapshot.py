"""/admin/state from the snapshot the engine thread publishes (§11.1.1 live demo): it answers while a step is
still running, says since when that step runs, and keeps its step list bounded and in order."""

from __future__ import annotations

import asyncio
import threading

import pytest

from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.sampling_params import SamplingParams
from minivllm.serving.async_engine import AsyncEngine
from minivllm.serving.state_snapshot import StateSnapshots
from minivllm.worker.fake_runner import FakeModelRunner

pytest.importorskip("fastapi")


class GatedRunner(FakeModelRunner):
    """A fake model whose steps wait for ``release`` while ``gated`` is set: a step as long as a test wants."""

    def __init__(self) -> None:
        super().__init__(vocab_size=100)
        self.gated = threading.Event()
        self.inside = threading.Event()  # set while a gated step waits
        self.release = threading.Event()

    def execute_model(self, scheduler_output):
        if self.gated.is_set():
            self.inside.set()
            assert self.release.wait(30), "the test never released the step"
            self.inside.clear()
        return super().execute_model(scheduler_output)


def make_engine(runner: FakeModelRunner) -> LLMEngine:
    config = EngineConfig.from_kwargs(max_model_len=256, num_gpu_blocks=64, max_num_batched_tokens=64, max_num_seqs=4)
    return LLMEngine(config, model_runner=runner)


def test_snapshot_steps_are_built_once_bounded_and_in_order():
    engine = make_engine(FakeModelRunner(vocab_size=100))
    snaps = StateSnapshots(max_steps=5)
    engine.trace.max_steps = 8  # the trace drops its older half now and then; the snapshot must not care
    engine.add_request("a", list(range(100)), SamplingParams(max_tokens=20, ignore_eos=True))
    seen = []
    while engine.has_unfinished_requests():
        engine.step()
        snap = snaps.build(engine)
        seen.append(snap["steps"][-1]["step"])
        assert [s["step"] for s in snap["steps"]] == list(range(max(0, seen[-1] - 4), seen[-1] + 1))
    assert seen == list(range(len(seen))) and snap["num_steps"] == len(seen)
    assert snap["num_unfinished"] == 0 and snap["num_free_blocks"] == snap["num_gpu_blocks"] - 1
    assert snap["scheduling"]["max_num_batched_tokens"] == 64
    assert snaps.build(engine)["steps"] == snap["steps"]  # no new step, nothing added


def test_admin_state_answers_during_a_step_and_says_when_it_started():
    from fastapi.testclient import TestClient

    from minivllm.serving.server import build_app

    runner = GatedRunner()
    engine = AsyncEngine(make_engine(runner))
    app = build_app(engine, "fake")
    outputs: list = []

    def client_request() -> None:
        async def go():
            params = SamplingParams(max_tokens=3, temperature=0.0, ignore_eos=True)
            return [d async for d in engine.generate("r", list(range(10)), params)]

        outputs.append(asyncio.run(go()))

    with TestClient(app, base_url="http://127.0.0.1") as client:
        idle = client.get("/admin/state").json()
        assert idle["num_steps"] == 0 and idle["step_started"] is None and idle["alive"]
        runner.gated.set()
        thread = threading.Thread(target=client_request)
        thread.start()
        try:
            assert runner.inside.wait(10), "the first step never started"
            during = client.get("/admin/state", params={"last_steps": 5}).json()  # the step is still running
            assert runner.inside.is_set()  # answered before the step was released
            assert during["step_started"] is not None and during["step_started"] <= during["now"]
            assert during["num_steps"] == 0 and during["steps"] == []  # the running step is not a step yet
            assert during["num_running"] == 0 and during["num_waiting"] == 1  # published before the step began
        finally:
            runner.gated.clear()
            runner.release.set()
            thread.join(timeout=30)
        after = client.get("/admin/state", params={"last_steps": 2}).json()
    assert [d.num_output_tokens for d in outputs[0]] == [1, 2, 3]
    assert after["step_started"] is None and after["num_unfinished"] == 0
    assert after["num_steps"] == 3 and [s["step"] for s in after["steps"]] == [1, 2]


def test_the_first_snapshot_is_published_at_start_before_any_step():
    engine = AsyncEngine(make_engine(FakeModelRunner(vocab_size=100)))
    assert engine.snapshot is None  # /admin/state answers 503 "engine_starting" in this window
    engine.start()
    try:
        assert engine.snapshot is not None and engine.snapshot["num_steps"] == 0 and engine.step_started is None
    finally:
        engine.shutdown()
