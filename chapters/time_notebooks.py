"""Time every chapter notebook: Run All with a fresh kernel, on a temporary copy.

``python chapters/time_notebooks.py [NAME ...]`` (default: every ``.ipynb`` under ``chapters/ch*/``;
a NAME is a path or a part of a notebook's name, e.g. ``11_7`` or ``solutions``). Each notebook is
copied with its chapter folder into a temporary directory and executed there top to bottom
(nbclient, a new ``python3`` kernel each); the committed notebooks are never written. The table
gives each notebook's wall time, its kernel's CPU time, the 1-minute load average before and after
it (``os.getloadavg``; the average decays over a minute, so "before" still holds part of the previous
notebook's own load), so a time measured on a busy machine says so, and flags those over the budget (45 s on 2 quiet
cores, README "The chapters"). A notebook that fails is reported with its error and timed up to it.
Always exits 0: it measures, it does not judge (CI runs the notebooks with nbval).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent
BUDGET_S = 45.0


@dataclass
class Timing:
    notebook: str
    seconds: float
    cpu_seconds: float  # the kernel's user + system time (it is this process's child, reaped at the end)
    load_before: float
    load_after: float
    error: str = ""


def notebooks(names: list[str]) -> list[Path]:
    every = sorted(ROOT.glob("ch*/*.ipynb"))
    if not names:
        return every
    chosen: list[Path] = []
    for name in names:
        path = Path(name)
        if path.suffix in (".ipynb", ".py") and path.with_suffix(".ipynb").exists():
            found = [path.with_suffix(".ipynb").resolve()]
        elif path.suffix in (".ipynb", ".py"):
            found = [p for p in every if p.stem == path.stem]
        else:
            found = [p for p in every if name in p.stem]
        if not found:
            raise SystemExit(f"no chapter notebook matches {name!r}")
        chosen += [p for p in found if p not in chosen]
    return chosen


def warm_model_cache() -> None:
    """Convert SmolLM2's weights once, before timing (the first load otherwise adds ~25 s to one notebook)."""
    code = "from minivllm.model.loader import smollm2_folder; smollm2_folder()"
    subprocess.run([sys.executable, "-c", code], check=True)


def time_one(path: Path, timeout: int) -> Timing:
    with tempfile.TemporaryDirectory(prefix="minivllm-nb-") as tmp:
        folder = Path(tmp) / path.parent.name
        shutil.copytree(path.parent, folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        nb = nbformat.read(folder / path.name, as_version=4)
        where = {"metadata": {"path": str(folder)}}  # the kernel starts in the copy's folder
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources=where)
        load_before, error = os.getloadavg()[0], ""
        cpu = _children_cpu()
        start = time.perf_counter()
        try:
            client.execute()
        except Exception as e:  # noqa: BLE001 (report it in the table and go on with the next notebook)
            error = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"[:200]
        seconds = time.perf_counter() - start
    cpu = _children_cpu() - cpu
    return Timing(str(path.relative_to(ROOT)), seconds, cpu, load_before, os.getloadavg()[0], error)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def table(rows: list[Timing], budget: float) -> str:
    width = max(len(r.notebook) for r in rows)
    head = f"{'notebook':<{width}}  {'wall s':>7}  {'kernel CPU s':>12}  {'load before':>11}  {'load after':>10}"
    lines = [f"{head}  over {budget:.0f} s"]
    for r in rows:
        flag = "OVER" if r.seconds > budget else ""
        lines.append(
            f"{r.notebook:<{width}}  {r.seconds:>7.1f}  {r.cpu_seconds:>12.1f}  {r.load_before:>11.2f}  "
            f"{r.load_after:>10.2f}  {flag}"
            + (f"  FAILED: {r.error}" if r.error else "")
        )
    total = sum(r.seconds for r in rows)
    over = [r for r in rows if r.seconds > budget]
    lines.append(f"{'total':<{width}}  {total:>7.1f}  ({len(over)} of {len(rows)} over {budget:.0f} s)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook paths or parts of their names (default: all)")
    parser.add_argument("--budget", type=float, default=BUDGET_S, help="seconds a notebook may take (45)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a cell may take before it is stopped")
    args = parser.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # as chapters/build.py and the nbval run do
    os.environ.setdefault("TQDM_DISABLE", "1")
    chosen = notebooks(args.names)
    warm_model_cache()
    cores = os.cpu_count()
    print(f"{len(chosen)} notebooks, {cores} CPU cores, load average now {os.getloadavg()[0]:.2f}", flush=True)
    rows = []
    for path in chosen:
        rows.append(time_one(path, args.timeout))
        r = rows[-1]
        print(f"  {r.notebook}: {r.seconds:.1f} s (load {r.load_before:.2f} -> {r.load_after:.2f})", flush=True)
    print()
    print(table(rows, args.budget))
    others = rows[0].load_before  # before the first notebook: the machine's own load, not ours
    print(f"\nLoad average before the first notebook: {others:.2f} on {cores} cores", end="")
    print(": other work shared the CPUs, so these times are high." if others > 0.5 else " (quiet).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
