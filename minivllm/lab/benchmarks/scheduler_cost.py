"""How much CPU time the scheduler itself costs per step (§11.3).

``python -m minivllm.lab.benchmarks.scheduler_cost`` builds a scheduler with N
decoding requests (N = 8, 64, 256, 1024), then times ``schedule()`` plus
``update_from_output()`` per step; the fake runner's time is not counted.
Prints microseconds per step and per request. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import time

from minivllm.config import CacheConfig, SchedulerConfig
from minivllm.core.scheduler import Scheduler
from minivllm.request import Request
from minivllm.sampling_params import SamplingParams
from minivllm.worker.fake_runner import FakeModelRunner


def measure(num_running: int, steps: int, prompt_len: int = 128, block_size: int = 16) -> tuple[float, float]:
    """Median (schedule, update) microseconds per step with ``num_running`` decoding requests."""
    max_len = prompt_len + steps + 16
    blocks = num_running * (max_len // block_size + 2) + 1
    s = Scheduler(
        SchedulerConfig(
            max_num_batched_tokens=max(num_running * prompt_len, 2048), max_num_seqs=num_running, max_model_len=max_len
        ),
        CacheConfig(block_size=block_size, num_gpu_blocks=blocks, enable_prefix_caching=True),
    )
    runner = FakeModelRunner()
    for i in range(num_running):
        s.add_request(
            Request(
                f"r{i}", [i] * 8 + list(range(prompt_len - 8)), SamplingParams(max_tokens=steps + 8, ignore_eos=True)
            )
        )
    out = s.schedule()  # every prompt in one step
    s.update_from_output(out, runner.execute_model(out))
    sched_us, update_us = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        out = s.schedule()
        t1 = time.perf_counter()
        res = runner.execute_model(out)
        t2 = time.perf_counter()
        s.update_from_output(out, res)
        t3 = time.perf_counter()
        assert len(out.num_scheduled_tokens) == num_running
        sched_us.append((t1 - t0) * 1e6)
        update_us.append((t3 - t2) * 1e6)
    sched_us.sort()
    update_us.sort()
    return sched_us[len(sched_us) // 2], update_us[len(update_us) // 2]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 64, 256, 1024])
    args = parser.parse_args(argv)
    print(f"{'running':>8} {'schedule us':>12} {'update us':>10} {'total us':>9} {'us/request':>11}")
    for n in args.sizes:
        sched, update = measure(n, args.steps)
        print(f"{n:>8} {sched:>12.0f} {update:>10.0f} {sched + update:>9.0f} {(sched + update) / n:>11.2f}")


if __name__ == "__main__":
    main()
