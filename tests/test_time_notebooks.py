"""chapters/time_notebooks.py: which notebooks a name picks, the table's flags (judged on kernel CPU time, not wall),
the exit status (1 when a notebook is over budget or failed), a real run that writes nothing back."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

CHAPTERS = Path(__file__).resolve().parents[1] / "chapters"
spec = importlib.util.spec_from_file_location("time_notebooks", CHAPTERS / "time_notebooks.py")
tn = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = tn  # dataclasses look their module up while the class is built
spec.loader.exec_module(tn)


def test_names_pick_notebooks():
    every = tn.notebooks([])
    assert every == sorted(CHAPTERS.glob("ch*/*.ipynb")) and len(every) > 10
    assert [p.name for p in tn.notebooks(["11_7_chunk_size.ipynb"])] == ["11_7_chunk_size.ipynb"]
    assert {p.name for p in tn.notebooks(["11_7"])} == {"11_7_chunk_size.ipynb", "11_7_chunk_size_solutions.ipynb"}
    path = CHAPTERS / "ch03_unified_token_scheduling" / "ch03_solutions.py"
    assert tn.notebooks([str(path), "ch03_sol"]) == [path.with_suffix(".ipynb")]  # no duplicates


def test_table_judges_kernel_cpu_not_wall():
    rows = [
        tn.Timing("a.ipynb", 12.0, 11.0, 0.1, 0.9),
        tn.Timing("b.ipynb", 50.0, 48.0, 0.9, 1.9, "CellExecutionError: x"),
        tn.Timing("busy.ipynb", 90.0, 30.0, 3.5, 3.9),  # a loaded machine: long wall, CPU within budget
        tn.Timing("heavy.ipynb", 40.0, 46.0, 0.1, 1.0),  # two busy threads: CPU over budget, wall under
    ]
    out = tn.table(rows, 45.0).splitlines()
    assert out[0].split()[1:4] == ["kernel", "CPU", "s"] and "wall s" in out[0]  # both reported, CPU first
    assert out[1].split()[1:3] == ["11.0", "12.0"]
    assert "OVER" not in out[1] and "OVER" in out[2] and "FAILED: CellExecutionError: x" in out[2]
    assert "OVER" not in out[3] and "OVER" in out[4]
    assert (
        out[-1].split()[:3] == ["total", "135.0", "192.0"] and "(2 of 4 over 45 s of kernel CPU, 1 failed)" in out[-1]
    )


def test_verdict_fails_over_budget_or_failed():
    ok, slow = tn.Timing("a.ipynb", 99.0, 44.0, 0.0, 0.0), tn.Timing("b.ipynb", 10.0, 45.5, 0.0, 0.0)
    broken = tn.Timing("c.ipynb", 1.0, 1.0, 0.0, 0.0, "CellExecutionError: x")
    assert tn.verdict([ok], 45.0) == 0
    assert tn.verdict([ok, slow], 45.0) == 1 and tn.verdict([ok, broken], 45.0) == 1


def test_a_run_times_a_copy_and_leaves_the_notebook_alone(monkeypatch, capsys):
    path = CHAPTERS / "ch03_unified_token_scheduling" / "ch03_solutions.ipynb"
    before = path.read_bytes()
    monkeypatch.setattr(tn, "warm_model_cache", lambda: None)  # this notebook does not load the model
    assert tn.main([str(path), "--budget", "0.001"]) == 1  # over budget: exit 1
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("ch03_unified_token_scheduling/ch03_solutions"))
    assert "OVER" in row and "FAILED" not in row and "Load average before the first notebook" in out
    cpu, wall = map(float, row.split()[1:3])
    assert 0 < cpu and 0 < wall  # the kernel's own CPU time was counted
    assert path.read_bytes() == before
    assert tn.main([str(path)]) == 0  # within 45 s of kernel CPU: exit 0
    assert path.read_bytes() == before
