"""The decode-roofline benchmark on a tiny model: pure decode steps at every batch size, even when the
prompts need several prefill steps (the early requests must not finish before the timed steps)."""

from __future__ import annotations

import json

from minivllm.lab.benchmarks.decode_roofline import main


def test_every_batch_gets_a_row(tiny_qwen2, capsys, tmp_path):
    # 128 prompts of 200 tokens: 13 prefill steps under the 2,048-token budget, during which the first
    # requests already decode.
    main(
        [
            "--model",
            tiny_qwen2,
            "--device",
            "cpu",
            "--dtype",
            "float32",
            "--context",
            "200",
            "--steps",
            "3",
            "--batches",
            "1",
            "128",
            "--bandwidth-gbs",
            "10",
            "--output-json",
            str(tmp_path / "roofline.json"),
        ]
    )
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert [r[0] for r in rows] == ["1", "128"]
    assert all(float(r[1]) > 0 and float(r[2]) > 0 for r in rows)
    report = json.loads((tmp_path / "roofline.json").read_text())  # what tests/gpu/run.sh reports
    assert [(r["batch"], f"{r['measured_ms']:.2f}") for r in report["rows"]] == [(int(r[0]), r[1]) for r in rows]
    assert report["kv_bytes_per_token"] == 2 * 2 * 2 * 16 * 4  # 2 layers x K,V x 2 KV heads x head_dim 16 x fp32
