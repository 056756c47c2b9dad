"""The CPU cost model's held-out check on a tiny model: real engine vs the simulator with two fits, its rows,
errors and JSON (no timing threshold: the numbers are the benchmark's)."""

from __future__ import annotations

import json
import math

import pytest

from minivllm.lab.benchmarks import cpu_sim_check
from minivllm.lab.sim.cost_model import CostModel
from minivllm.lab.sim.local_fit import local_fit_command


def test_cpu_clock_counts_cpu_time_and_jumps_idle_gaps():
    clock = cpu_sim_check.CpuClock()
    t0 = clock.now()
    clock.wait_until(t0 + 100.0)  # idle until an arrival 100 s away: a jump, no sleep
    assert 100.0 <= clock.now() - t0 < 101.0
    clock.wait_until(0.0)  # in the past: nothing
    assert clock.now() >= t0 + 100.0


@pytest.mark.slow
def test_real_vs_stored_vs_local_rows(tiny_qwen2, tmp_path, capsys):
    local = tmp_path / "local.json"
    stored = CostModel.from_preset("cpu_smollm2")
    CostModel(**{**stored.to_dict(), "overhead_s": stored.overhead_s / 2, "meta": {}}).save(local)
    out = tmp_path / "check.json"
    argv = ["--model", tiny_qwen2, "--local-fit", str(local), "--num-prompts", "3", "--request-rate", "4"]
    result = cpu_sim_check.main([*argv, "--max-model-len", "256", "--output-json", str(out)])
    assert json.loads(out.read_text())["rows"] == result["rows"]
    rows = {r["metric"]: r for r in result["rows"]}
    assert list(rows) == list(cpu_sim_check.METRICS)
    assert {k for k, r in rows.items() if r["checked"]} == {"ttft_p50", "ttft_p90", "itl_p50", "itl_p99", "e2e_p50"}
    for r in rows.values():
        assert r["real"] > 0 and r["stored"] > 0 and r["local"] > 0
        assert r["local_error_pct"] == pytest.approx((r["local"] - r["real"]) / r["real"] * 100)
    # the local fit's steps cost less than the stored one's: every latency comes out lower
    assert rows["e2e_p50"]["local"] < rows["e2e_p50"]["stored"]
    assert result["clock"] == "cpu" and result["fingerprint_here"]["torch_threads"] == 1
    assert result["workload"]["kind"] == "azure_conv" and result["workload"]["num_requests"] == 3
    assert result["engine"]["num_gpu_blocks"] > 0 and math.isfinite(result["steps_wall_over_cpu"])
    assert result["host_cpu_s_per_step"] >= 0
    assert set(result["step_errors_pct"]) == {"stored", "local"}
    assert 0 < len(result["real_steps"]) <= result["real_num_steps"] and all(d > 0 for _, d in result["real_steps"])
    text = capsys.readouterr().out
    assert "ttft_p90 ms" in text and "local err %" in text and local_fit_command() in text


def test_refuses_without_a_local_fit(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIVLLM_CACHE", str(tmp_path))
    with pytest.raises(SystemExit, match="python -m minivllm.lab.sim.calibrate --local"):
        cpu_sim_check.main(["--model", "unused", "--num-prompts", "2"])


def test_cpu_clock_needs_one_thread():
    with pytest.raises(SystemExit):
        cpu_sim_check.main(["--threads", "2", "--clock", "cpu"])
