"""The host-overhead benchmark on a tiny model: a row per batch size, parts that are >= 0 and add up to
the step, the JSON it writes; and the timer's nesting (a call inside another counts only once)."""

from __future__ import annotations

import json
import time

from minivllm.lab.benchmarks.host_overhead import PARTS, StepTimer, _overlap, main


def test_rows_parts_and_json(tiny_qwen2, capsys, tmp_path):
    out = tmp_path / "host.json"
    # 3 x 40 prompt tokens under the 4,096-token budget fill in one step; 20 x 40 too.
    args = ["--model", tiny_qwen2, "--context", "40", "--steps", "7", "--batches", "1", "3", "20"]
    # This thread's CPU time, one torch thread: what other processes on a busy CI machine do barely moves it.
    main([*args, "--threads", "1", "--clock", "thread", "--output-json", str(out)])
    printed = [line.split() for line in capsys.readouterr().out.splitlines()[3:]]
    assert [r[0] for r in printed] == ["1", "3", "20"]
    rows = json.loads(out.read_text())["rows"]
    assert [r["batch"] for r in rows] == [1, 3, 20]
    for r in rows:
        parts = [r[f"{p}_ms"] for p in PARTS]
        assert all(v >= 0 for v in parts), r
        assert r["model_ms"] > 0 and r["schedule_ms"] > 0 and r["sampling_ms"] > 0, r
        # Medians of the parts need not sum to the median step exactly; they must come close.
        assert abs(sum(parts) - r["total_ms"]) <= 0.25 * r["total_ms"], r
        assert 0 <= r["host_pct"] <= 100
    assert [f"{r['total_ms']:.3f}" for r in rows] == [p[1] for p in printed]


class _Work:
    def outer(self, inner_calls: int) -> None:
        time.sleep(0.002)
        for _ in range(inner_calls):
            self.inner()

    def inner(self) -> None:
        time.sleep(0.003)


def test_timer_counts_nested_calls_once():
    work, timer = _Work(), StepTimer()
    timer.wrap(work, "outer", "update")
    timer.wrap(work, "inner", "model")
    t0 = time.perf_counter_ns()
    work.outer(2)
    wall = time.perf_counter_ns() - t0
    assert timer.times["model"] >= 6_000_000  # two inner calls
    assert timer.times["update"] >= 2_000_000  # outer's own sleep, without the inner calls
    assert timer.times["update"] + timer.times["model"] <= wall
    assert timer.times["schedule"] == 0


def test_async_scheduling_rows_and_json(tiny_qwen2, capsys, tmp_path):
    out = tmp_path / "overlap.json"
    args = ["--model", tiny_qwen2, "--context", "40", "--steps", "5", "--batches", "1", "3", "--rounds", "1"]
    main([*args, "--threads", "1", "--async-scheduling", "--output-json", str(out)])
    printed = capsys.readouterr().out.splitlines()
    assert "load average" in printed[0]
    data = json.loads(out.read_text())
    assert len(data["load_average"]) == 3
    rows = data["rows"]
    assert [(r["batch"], r["round"]) for r in rows] == [(1, 0), (3, 0)]
    for r in rows:
        assert r["sync_ms"] > 0 and r["async_ms"] > 0 and r["async_host_ms"] > 0, r
        assert 0.0 <= r["overlap_pct"] <= 100.0, r


def test_overlap_counts_only_the_covered_part_of_each_host_interval():
    busy = [(1.0, 2.0), (3.0, 4.0)]
    assert _overlap([(0.5, 1.5)], busy) == 0.5
    assert _overlap([(1.5, 3.5)], busy) == 1.0  # half of each busy interval
    assert _overlap([(2.0, 3.0), (4.5, 5.0)], busy) == 0.0
