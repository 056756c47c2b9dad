"""The throughput benchmark's harness (benchmarks/throughput.py) on a tiny model: same outputs, all rows."""

from __future__ import annotations

import json
from types import SimpleNamespace

from minivllm.lab.benchmarks.throughput import decode_kv_bytes, main

SMALL = ["--num-prompts", "3", "--min-prompt", "8", "--max-prompt", "40", "--output-len", "5"]
SMALL += ["--max-num-batched-tokens", "32", "--repeats", "1"]


def test_same_process_with_profile_and_ablation(tiny_qwen2, capsys):
    # generate_batch is left out: on a CPU its set-up alone takes ~15 s, even for a tiny model.
    args = ["--model", tiny_qwen2, *SMALL, "--same-process", "--profile", "--ablate-cpu-gemm", "--skip-generate-batch"]
    result = main(args)
    out = capsys.readouterr().out
    assert set(result) == {"minivllm", "minivllm, cpu_gemm=torch", "HF generate, static batches of 8"}
    assert all(t > 0 for t in result.values())
    assert out.count("3/3 outputs identical") == 2  # the ablation and HF agree with minivllm
    assert "one process" in out and "steps; with prompt tokens:" in out
    assert "first prompt step:" in out and "a decode step:" in out and "linear layers (GEMM)" in out


def test_fresh_process_per_engine(tiny_qwen2, capsys, tmp_path):
    report = tmp_path / "throughput.json"
    result = main(["--model", tiny_qwen2, *SMALL, "--skip-generate-batch", "--output-json", str(report)])
    out = capsys.readouterr().out
    assert list(result) == ["minivllm", "HF generate, static batches of 8"]
    assert "a fresh process each" in out and "3/3 outputs identical" in out
    assert "memory roofline" in out and "GB/s measured" in out and "the KV cache its decodes read" in out
    rows = json.loads(report.read_text())["rows"]  # what tests/gpu/run.sh reports
    assert [(r["engine"], r["identical_to_minivllm"]) for r in rows] == [(e, 3) for e in result]
    assert [r["seconds"] for r in rows] == list(result.values())


def test_repeats_report_each_run_and_the_median(tiny_qwen2, capsys):
    args = ["--model", tiny_qwen2, *SMALL, "--same-process", "--skip-generate-batch", "--repeats", "2"]
    main([*args, "--threads", "1", "--clock", "process", "--bandwidth-gbs", "10"])
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("speed-up over HF static batches, 2 runs:"))
    assert line.count("(3/3 identical)") == 2 and "median" in line
    assert "process clock" in out and "10.0 GB/s stated" in out


def test_roofline_counts_the_kv_cache_only_of_pure_decode_steps():
    arch = SimpleNamespace(num_layers=30, num_kv_heads=3, head_dim=64)  # SmolLM2's shapes
    per_position = 2 * 30 * 3 * 64 * 4  # K and V, fp32, every layer: 46,080 bytes
    # a prompt step (its context left out), then decodes over 100 + 101 and 102 + 103 positions
    assert decode_kv_bytes(arch, 4, [300, 0, 0], [300, 201, 205]) == per_position * 203
    assert decode_kv_bytes(arch, 2, [0], [10]) == per_position // 2 * 10  # bf16: half the bytes
    assert decode_kv_bytes(arch, 4, [5], [5]) == 0  # no pure decode step
