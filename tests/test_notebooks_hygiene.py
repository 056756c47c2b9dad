"""The chapter notebooks stay reviewable and checkable by nbval (outputs are the expected values).

Each notebook has a jupytext py:percent twin with the same cells; it was executed top to bottom
(every code cell has an execution count, counts increase); no widget state is saved; it is small;
its headings carry the book's section numbers and Chinese titles; it ends with a Summary and
Exercises.
"""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import nbformat
import pytest

CHAPTERS = Path(__file__).resolve().parent.parent / "chapters"
NOTEBOOKS = sorted(CHAPTERS.glob("ch*/*.ipynb"))
CJK = re.compile(r"[\u4e00-\u9fff]")


def test_there_are_notebooks():
    assert NOTEBOOKS, "no chapter notebooks found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_paired_with_an_identical_py_percent_file(path):
    py = path.with_suffix(".py")
    assert py.exists(), f"{py.name} is missing: run python chapters/build.py {path}"
    nb = nbformat.read(path, as_version=4)
    text = jupytext.writes(nb, fmt="py:percent")
    assert py.read_text() == text, f"{py.name} and {path.name} differ: run python chapters/build.py {py}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_executed_small_and_without_widget_state(path):
    nb = nbformat.read(path, as_version=4)
    counts = [c.execution_count for c in nb.cells if c.cell_type == "code"]
    assert counts and None not in counts, "every code cell must have been executed"
    assert counts == sorted(counts), "cells were executed out of order"
    assert "widgets" not in nb.metadata, "saved widget state (megabytes of JS) must be stripped"
    assert path.stat().st_size < 1_500_000


@pytest.mark.parametrize(
    "path", [p for p in NOTEBOOKS if "solutions" not in p.name and "instructor" not in p.name], ids=lambda p: p.name
)
def test_book_headings_summary_and_exercises(path):
    nb = nbformat.read(path, as_version=4)
    headings = [
        line for c in nb.cells if c.cell_type == "markdown" for line in c.source.splitlines() if line.startswith("#")
    ]
    numbered = [h for h in headings if re.match(r"#+ \d+\.\d+", h)]
    assert numbered and all(" · " in h and CJK.search(h) for h in numbered), numbered
    assert any("Summary" in h for h in headings) and any("Exercises" in h for h in headings)
