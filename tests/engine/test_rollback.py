"""A failed step is undone so that one request's failure stays its own (minivllm.core.rollback,
``Scheduler.roll_back_step``). Faults are injected by a wrapper runner (tests/helpers/faulty_runner.py).

On the tiny real model (greedy tokens compared with a clean run) and the fake runner (many steps, the
block pool checked after every step): the failed request ends with "abort" and the reason, every other
request gets exactly the tokens of a clean run, no KV block leaks, and a prefix hit never lands on a
block whose KV the failed step did not write.
"""

from __future__ import annotations

import pytest

from minivllm import LLM, SamplingParams
from minivllm.config import EngineConfig
from minivllm.core.rollback import RequestError
from minivllm.engine.llm_engine import LLMEngine
from minivllm.worker import model_runner as model_runner_module
from minivllm.worker.fake_runner import FakeModelRunner
from tests.helpers.faulty_runner import inject
from tests.helpers.tiny_engine import make_engine

GREEDY = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
SHARED = list(range(3, 40))  # 37 tokens: two full blocks of 16 shared by every prompt


def real_engine(loaded, **kwargs) -> LLMEngine:
    return make_engine(loaded, **{**dict(max_num_batched_tokens=24, num_gpu_blocks=40), **kwargs})


def fake_engine(**kwargs) -> LLMEngine:
    kwargs = dict(dict(max_num_batched_tokens=24, max_num_seqs=4, max_model_len=256, num_gpu_blocks=40), **kwargs)
    return LLMEngine(EngineConfig.from_kwargs(model="fake", **kwargs), model_runner=FakeModelRunner(vocab_size=320))


def prompts() -> dict[str, list[int]]:
    return {f"r{i}": SHARED + [50 + i] * (5 + 7 * i) for i in range(4)}


def run(engine: LLMEngine, faults: dict | None = None) -> dict[str, tuple[list[int], str, object]]:
    """Add the prompts one step apart and step to the end; at step k, ``faults[k](out)`` runs after the
    runner (once, in a FaultyRunner) and may raise. The block pool is checked after every step. Returns each
    request's (tokens, finish_reason, stop_reason)."""
    pending, step, faults = list(prompts().items()), 0, dict(faults or {})
    kv = engine.scheduler.kv_cache_manager

    def hook(out) -> None:
        if step in faults:
            faults.pop(step)(out)

    inject(engine, hook)
    while pending or engine.has_unfinished_requests():
        if pending:
            engine.add_request(*pending.pop(0), GREEDY)
        engine.step()
        step += 1
        owned = [b for blocks in kv.req_to_blocks.values() for b in blocks]
        assert all(b.ref_cnt > 0 for b in owned)
    assert kv.block_pool.get_num_free_blocks() == kv.block_pool.num_gpu_blocks - 1  # only the null block
    return {
        r: (c.token_ids, c.finish_reason, c.stop_reason)
        for r, c in ((r, o.outputs[0]) for r, o in engine.outputs.items())
    }


def blame_last(seen: list[str]):
    """A fault that names the last request scheduled in the step."""

    def fault(out) -> None:
        seen.append(list(out.num_scheduled_tokens)[-1])
        raise RequestError(seen[-1], "injected fault")

    return fault


def others(result: dict, victims: list[str]) -> dict:
    return {r: v for r, v in result.items() if r not in victims}


@pytest.mark.parametrize("step", [1, 2, 4, 6])
def test_a_failed_request_ends_alone_and_the_others_keep_their_tokens(tiny, step):
    clean = run(real_engine(tiny))
    victims: list[str] = []
    failed = run(real_engine(tiny), {step: blame_last(victims)})
    assert failed[victims[0]][1:] == ("abort", "injected fault")
    assert others(failed, victims) == others(clean, victims)
    assert len(clean[victims[0]][0]) == 6 and len(failed[victims[0]][0]) < 6


def test_no_prefix_hit_on_blocks_the_failed_step_never_wrote(tiny, monkeypatch):
    """The bad request fails while the runner builds its state, before the forward pass: the blocks that
    step made full (its own and r0's, same prefix) hold no KV. r0, recomputed, and r1-r3 after it must not
    hit them (the clean run's tokens prove they did not)."""
    clean = run(real_engine(tiny, max_num_batched_tokens=128))
    real = model_runner_module.make_generator

    def make_generator(params, device):
        if params.seed == 13:
            raise OverflowError("seed out of range")
        return real(params, device)

    monkeypatch.setattr(model_runner_module, "make_generator", make_generator)
    engine = real_engine(tiny, max_num_batched_tokens=128)
    engine.add_request("bad", SHARED + [60] * 20, SamplingParams(max_tokens=4, temperature=0.0, seed=13))
    result = run(engine)
    assert result["bad"][1] == "abort" and "OverflowError: seed out of range" in result["bad"][2]
    assert others(result, ["bad"]) == clean
    assert engine.trace.steps[0].prefix_cache_hit_tokens["r0"] == 0  # r0 recomputed from scratch


