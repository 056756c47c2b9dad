"""SimRunner: the model runner's interface, with time from a cost model (§11.7).

The engine, the Scheduler and every decision are the real ones; only the
forward pass is replaced. Tokens come from FakeModelRunner (deterministic), and
``execute_model`` advances a VirtualClock by the cost model's price for the
step's shape, so a laptop replays GPU-scale serving in milliseconds. Mirrors
Vidur's replica stage (``vidur/entities/execution_time.py`` priced by
``execution_time_predictor``) with vLLM V1's scheduler instead of Vidur's.

The CPU preset is fitted to real ModelRunner steps by :mod:`minivllm.lab.sim.calibrate`; the GPU presets are built
from published profiles by :mod:`minivllm.lab.sim.gpu_presets`. ``term_shares`` says where the busy time went.
The cost model's engine generation (:mod:`minivllm.lab.sim.generation`) decides how host work is charged; with
vLLM 0.6's multi-step scheduling (``num_scheduler_steps`` > 1) this runner tracks the bursts: only a burst's
first step pays the host cost, and ``burst_open`` tells :func:`minivllm.lab.sim.run.run_workload` to hold new
requests until the burst ends (the V1 Scheduler still makes every decision; a burst is a run of decode-only
steps, and a request the scheduler admits from its own waiting queue mid-burst ends the burst early).
"""

from __future__ import annotations

from minivllm.config import EngineConfig
from minivllm.core.output import ModelRunnerOutput, SchedulerOutput
from minivllm.lab.sim.clock import VirtualClock
from minivllm.lab.sim.cost_model import TERMS, CostModel, step_shape
from minivllm.lab.sim.generation import MultiStepBursts
from minivllm.worker.base import Tokenizer
from minivllm.worker.fake_runner import FakeModelRunner


class SimRunner:
    """A ``minivllm.worker.base.ModelRunnerBase`` whose steps cost virtual time (and whose tokens are fake)."""

    tokenizer: Tokenizer | None = None
    max_position_embeddings: int | None = None

    def __init__(
        self,
        cost_model: CostModel,
        vocab_size: int = 49152,
        eos_token_id: int | None = None,
        num_spec_tokens: int = 0,
        config: EngineConfig | None = None,
    ) -> None:
        self.cost_model = cost_model
        self.vocab_size = vocab_size
        self.eos_token_id = eos_token_id
        self.config = config
        self.tokens = FakeModelRunner(vocab_size, eos_token_id, num_spec_tokens)
        self.clock = VirtualClock()
        self.num_steps = 0
        self.busy_time = 0.0  # virtual seconds spent in steps (the rest is idle waiting for arrivals)
        self.term_time = dict.fromkeys(TERMS, 0.0)  # busy time by cost-model term (CostModel.terms)
        self.bursts = MultiStepBursts(cost_model.num_scheduler_steps)  # vLLM 0.6 multi-step (N = 1: every step)

    @property
    def burst_open(self) -> bool:
        """A multi-step burst has steps left: a request arriving now waits for the next scheduler call."""
        return self.bursts.open

    def determine_num_blocks(self) -> int:
        """The config's num_gpu_blocks if set, else the cost model's KV capacity in blocks: with a memory
        model, what vLLM's profiling run at this budget, max_num_seqs and gpu_memory_utilization leaves."""
        if self.config is None:
            return self.cost_model.num_blocks(16)
        cc, sc = self.config.cache_config, self.config.scheduler_config
        if cc.num_gpu_blocks is not None:
            return cc.num_gpu_blocks
        return self.cost_model.num_blocks(
            cc.block_size, sc.max_num_batched_tokens, sc.max_num_seqs, cc.gpu_memory_utilization
        )

    def term_shares(self) -> dict[str, float]:
        """Each cost-model term's share of the busy time (0 when nothing ran)."""
        return {k: v / self.busy_time if self.busy_time > 0 else 0.0 for k, v in self.term_time.items()}

    def initialize_kv_cache(self, num_blocks: int) -> None:
        """Nothing to allocate: the simulator holds no tensors."""

    def roll_back(self, num_tokens: dict[str, int]) -> None:
        self.tokens.roll_back(num_tokens)

    def execute_model(self, scheduler_output: SchedulerOutput) -> ModelRunnerOutput:
        shape = step_shape(scheduler_output)
        dt, terms = self.cost_model.priced(shape, charge_host=self.bursts.step(shape))
        for k, v in terms.items():
            self.term_time[k] += v
        result = self.tokens.execute_model(scheduler_output)
        self.clock.advance(dt)
        self.num_steps += 1
        self.busy_time += dt
        return result
