"""FakeModelRunner: a deterministic stand-in for the model, with no torch (§11.3).

It keeps its own mirror of each request's tokens from SchedulerOutput, exactly as
the real model runner does, and "samples" one token for each request that has
caught up with its tokens in this step (a request still inside its prompt gets
nothing). The token at position ``p`` of request ``r`` is a fixed function of
``(r, p)``, so runs repeat exactly and can be checked by hand.

With ``num_spec_tokens > 0`` it also proposes drafts, some right and some wrong,
and verifies them as greedy speculative decoding would (§11.8.2): it returns the
longest correct prefix plus one bonus token.

Logprobs (``SamplingParams.logprobs``): its "model" puts all the probability on the token it returns, so that
token has log-probability 0.0 and rank 1 and every other token -inf. It reports that one token for any k
(deviation: vLLM's top-k would add k - 1 arbitrary tokens at -inf). As with the real runner, a request with
logprobs gets no drafts. Prompt logprobs (``prompt_logprobs``) follow from the same point mass: a prompt token
the "model" would have produced has log-probability 0.0 (rank 1), any other -inf (rank ``vocab_size``).
"""

from __future__ import annotations

import zlib

from minivllm.core.output import LogprobsLists, ModelRunnerOutput, SchedulerOutput
from minivllm.worker.base import Tokenizer
from minivllm.worker.clock import Clock, WallClock


class FakeModelRunner:
    """A ``minivllm.worker.base.ModelRunnerBase`` with no model: tokens are a function of (request, position)."""

    tokenizer: Tokenizer | None = None  # prompts come as token ids
    max_position_embeddings: int | None = None

    def __init__(self, vocab_size: int = 32000, eos_token_id: int | None = None, num_spec_tokens: int = 0) -> None:
        self.vocab_size = vocab_size
        self.eos_token_id = eos_token_id
        self.num_spec_tokens = num_spec_tokens
        self.tokens: dict[str, list[int]] = {}  # the runner's own mirror of each request's tokens
        self.logprob_req_ids: set[str] = set()  # requests with SamplingParams.logprobs
        self.prompt_lens: dict[str, int] = {}  # requests with prompt_logprobs not yet sent: their prompt length
        self.clock: Clock = WallClock()

    def determine_num_blocks(self) -> int:
        raise ValueError("num_gpu_blocks must be set for the fake runner: it has no memory to size a KV cache from.")

    def initialize_kv_cache(self, num_blocks: int) -> None:
        """Nothing to allocate: the fake runner holds no tensors."""

    def true_token(self, req_id: str, position: int) -> int:
        """The token the "model" produces at ``position`` (it never returns the EOS id by chance)."""
        token = zlib.crc32(f"{req_id}:{position}".encode()) % self.vocab_size
        return token + 1 if token == self.eos_token_id else token

    def _drafts(self, req_id: str, position: int) -> list[int]:
        """Drafts for positions ``position, position+1, ...``: a seeded number of them are right."""
        num_right = zlib.crc32(f"accept:{req_id}:{position}".encode()) % (self.num_spec_tokens + 1)
        drafts = [self.true_token(req_id, position + i) for i in range(self.num_spec_tokens)]
        for i in range(num_right, self.num_spec_tokens):
            drafts[i] = (drafts[i] + 1) % self.vocab_size
        return drafts

    def roll_back(self, num_tokens: dict[str, int]) -> None:
        """Forget what a failed ``execute_model`` did to the mirror: each request's tokens back to the
        scheduler's count (``minivllm.core.rollback``)."""
        for req_id, n in num_tokens.items():
            if req_id in self.tokens:
                del self.tokens[req_id][n:]

    def execute_model(self, scheduler_output: SchedulerOutput) -> ModelRunnerOutput:
        for req_id in scheduler_output.finished_req_ids:
            self.tokens.pop(req_id, None)
            self.logprob_req_ids.discard(req_id)
            self.prompt_lens.pop(req_id, None)
        for new in scheduler_output.scheduled_new_reqs:
            self.tokens[new.req_id] = list(new.prompt_token_ids)
            if new.sampling_params.logprobs is not None:
                self.logprob_req_ids.add(new.req_id)
            if new.sampling_params.prompt_logprobs is not None:
                self.prompt_lens[new.req_id] = len(new.prompt_token_ids)
        req_ids = scheduler_output.req_ids
        computed_before = scheduler_output.num_computed_tokens
        sampled: list[list[int]] = []
        spec: list[list[int]] = []
        prompt_logprobs: dict[str, LogprobsLists] = {}
        for req_id in req_ids:
            tokens = self.tokens[req_id]
            computed = computed_before[req_id]
            drafts = scheduler_output.scheduled_spec_decode_tokens.get(req_id, [])
            end = computed + scheduler_output.num_scheduled_tokens[req_id] - len(drafts)
            if end < len(tokens):  # still catching up with its prompt: sample nothing
                sampled.append([])
                spec.append([])
                continue
            if self.prompt_lens.get(req_id) == len(tokens):  # its first sample: the prompt is done
                prompt_logprobs[req_id] = self._prompt_logprobs(req_id, tokens[: self.prompt_lens.pop(req_id)])
            out: list[int] = []
            for draft in drafts:  # greedy verification: accept while the draft is right
                if draft != self.true_token(req_id, len(tokens) + len(out)):
                    break
                out.append(draft)
            out.append(self.true_token(req_id, len(tokens) + len(out)))
            tokens.extend(out)
            sampled.append(out)
            wants_logprobs = req_id in self.logprob_req_ids
            spec.append(self._drafts(req_id, len(tokens)) if self.num_spec_tokens and not wants_logprobs else [])
        return ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index={r: i for i, r in enumerate(req_ids)},
            sampled_token_ids=sampled,
            spec_token_ids=spec if self.num_spec_tokens else None,
            logprobs=self._logprobs(req_ids, sampled),
            prompt_logprobs_dict=prompt_logprobs,
        )

    def _prompt_logprobs(self, req_id: str, prompt: list[int]) -> LogprobsLists:
        """Per prompt token after the first: 0.0 (rank 1) if the "model" produces it there, else -inf."""
        ids, logprobs, ranks = [], [], []
        for position, token in enumerate(prompt[1:], start=1):
            mine = self.true_token(req_id, position)
            ids.append([token, mine])
            logprobs.append([0.0 if token == mine else float("-inf"), 0.0])
            ranks.append(1 if token == mine else self.vocab_size)
        return LogprobsLists(ids, logprobs, ranks)

    def _logprobs(self, req_ids: list[str], sampled: list[list[int]]) -> LogprobsLists | None:
        """Each sampling request with logprobs: its token, log-probability 0.0, rank 1 (a point mass)."""
        rows = [i for i, r in enumerate(req_ids) if r in self.logprob_req_ids and sampled[i]]
        if not rows:
            return None
        out = LogprobsLists([[] for _ in req_ids], [[] for _ in req_ids], [0] * len(req_ids))
        for i in rows:
            out.logprob_token_ids[i], out.logprobs[i], out.sampled_token_ranks[i] = [sampled[i][0]], [0.0], 1
        return out
