"""A prefill-first scheduler with prefill-only steps: what V1's unified budget replaced (§11.1, §11.2).

This is the behaviour of vLLM V0's default scheduler (``vllm/core/scheduler.py``, ``_schedule_default``
with chunked prefill off), and of small engines such as nano-vllm and mini-sglang today:

1. Prefills first. Waiting requests are admitted in queue order while their whole uncached prompt fits
   the token budget, ``max_num_seqs`` and the free KV blocks (V0's ``_schedule_prefills``). A prompt is
   never split.
2. If any prompt was admitted, the step is a prefill-only step: the running requests get nothing, so
   their token streams pause for as long as the prefill takes. This is the stall of §11.1.
3. Otherwise every running request decodes one token (V0's ``_schedule_running``). When the KV cache is
   full, the last running request is preempted and recomputed later, as V1 does.

It is a comparison baseline, kept apart from ``minivllm.core.scheduler`` (which never branches on
prefill or decode): a subclass that replaces ``schedule()`` and reuses everything else, namely the
queues, the KV cache manager, preemption, ``update_from_output`` and the SchedulerOutput assembly.
Use it with ``LLMEngine(config, scheduler_cls=PrefillFirstScheduler)``; it needs
``enable_chunked_prefill=False`` (so that the config checks that every prompt fits the budget).
Guided decoding and speculative decoding are V1 features and are refused here.
"""

from __future__ import annotations

from minivllm.config import SchedulerConfig
from minivllm.core.output import SchedulerOutput
from minivllm.core.scheduler import Scheduler, _StepDecisions
from minivllm.request import Request


class PrefillFirstScheduler(Scheduler):
    """vLLM V0's default policy: whole prompts first, in prefill-only steps; decodes when none is waiting."""

    def reconfigure(self, scheduler_config: SchedulerConfig) -> None:
        if scheduler_config.enable_chunked_prefill:
            raise ValueError(
                "PrefillFirstScheduler never splits a prompt: it needs enable_chunked_prefill=False "
                "(the config then checks that max_num_batched_tokens >= max_model_len)."
            )
        super().reconfigure(scheduler_config)

    def add_request(self, request: Request) -> None:
        if request.grammar is not None:
            raise ValueError(f"request {request.request_id!r}: guided decoding is not supported by the baseline.")
        super().add_request(request)

    def schedule(self) -> SchedulerOutput:
        step = _StepDecisions(token_budget=self.max_num_scheduled_tokens)
        self._schedule_prefills(step)
        if not (step.scheduled_new or step.scheduled_resumed):
            self._schedule_decodes(step)
        assert len(self.running) <= self.max_num_running_reqs
        output = self._make_output(step)
        self._update_after_schedule(step)
        return output

    def _schedule_prefills(self, step: _StepDecisions) -> None:
        """Admit waiting requests, whole prompts only, in queue order, until one does not fit."""
        while self.waiting and len(self.running) < self.max_num_running_reqs:
            request = self.waiting[0]
            computed_blocks, num_computed = self.kv_cache_manager.get_computed_blocks(request)
            n = request.num_tokens - num_computed
            if n > step.token_budget:
                break  # the head of the queue waits whole; nobody overtakes it (FCFS)
            new_blocks = self.kv_cache_manager.allocate_slots(request, n, computed_blocks)
            if new_blocks is None:
                break  # out of blocks: wait for running requests to finish
            self._admit(request, n, num_computed, computed_blocks + new_blocks, step)

    def _schedule_decodes(self, step: _StepDecisions) -> None:
        """One token for every running request, preempting from the tail when the KV cache is full."""
        req_index = 0
        while req_index < len(self.running) and step.token_budget > 0:
            request = self.running[req_index]
            request.spec_token_ids.clear()  # no speculative decoding in the baseline
            n = min(request.num_tokens - request.num_computed_tokens, step.token_budget)
            if n == 0:
                req_index += 1
                continue
            new_blocks, num_undone = self._allocate_or_preempt(request, n, step)
            req_index -= num_undone
            if new_blocks is None:  # the request preempted itself
                break
            step.schedule(request, n, [b.block_id for b in new_blocks])
            step.scheduled_running.append(request)
            req_index += 1
