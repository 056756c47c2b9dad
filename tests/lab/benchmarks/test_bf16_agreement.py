"""The bf16 agreement benchmark (benchmarks/bf16_agreement.py) on a tiny model: every column, fp32 equal to HF's."""

from __future__ import annotations

from minivllm.lab.benchmarks.bf16_agreement import main


def test_prefix_agreement_per_prompt(tiny_llama, capsys):
    result = main(["--model", tiny_llama, "--num-random", "3", "--output-len", "6", "--max-prompt", "40"])
    out = capsys.readouterr().out
    assert set(result) == {"mini bf16 = mini fp32", "mini bf16 = HF bf16", "mini fp32 = HF fp32"}
    assert all(len(v) == 3 and all(0 <= x <= 6 for x in v) for v in result.values())
    assert result["mini fp32 = HF fp32"] == [6, 6, 6]  # the contract: fp32 greedy tokens equal HF's
    assert "random tokens #2" in out and "whole outputs identical" in out and "CPU time per generated token" in out
