"""chapters/time_notebooks.py: which notebooks a name picks, the table's flags, a real run that writes nothing back."""

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


def test_table_flags_the_slow_ones():
    rows = [
        tn.Timing("a.ipynb", 12.0, 11.0, 0.1, 0.9),
        tn.Timing("b.ipynb", 50.0, 48.0, 0.9, 1.9, "CellExecutionError: x"),
    ]
    out = tn.table(rows, 45.0).splitlines()
    assert "OVER" not in out[1] and "OVER" in out[2] and "FAILED: CellExecutionError: x" in out[2]
    assert out[-1].split()[:2] == ["total", "62.0"] and "(1 of 2 over 45 s)" in out[-1]


def test_a_run_times_a_copy_and_leaves_the_notebook_alone(monkeypatch, capsys):
    path = CHAPTERS / "ch03_unified_token_scheduling" / "ch03_solutions.ipynb"
    before = path.read_bytes()
    monkeypatch.setattr(tn, "warm_model_cache", lambda: None)  # this notebook does not load the model
    assert tn.main([str(path), "--budget", "0.001"]) == 0  # exit 0 even when a notebook is over budget
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("ch03_unified_token_scheduling/ch03_solutions"))
    assert "OVER" in row and "FAILED" not in row and "Load average before the first notebook" in out
    assert path.read_bytes() == before
