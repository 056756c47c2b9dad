"""The ch. 11 student notebooks tell one story each (issue: "notebooks that teach").

Prose is counted as the words of the markdown cells (the glossary cell included); each student notebook
stays under its limit, carries the shared glossary (chapters/glossary.md) verbatim in a markdown cell,
and says nothing about the project's own history (issue numbers, "was N%" changelog text).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

CHAPTERS = Path(__file__).resolve().parent.parent / "chapters"
GLOSSARY = (CHAPTERS / "glossary.md").read_text().strip()
STUDENT = sorted(
    p
    for p in CHAPTERS.glob("ch11_chunked_prefill/11_*.ipynb")
    if "solutions" not in p.name and "instructor" not in p.name
)
LIMITS = {"11_7": 1800, "11_9": 1800}  # words of prose; every other student notebook: 2000
HISTORY = re.compile(r"\bissue\s*#?\d+|\bwas \d+(\.\d+)?\s*%", re.IGNORECASE)


def prose_words(path: Path) -> int:
    """Words of the notebook's markdown cells, markup characters removed."""
    nb = nbformat.read(path, as_version=4)
    text = " ".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return len(re.sub(r"[`*#|>\[\]()]", " ", text).split())


def test_there_are_student_notebooks():
    assert len(STUDENT) >= 6, STUDENT


@pytest.mark.parametrize("path", STUDENT, ids=lambda p: p.name)
def test_prose_within_limit(path):
    limit = next((v for k, v in LIMITS.items() if path.name.startswith(k)), 2000)
    assert prose_words(path) <= limit, f"{path.name}: {prose_words(path)} words of prose, limit {limit}"


@pytest.mark.parametrize("path", STUDENT, ids=lambda p: p.name)
def test_shared_glossary_cell(path):
    nb = nbformat.read(path, as_version=4)
    assert any(c.cell_type == "markdown" and c.source.strip() == GLOSSARY for c in nb.cells), (
        f"{path.name} lacks the glossary cell: paste chapters/glossary.md verbatim as one markdown cell"
    )


@pytest.mark.parametrize("path", sorted(CHAPTERS.glob("ch*/*.ipynb")), ids=lambda p: p.name)
def test_no_project_history(path):
    nb = nbformat.read(path, as_version=4)
    hits = [m.group(0) for c in nb.cells for m in HISTORY.finditer(c.source)]
    assert not hits, f"{path.name} talks about the project's history: {hits}"
