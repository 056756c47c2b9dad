"""The step table of §11.3: per step, who got how many tokens of the budget.

``python -m minivllm steps`` runs a small workload through the real Scheduler
with the fake runner (no model) and prints it. Each cell is ``P<n>`` for n
prompt tokens (a prefill chunk), ``D<n>`` for a decode step (1 token plus any
drafts), ``--`` for a request preempted in that step. ``--async-scheduling``: the AsyncScheduler, two steps in
flight (a row is printed when its step's tokens are applied, one step after the next was scheduled); a cell in
parentheses is work for a request that had already stopped: its token is discarded (the stop was found late).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minivllm.config import CacheConfig, SchedulerConfig
from minivllm.core.async_scheduler import AsyncScheduler
from minivllm.core.output import SchedulerOutput
from minivllm.core.scheduler import Scheduler
from minivllm.lab.testbench import run_steps
from minivllm.request import Request
from minivllm.sampling_params import SamplingParams


@dataclass
class StepRow:
    step: int
    cells: dict[str, str]
    used: int
    budget: int
    waiting: int
    running: int
    free_blocks: int
    finished: list[str] = field(default_factory=list)


def describe_step(out: SchedulerOutput, prompt_lens: dict[str, int]) -> dict[str, str]:
    """``P``/``D`` cells from one SchedulerOutput: tokens before the prompt end are prefill."""
    computed = out.num_computed_tokens
    cells = {}
    for req_id, n in out.num_scheduled_tokens.items():
        prefill = max(0, min(n, prompt_lens[req_id] - computed[req_id]))
        cells[req_id] = f"P{n}" if prefill == n else (f"D{n}" if prefill == 0 else f"P{prefill}+D{n - prefill}")
    for req_id in out.preempted_req_ids:
        cells[req_id] = "--"
    return cells


def run_step_table(
    scheduler: Scheduler, requests: list[Request], arrival_steps: dict[str, int] | None = None, max_steps: int = 200
) -> list[StepRow]:
    """Run ``requests`` (each added at its arrival step, default 0) and record every step."""
    arrival_steps = arrival_steps or {}
    arrivals = [(arrival_steps.get(r.request_id, 0), r) for r in requests]
    prompt_lens = {r.request_id: r.num_tokens for r in requests}

    def note_waiting() -> None:  # before each step: a resumed request recomputes its outputs too
        for r in scheduler.waiting:
            prompt_lens[r.request_id] = r.num_tokens

    note_waiting()
    rows: list[StepRow] = []
    stopped: set[str] = set()
    for out, result in run_steps(scheduler, arrivals=arrivals, max_steps=max_steps):
        cells = describe_step(out, prompt_lens)
        cells.update({r: f"({c})" for r, c in cells.items() if r in stopped})  # async: scheduled past its stop
        stopped.update(o.request_id for o in result.outputs if o.finished)
        rows.append(
            StepRow(
                step=len(rows),
                cells=cells,
                used=out.total_num_scheduled_tokens,
                budget=out.token_budget,
                waiting=len(scheduler.waiting),
                running=len(scheduler.running),
                free_blocks=scheduler.kv_cache_manager.block_pool.get_num_free_blocks(),
                finished=[o.request_id for o in result.outputs if o.finished],
            )
        )
        note_waiting()  # the queue the next step starts from
    return rows


def format_step_table(rows: list[StepRow], req_ids: list[str]) -> str:
    head = ["step", *req_ids, "used/budget", "waiting", "running", "free blocks", "finished"]
    body = [
        [
            str(r.step),
            *(r.cells.get(i, "") for i in req_ids),
            f"{r.used}/{r.budget}",
            str(r.waiting),
            str(r.running),
            str(r.free_blocks),
            ",".join(r.finished),
        ]
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    lines = [" | ".join(x.rjust(w) for x, w in zip(line, widths)) for line in [head, *body]]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def demo(
    max_num_batched_tokens: int = 64,
    long_prefill_token_threshold: int = 0,
    enable_chunked_prefill: bool = True,
    num_gpu_blocks: int = 24,
    async_scheduling: bool = False,
) -> str:
    """Three decoding chats, then a long prompt lands among them (§11.1's scene, in tokens)."""
    max_model_len = 256
    scheduler = (AsyncScheduler if async_scheduling else Scheduler)(
        SchedulerConfig(
            max_num_batched_tokens=max(max_num_batched_tokens, 0 if enable_chunked_prefill else 256),
            max_num_seqs=8,
            max_model_len=max_model_len,
            long_prefill_token_threshold=long_prefill_token_threshold,
            enable_chunked_prefill=enable_chunked_prefill,
            async_scheduling=async_scheduling,
        ),
        CacheConfig(block_size=16, num_gpu_blocks=num_gpu_blocks, enable_prefix_caching=True),
    )
    requests = [
        Request(f"chat{i}", list(range(10 * i, 10 * i + 12)), SamplingParams(max_tokens=8, ignore_eos=True))
        for i in range(3)
    ]
    requests.append(Request("long", list(range(1000, 1200)), SamplingParams(max_tokens=3, ignore_eos=True)))
    rows = run_step_table(scheduler, requests, arrival_steps={"long": 2})
    return format_step_table(rows, [r.request_id for r in requests])


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m minivllm steps", description=__doc__.splitlines()[0])
    parser.add_argument("--max-num-batched-tokens", type=int, default=64)
    parser.add_argument("--long-prefill-token-threshold", type=int, default=0)
    parser.add_argument("--enable-chunked-prefill", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--num-gpu-blocks", type=int, default=24)
    parser.add_argument("--async-scheduling", action="store_true", help="two steps in flight (vLLM 0.10)")
    args = parser.parse_args(argv)
    try:
        print(
            demo(
                args.max_num_batched_tokens,
                args.long_prefill_token_threshold,
                args.enable_chunked_prefill,
                args.num_gpu_blocks,
                args.async_scheduling,
            )
        )
    except ValueError as e:
        parser.error(str(e))
