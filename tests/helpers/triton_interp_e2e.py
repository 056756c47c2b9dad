"""Child process of tests/engine/test_triton_interpreter_e2e.py: whole-engine runs with the Triton kernel
under the interpreter (``TRITON_INTERPRET=1`` set before anything imports triton), results to JSON.

``python -m tests.helpers.triton_interp_e2e SPEC.json OUT.json``. SPEC: ``{"new_tokens": n, "cases":
[{"id", "folder", "prompts", "engine": {run_engine kwargs}}]}``. OUT: per case id the greedy tokens,
each request's ``num_cached_tokens``, the trace's counts (:class:`TraceCounts`) and how far each
attention call's output was from the torch backend's (:class:`CrossCheckedBackend`), or the traceback
of the exception that stopped it (the other cases still run). The pytest side compares with HF.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
import traceback
from typing import Any


def _interpreted_kernels_only() -> str | None:
    """Why the run did not use the interpreted kernels (and only them), or None."""
    from minivllm.attention import triton_backend

    if set(triton_backend._KERNELS) != {True}:
        return f"kernels were JIT-wrapped for modes {sorted(triton_backend._KERNELS)} (True = interpreter)"
    kinds = {type(k).__name__ for k in triton_backend._KERNELS[True]}
    return None if kinds == {"InterpretedFunction"} else f"kernels are {kinds}, not InterpretedFunction"


def run_case(case: dict[str, Any], loaded: Any, new_tokens: int) -> dict[str, Any]:
    from minivllm.attention.triton_backend import TritonAttentionBackend
    from tests.helpers.cross_checked_backend import CrossCheckedBackend
    from tests.helpers.engine_runs import TraceCounts, run_engine

    start = time.perf_counter()
    # attention_backend="triton": the selector must accept it (interpreter on); the runner's backend is
    # then a fresh Triton backend wrapped to compare each call with the torch backend.
    backend = CrossCheckedBackend(TritonAttentionBackend())
    tokens, trace = run_engine(
        loaded, case["prompts"], new_tokens, attention_backend="triton", attn_backend=backend, **case["engine"]
    )
    if (why := _interpreted_kernels_only()) is not None:
        raise AssertionError(why)
    return {
        "max_abs_diff_vs_torch": backend.max_abs_diff,
        "cache_mismatches": backend.cache_mismatches,
        "attention_calls": backend.num_calls,
        "tokens": tokens,
        "num_cached_tokens": {r: rec.num_cached_tokens for r, rec in trace.requests.items()},
        "counts": dataclasses.asdict(TraceCounts.of(trace)),
        "step_tokens": [s.num_scheduled_tokens for s in trace.steps],
        "seconds": round(time.perf_counter() - start, 2),
    }


def main(spec_path: str, out_path: str) -> None:
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("run me in a fresh process with TRITON_INTERPRET=1 set before anything imports triton")
    from minivllm.model.loader import load_model

    with open(spec_path) as f:
        spec = json.load(f)
    models: dict[str, Any] = {}
    results: dict[str, Any] = {}
    for case in spec["cases"]:
        try:
            if case["folder"] not in models:
                models[case["folder"]] = load_model(case["folder"])
            results[case["id"]] = run_case(case, models[case["folder"]], spec["new_tokens"])
        except Exception:
            results[case["id"]] = {"error": traceback.format_exc()}
        print(case["id"], results[case["id"]].get("seconds", "error"), flush=True)
    with open(out_path, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
