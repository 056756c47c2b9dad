"""Rebuild the chapter notebooks from their jupytext ``.py`` twins and execute them in place.

``python chapters/build.py [NOTEBOOK_OR_PY ...]`` (default: every chapter). For each pair it writes
the ``.ipynb`` from the ``.py`` (py:percent), runs it top to bottom in its own folder with a fresh
kernel, and saves it with outputs and execution counts (nbval compares them) but without widget
state (a FigureWidget's saved state is megabytes of JavaScript).

Without saved state, a widget output opened before its cell has run would read "Error displaying
widget: model not found" (JupyterLab renders the richest type, the widget view, whose model lives only
in a running kernel). So every saved widget view is replaced by a short note (:func:`widget_notes`):
text/html and text/plain saying to run the cells above and this one. Saving the widget state instead
would cost megabytes per notebook and still draw no figure without a kernel; a static picture of each
figure would double the notebook and go stale. Running the cell replaces the note with the live widget;
nbval ignores these cells' outputs (``# NBVAL_IGNORE_OUTPUT``), so the note changes no comparison.
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
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
NOTE = "Interactive widget: run the cells above and this one (Run All, or Shift+Enter) to start it here."


def widget_notes(nb: nbformat.NotebookNode) -> int:
    """Replace each saved widget view in ``nb`` by :data:`NOTE` (see the module docstring). Returns how many."""
    n = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if WIDGET_VIEW in out.get("data", {}):
                html = f'<div style="border-left: 4px solid #0072B2; padding: 2px 8px"><i>{NOTE}</i></div>'
                out["data"] = {"text/html": html, "text/plain": NOTE}
                n += 1
    return n


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
    widget_notes(nb)
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
