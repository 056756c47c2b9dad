"""Time every chapter notebook: Run All with a fresh kernel, on a temporary copy, and judge its kernel CPU time.

``python chapters/time_notebooks.py [NAME ...]`` (default: every ``.ipynb`` under ``chapters/ch*/``;
a NAME is a path or a part of a notebook's name, e.g. ``11_7`` or ``solutions``). Each notebook is
copied with its chapter folder into a temporary directory and executed there top to bottom
(nbclient, a new ``python3`` kernel each); the committed notebooks are never written. The table
gives each notebook's kernel CPU time (user + system of the kernel process: what the notebook
costs, whatever else the machine is doing) and its wall time (which grows when other work shares the
CPUs), with the 1-minute load average before and after it (``os.getloadavg``; the average decays over a
minute, so "before" still holds part of the previous notebook's own load).

The verdict is on kernel CPU time: a notebook over the budget (45 s, README "The chapters") is
flagged OVER, one that fails is reported with its error and timed up to it, and the command exits
1 when any notebook is over budget or failed (0 otherwise), so CI and a Makefile can use it.
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


def over_budget(r: Timing, budget: float) -> bool:
    """The verdict: the kernel's CPU time, not the wall time (which a busy machine stretches)."""
    return r.cpu_seconds > budget


def table(rows: list[Timing], budget: float) -> str:
    width = max(len(r.notebook) for r in rows)
    head = f"{'notebook':<{width}}  {'kernel CPU s':>12}  {'wall s':>7}  {'load before':>11}  {'load after':>10}"
    lines = [f"{head}  CPU over {budget:.0f} s"]
    for r in rows:
        flag = "OVER" if over_budget(r, budget) else ""
        lines.append(
            f"{r.notebook:<{width}}  {r.cpu_seconds:>12.1f}  {r.seconds:>7.1f}  {r.load_before:>11.2f}  "
            f"{r.load_after:>10.2f}  {flag}" + (f"  FAILED: {r.error}" if r.error else "")
        )
    cpu, wall = sum(r.cpu_seconds for r in rows), sum(r.seconds for r in rows)
    over = [r for r in rows if over_budget(r, budget)]
    failed = [r for r in rows if r.error]
    lines.append(
        f"{'total':<{width}}  {cpu:>12.1f}  {wall:>7.1f}  "
        f"({len(over)} of {len(rows)} over {budget:.0f} s of kernel CPU, {len(failed)} failed)"
    )
    return "\n".join(lines)


def verdict(rows: list[Timing], budget: float) -> int:
    """The exit status: 1 when any notebook is over the CPU budget or failed, else 0."""
    return int(any(over_budget(r, budget) or r.error for r in rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook paths or parts of their names (default: all)")
    parser.add_argument("--budget", type=float, default=BUDGET_S, help="kernel CPU seconds a notebook may use (45)")
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
        print(
            f"  {r.notebook}: {r.cpu_seconds:.1f} s kernel CPU, {r.seconds:.1f} s wall "
            f"(load {r.load_before:.2f} -> {r.load_after:.2f})",
            flush=True,
        )
    print()
    print(table(rows, args.budget))
    others = rows[0].load_before  # before the first notebook: the machine's own load, not ours
    print(f"\nLoad average before the first notebook: {others:.2f} on {cores} cores", end="")
    print(
        ": other work shared the CPUs, so the wall times are high (CPU times much less so)."
        if others > 0.5
        else " (quiet)."
    )
    return verdict(rows, args.budget)


if __name__ == "__main__":
    sys.exit(main())