def test_an_unattributed_failure_fails_only_the_requests_of_that_step():
    clean = run(fake_engine())
    scheduled: list[list[str]] = []

    def boom(out) -> None:
        scheduled.append(list(out.num_scheduled_tokens))
        raise IndexError("list index out of range")

    failed = run(fake_engine(), {1: boom})
    victims = scheduled[0]
    assert 1 <= len(victims) < len(clean)
    assert all(failed[r][1:] == ("abort", "IndexError: list index out of range") for r in victims)
    assert others(failed, victims) == others(clean, victims)


def test_many_faults_on_the_fake_runner_never_leak_or_change_the_survivors():
    small = dict(num_gpu_blocks=10, max_model_len=128)  # 9 usable blocks for 4 requests of 5: preemptions
    clean_engine = fake_engine(**small)
    clean = run(clean_engine)
    assert any(s.preempted for s in clean_engine.trace.steps)
    victims: list[str] = []
    faults = {k: blame_last(victims) for k in (1, 3, 5)}
    failed = run(fake_engine(**small), faults)
    assert len(set(victims)) >= 2
    assert others(failed, victims) == others(clean, victims)


def test_a_request_whose_sampling_fails_in_the_runner_fails_alone(tiny, monkeypatch):
    """What one request's bad sampling parameters used to do to the whole batch (an IndexError in the step)."""
    clean = run(real_engine(tiny))
    real = model_runner_module.apply_min_tokens

    def bad_min_tokens(rows, outputs, params, eos):
        if params[0].min_tokens:
            raise IndexError("index 400 is out of bounds for dimension 1 with size 320")
        return real(rows, outputs, params, eos)

    monkeypatch.setattr(model_runner_module, "apply_min_tokens", bad_min_tokens)
    engine = real_engine(tiny)
    engine.add_request("bad", [7, 8, 9], SamplingParams(max_tokens=4, min_tokens=2, temperature=0.0))
    result = run(engine)
    assert result["bad"][1] == "abort" and "IndexError: index 400" in result["bad"][2]
    assert others(result, ["bad"]) == clean


def test_lowering_max_num_seqs_lets_the_running_set_drain():
    clean = run(fake_engine())
    engine = fake_engine()
    seen = []

    def lower(out) -> None:
        seen.append(len(engine.scheduler.running))
        engine.set_scheduling(max_num_seqs=1)

    result = run(engine, {3: lower})
    assert seen[0] >= 2 and result == clean  # same tokens: the limit only holds admissions back
    assert engine.scheduler.scheduler_config.max_num_seqs == 1


def test_llm_generate_interrupted_leaves_no_request_behind(tiny):
    llm = LLM(tiny.hf_folder, device="cpu", num_gpu_blocks=40, max_model_len=256)
    calls = []

    def interrupt(out) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt

    inject(llm.engine, interrupt)
    with pytest.raises(KeyboardInterrupt):
        llm.generate([[5, 6, 7], [8, 9]], GREEDY, use_tqdm=False)
    assert not llm.engine.has_unfinished_requests() and not llm.engine.outputs
    pool = llm.engine.scheduler.kv_cache_manager.block_pool
    assert pool.get_num_free_blocks() == pool.num_gpu_blocks - 1
    assert [len(o.outputs[0].token_ids) for o in llm.generate([[5, 6, 7]], GREEDY, use_tqdm=False)] == [6]


def test_llm_generate_after_an_engine_exception_serves_the_next_call(tiny):
    """Finding 4 of the server issue: after one failed step, the next LLM.generate used to spin forever."""
    llm = LLM(tiny.hf_folder, device="cpu", num_gpu_blocks=40, max_model_len=256)
    inject(llm.engine, lambda out: (_ for _ in ()).throw(OverflowError("int too big to convert")))
    (failed,) = llm.generate([[5, 6, 7]], GREEDY, use_tqdm=False)
    assert failed.outputs[0].finish_reason == "abort" and "OverflowError" in failed.outputs[0].stop_reason
    inject(llm.engine, None)
    (ok,) = llm.generate([[5, 6, 7]], GREEDY, use_tqdm=False)
    assert ok.outputs[0].finish_reason == "length" and len(ok.outputs[0].token_ids) == 6
