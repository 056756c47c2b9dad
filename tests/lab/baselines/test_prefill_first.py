"""The prefill-first baseline (vLLM V0's default scheduler): prefill-only steps pause the decodes (§11.1, §11.2)."""

from __future__ import annotations

import pytest

from minivllm.config import CacheConfig, EngineConfig, SchedulerConfig
from minivllm.core.scheduler import Scheduler
from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.baselines import PrefillFirstScheduler
from minivllm.lab.testbench import make_request, run_table, step
from minivllm.sampling_params import SamplingParams
from minivllm.worker.fake_runner import FakeModelRunner


def make(budget: int = 256, seqs: int = 16, blocks: int = 100, max_model_len: int = 256) -> PrefillFirstScheduler:
    sc = SchedulerConfig(
        max_num_batched_tokens=budget, max_num_seqs=seqs, max_model_len=max_model_len, enable_chunked_prefill=False
    )
    return PrefillFirstScheduler(sc, CacheConfig(block_size=16, num_gpu_blocks=blocks, enable_prefix_caching=False))


def test_a_new_prompt_gets_a_prefill_only_step_and_the_decodes_wait():
    s = make()
    s.add_request(make_request("chat0", 20, max_tokens=6))
    s.add_request(make_request("chat1", 30, max_tokens=6))
    runner = FakeModelRunner()
    tables = [dict(step(s, runner)[0].num_scheduled_tokens) for _ in range(2)]
    s.add_request(make_request("long", 200, max_tokens=3))  # lands while the chats decode
    tables += run_table(s, runner)
    assert tables[:5] == [
        {"chat0": 20, "chat1": 30},  # both prompts, whole, in one prefill-only step
        {"chat0": 1, "chat1": 1},
        {"long": 200},  # prefill-only: the chats get nothing this step
        {"chat0": 1, "chat1": 1, "long": 1},
        {"chat0": 1, "chat1": 1, "long": 1},
    ]


def test_the_head_waits_whole_and_nobody_overtakes_it():
    s = make(budget=256)
    for rid, n in (("a", 200), ("b", 100), ("c", 10)):
        s.add_request(make_request(rid, n, max_tokens=2))
    table = run_table(s)
    assert table[0] == {"a": 200}  # b (100) does not fit next to a, and c may not overtake b
    assert table[1] == {"b": 100, "c": 10}  # prefill first: a's decode waits
    assert table[2] == {"a": 1, "b": 1, "c": 1}


def test_out_of_blocks_the_last_request_is_preempted_and_recomputed_in_a_prefill_only_step():
    s = make(blocks=6)  # 5 usable blocks of 16 tokens
    s.add_request(make_request("a", 32, max_tokens=30))
    s.add_request(make_request("b", 32, max_tokens=30))
    table = run_table(s)
    recompute = [i for i, t in enumerate(table) if t.get("b", 0) > 1 and i > 0]
    assert recompute, "b was never preempted and recomputed"
    i = recompute[0]
    assert set(table[i]) == {"b"}  # the recompute step is prefill-only
    assert table[i]["b"] > 32  # prompt + the tokens b had generated
    assert all(v == 1 for t in table[1:i] for v in t.values())  # decodes only until then
    assert not s.has_unfinished_requests() and s.kv_cache_manager.block_pool.get_num_free_blocks() == 5


def test_chunking_is_refused():
    sc = SchedulerConfig(max_num_batched_tokens=64, max_num_seqs=4, max_model_len=256)  # chunking on
    with pytest.raises(ValueError, match="enable_chunked_prefill=False"):
        PrefillFirstScheduler(sc, CacheConfig(num_gpu_blocks=32))
    s = make()
    with pytest.raises(ValueError, match="enable_chunked_prefill=False"):
        s.reconfigure(SchedulerConfig(max_num_batched_tokens=256, max_num_seqs=16, max_model_len=256))


def test_same_tokens_as_the_v1_scheduler_through_the_engine():
    """Scheduling changes when tokens come out, never which: every request gets the same tokens."""

    def run(scheduler_cls, **kw):
        config = EngineConfig.from_kwargs(model="none", num_gpu_blocks=40, max_model_len=256, max_num_seqs=8, **kw)
        engine = LLMEngine(config, model_runner=FakeModelRunner(), scheduler_cls=scheduler_cls)
        for i, n in enumerate((40, 200, 17, 90, 130)):
            engine.add_request(f"r{i}", list(range(3 + i, 3 + i + n)), SamplingParams(max_tokens=12, ignore_eos=True))
        while engine.has_unfinished_requests():
            engine.step()
        return {r: o.outputs[0].token_ids for r, o in engine.outputs.items()}, engine.trace

    v1, v1_trace = run(Scheduler, max_num_batched_tokens=64)
    v0, v0_trace = run(PrefillFirstScheduler, max_num_batched_tokens=256, enable_chunked_prefill=False)
    assert v0 == v1 and all(len(t) == 12 for t in v0.values())
    assert any(s.prefill_tokens and s.decode_tokens for s in v1_trace.steps)  # V1 mixes
    assert not any(s.prefill_tokens and s.decode_tokens for s in v0_trace.steps)  # the baseline never does


def test_same_greedy_tokens_as_the_v1_scheduler_on_a_real_model(tiny):
    from minivllm.worker.model_runner import ModelRunner

    def run(scheduler_cls, **kw):
        config = EngineConfig.from_kwargs(
            model=tiny.hf_folder, device="cpu", num_gpu_blocks=64, max_model_len=256, max_num_seqs=4, **kw
        )
        engine = LLMEngine(config, model_runner=ModelRunner(config, tiny), scheduler_cls=scheduler_cls)
        for i, n in enumerate((30, 120, 9)):
            engine.add_request(
                f"r{i}", [5 + (7 * j + i) % 250 for j in range(n)], SamplingParams(max_tokens=8, temperature=0.0)
            )
        while engine.has_unfinished_requests():
            engine.step()
        return {r: o.outputs[0].token_ids for r, o in engine.outputs.items()}

    greedy_v1 = run(Scheduler, max_num_batched_tokens=32)
    greedy_v0 = run(PrefillFirstScheduler, max_num_batched_tokens=256, enable_chunked_prefill=False)
    assert greedy_v0 == greedy_v1
