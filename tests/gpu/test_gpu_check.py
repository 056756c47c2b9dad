"""The one-command GPU check (tests/gpu/run.sh -> gpu_check.py) dry-runs here: every section's command
runs on CPU-sized inputs and lands in one JSON report and a text summary, within the stated time budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gpu.gpu_check import NESTED, Section, run_section

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = ["preflight", "engine_vs_hf", "cuda_graphs", "instructor", "backends", "throughput"]


@pytest.mark.slow  # ~2 min: six subprocesses
@pytest.mark.skipif(bool(os.environ.get(NESTED)), reason="inside a GPU check already")
def test_dry_run_writes_one_report_with_every_section(tmp_path):
    env = {
        **os.environ,
        "OUT": str(tmp_path / "out"),
        "MINIVLLM_GPU_WORK": str(tmp_path / "work"),
        "PYTHON": sys.executable,
    }
    res = subprocess.run(["bash", "tests/gpu/run.sh", "--dry-run"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["gpu_check.log", "gpu_report.json", "gpu_summary.txt"]
    report = json.loads((out / "gpu_report.json").read_text())
    assert report["mode"] == "dry-run" and report["ok"]
    assert [s["name"] for s in report["sections"]] == SECTIONS
    assert all(s["status"] == "ok" for s in report["sections"]), report["sections"]
    assert report["budget_s"] <= 270 and report["total_budget_s"] == 300  # start-up included in the 300 s
    budget = f"time budget 300 s: start-up {report['startup_s']:.0f} s + sections {report['budget_s']:.0f} s"
    assert budget in res.stdout
    by_name = {s["name"]: s for s in report["sections"]}
    assert by_name["preflight"]["data"]["missing"] == {}
    assert by_name["instructor"]["summary"].startswith("ran to the end")
    rows = by_name["cuda_graphs"]["data"]["rows"]
    assert [r["batch"] for r in rows] == [1, 8, 64] and all(r["identical"] == r["batch"] for r in rows)
    assert all(not r["captured"] and "CUDA device" in r["eager_reason"] for r in rows)  # a CPU: eager, and why
    assert all(r["identical_to_minivllm"] == 3 for r in by_name["throughput"]["data"]["rows"])
    summary = (out / "gpu_summary.txt").read_text().splitlines()
    assert summary[0].startswith("GPU check (dry-run)") and [line.split()[0] for line in summary[1:]] == SECTIONS
    assert "===== throughput: ok" in (out / "gpu_check.log").read_text()


def test_a_failing_or_overlong_section_is_reported(tmp_path):
    failing = Section("fails", "exits 3", 10, [sys.executable, "-c", "print('boom'); raise SystemExit(3)"])
    run_section(failing, tmp_path, gpu=True)
    assert (failing.status, failing.returncode, failing.summary) == ("failed", 3, "boom")
    slow = Section("slow", "sleeps", 0.2, [sys.executable, "-c", "import time; time.sleep(30)"])
    run_section(slow, tmp_path, gpu=True)
    assert slow.status == "timeout" and "1.5x its budget" in slow.summary and slow.seconds < 10


def test_the_300_s_deadline_cuts_a_section_and_skips_the_next(tmp_path):
    import time

    cut = Section("cut", "sleeps past the deadline", 100, [sys.executable, "-c", "import time; time.sleep(30)"])
    run_section(cut, tmp_path, gpu=True, deadline=time.time() + 3)
    assert cut.status == "timeout" and "the check's 300 s" in cut.summary and cut.seconds < 10
    late = Section("late", "never starts", 10, [sys.executable, "-c", "pass"])
    run_section(late, tmp_path, gpu=True, deadline=time.time())
    assert (late.status, late.summary) == ("not run", "no time left in the check's 300 s")
