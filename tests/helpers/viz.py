"""Small engines on the simulator's toy price list (virtual clock: deterministic times) and timed requests."""

from __future__ import annotations

from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.sim.run import make_runner
from minivllm.lab.sim.workload import WorkloadRequest
from minivllm.sampling_params import SamplingParams


def make_engine(budget: int = 64, blocks: int = 64, block_size: int = 16, record: bool = False, **kw) -> LLMEngine:
    kw.setdefault("max_model_len", min(512, (blocks - 1) * block_size))  # the KV cache must hold one
    config = EngineConfig.from_kwargs(
        model="none",
        max_num_batched_tokens=budget,
        max_num_seqs=8,
        num_gpu_blocks=blocks,
        block_size=block_size,
        **kw,
    )
    return LLMEngine(config, model_runner=make_runner(config, preset=None), record_block_pool=record)


def requests(spec: list[tuple[str, int, int, float]], base: int = 100) -> list[WorkloadRequest]:
    """(id, prompt length, max tokens, arrival s) -> timed requests with distinct token ids."""
    return [
        WorkloadRequest(
            rid,
            arrival,
            list(range(base + 1000 * i, base + 1000 * i + n)),
            SamplingParams(max_tokens=m, ignore_eos=True),
        )
        for i, (rid, n, m, arrival) in enumerate(spec)
    ]


SCENE = [("chat0", 20, 12, 0.0), ("chat1", 24, 12, 0.0), ("chat2", 16, 10, 0.005), ("long", 150, 4, 0.02)]
