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
SECTIONS = ["backends", "engine_vs_hf", "instructor", "throughput", "roofline", "host_overhead"]


@pytest.mark.slow  # ~1 min: six subprocesses, a notebook kernel among them
@pytest.mark.skipif(bool(os.environ.get(NESTED)), reason="inside a GPU check already")
def test_dry_run_writes_one_report_with_every_section(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path)}
    res = subprocess.run(["bash", "tests/gpu/run.sh", "--dry-run"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    report = json.loads((tmp_path / "gpu_report.json").read_text())
    assert report["mode"] == "dry-run" and report["ok"]
    assert [s["name"] for s in report["sections"]] == SECTIONS
    assert all(s["status"] == "ok" for s in report["sections"]), report["sections"]
    assert report["budget_s"] <= 8 * 60  # the limit for the real run, model loads included
    assert f"time budget on an H200: {report['budget_s'] / 60:.1f} min" in res.stdout
    by_name = {s["name"]: s for s in report["sections"]}
    assert by_name["instructor"]["summary"].endswith(", 0 errors")
    assert all(r["identical_to_minivllm"] == 3 for r in by_name["throughput"]["data"]["rows"])
    assert [r["batch"] for r in by_name["roofline"]["data"]["rows"]] == [1, 16, 64]
    assert [r["batch"] for r in by_name["host_overhead"]["data"]["rows"]] == [1, 16, 64]
    summary = (tmp_path / "gpu_summary.txt").read_text().splitlines()
    assert summary[0].startswith("GPU check (dry-run)") and [line.split()[0] for line in summary[1:]] == SECTIONS


def test_a_failing_or_overlong_section_is_reported(tmp_path):
    failing = Section("fails", "exits 3", 10, [sys.executable, "-c", "print('boom'); raise SystemExit(3)"])
    run_section(failing, tmp_path, gpu=True)
    assert (failing.status, failing.returncode, failing.summary) == ("failed", 3, "boom")
    slow = Section("slow", "sleeps", 0.2, [sys.executable, "-c", "import time; time.sleep(30)"])
    run_section(slow, tmp_path, gpu=True)
    assert slow.status == "timeout" and "1.5x its budget" in slow.summary and slow.seconds < 10
