"""Rebuild the chapter notebooks from their jupytext ``.py`` twins and execute them in place.

``python chapters/build.py [NOTEBOOK_OR_PY ...]`` (default: every chapter). For each pair it writes
the ``.ipynb`` from the ``.py`` (py:percent), runs it top to bottom in its own folder with a fresh
kernel, and saves it with outputs and execution counts (nbval compares them) but without widget
state (a FigureWidget's saved state is megabytes of JavaScript).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent


def pairs(args: list[str]) -> list[Path]:
    if not args:
        return sorted(p for p in ROOT.glob("ch*/*.py"))
    return [Path(a).with_suffix(".py").resolve() for a in args]


def build(py: Path) -> float:
    nb = jupytext.read(py)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata.pop("widgets", None)
    start = time.perf_counter()
    env = {"TOKENIZERS_PARALLELISM": "false", "TQDM_DISABLE": "1"}
    os.environ.update(env)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(py.parent)}}).execute()
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    target = py.with_suffix(".ipynb")
    if target.exists():  # keep the previous cell ids, so a rebuild only changes what really changed
        old = nbformat.read(target, as_version=4)
        for cell, old_cell in zip(nb.cells, old.cells):
            cell.id = old_cell.get("id", cell.id)
    nbformat.write(nb, target)
    jupytext.write(nb, py, fmt="py:percent")  # keep the pair byte-identical to what jupytext writes
    return time.perf_counter() - start


if __name__ == "__main__":
    for py in pairs(sys.argv[1:]):
        print(f"{py.relative_to(ROOT)}: {build(py):.1f} s", flush=True)
