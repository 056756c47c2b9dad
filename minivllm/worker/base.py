"""The model-runner contract: what ``LLMEngine`` needs from whatever runs a step (§11.3, §11.6).

vLLM splits this between ``vllm/v1/executor/abstract.py`` (``Executor``: determine_available_memory,
initialize_from_config, execute_model) and ``vllm/v1/worker/gpu_model_runner.py`` (the runner itself).
minivllm runs one runner in the engine's process, so the engine talks to it directly. Three runners
satisfy it, and the type checker holds them to it (``tests/worker/test_base.py``):

- ``minivllm.worker.model_runner.ModelRunner``: the real model on a paged KV cache;
- ``minivllm.worker.fake_runner.FakeModelRunner``: deterministic tokens, no tensors;
- ``minivllm.lab.sim.sim_runner.SimRunner``: FakeModelRunner's tokens, time from a cost model.

The rules every runner keeps:

1. Its per-request state follows ``SchedulerOutput`` only: requests appear in ``scheduled_new_reqs``,
   are updated from ``scheduled_cached_reqs`` (resumed ones replace their block table) and are dropped
   in ``finished_req_ids``. ``num_computed_tokens`` is always the scheduler's (where this step's chunk
   starts); a runner never advances its own copy.
2. ``execute_model`` returns one entry per scheduled request, in ``SchedulerOutput.req_ids`` order: no
   token while the request is still inside its prompt, else the sampled token (plus accepted drafts).
3. A failure that belongs to one request is raised as ``minivllm.core.rollback.RequestError`` naming it;
   after any failure the engine calls ``roll_back`` with each surviving request's token count.
4. Async scheduling (``minivllm.core.async_scheduler``): a step may be scheduled before the previous step's
   sampled tokens reached the scheduler, so a decode's ``new_token_ids`` can lack its input token. The runner
   supplies it from its own mirror, where each step appends what it sampled (steps run one after the other,
   on one worker thread); the scheduler's later copy of the token is the same.
5. ``clock`` measures the runner's time: wall time (synchronised with the device), or the simulator's
   virtual time; the engine stamps every step with it.
"""

from __future__ import annotations

from typing import Protocol

from minivllm.core.output import ModelRunnerOutput, SchedulerOutput
from minivllm.worker.clock import Clock


class Tokenizer(Protocol):
    """What the engine asks of a tokenizer (a Hugging Face tokenizer has it all): encode prompts, decode
    outputs, name tokens for logprobs, and, for guided decoding, its size and every token decoded alone
    (``structured_output``)."""

    def __len__(self) -> int: ...

    def encode(self, text: str) -> list[int]: ...

    def batch_decode(self, sequences: list[list[int]], /, *, clean_up_tokenization_spaces: bool) -> list[str]: ...

    def decode(self, token_ids: list[int], skip_special_tokens: bool = ...) -> str | list[str]:
        """One sequence in, one string out (Hugging Face's type also covers batches)."""
        ...

    def convert_ids_to_tokens(self, ids: list[int], skip_special_tokens: bool = ...) -> str | list[str]:
        """A list of ids in, each id's token string out (``"Ġworld"``: a logprob's ``decoded_token``)."""
        ...


class ModelRunnerBase(Protocol):
    """What the engine reads from and calls on its runner; nothing else."""

    @property
    def clock(self) -> Clock: ...

    @property
    def tokenizer(self) -> Tokenizer | None:
        """None: prompts must come as token ids."""
        ...

    @property
    def eos_token_id(self) -> int | None: ...

    @property
    def vocab_size(self) -> int | None:
        """None: token ids are not range-checked."""
        ...

    @property
    def max_position_embeddings(self) -> int | None:
        """None: the model sets no limit on max_model_len."""
        ...

    def determine_num_blocks(self) -> int:
        """How many KV blocks to allocate when the config does not say (``num_gpu_blocks``)."""
        ...

    def initialize_kv_cache(self, num_blocks: int) -> None:
        """Allocate the KV cache (or nothing, for runners that hold no tensors)."""
        ...

    def execute_model(self, scheduler_output: SchedulerOutput) -> ModelRunnerOutput:
        """Run one step's decisions; see the rules above."""
        ...

    def roll_back(self, num_tokens: dict[str, int]) -> None:
        """Forget what a failed ``execute_model`` did: each request's tokens back to ``num_tokens[req]``."""
        ...
