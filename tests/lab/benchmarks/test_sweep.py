"""``python -m minivllm bench`` (§11.7): vLLM flag names, sweep grids, outputs, errors that name the flag."""

from __future__ import annotations

import csv
import json

import pytest

from minivllm.lab.benchmarks import sweep as bench
from minivllm.lab.sim.run import run_workload

SIM = ["--mode", "sim", "--cost-model", "llama2_7b_a100", "--no-progress", "--workload", "uniform"]


def test_parser_takes_vllm_flag_names():
    args = bench.build_parser().parse_args(
        [
            "--max-num-batched-tokens",
            "512",
            "--long-prefill-token-threshold",
            "128",
            "--no-enable-chunked-prefill",
            "--max-num-seqs",
            "8",
            "--max-model-len",
            "1024",
            "--enable-prefix-caching",
            "--block-size",
            "32",
            "--num-gpu-blocks",
            "100",
            "--policy",
            "priority",
            "--request-rate",
            "2.5",
            "--burstiness",
            "2",
        ]
    )
    assert (args.max_num_batched_tokens, args.long_prefill_token_threshold, args.max_num_seqs) == (512, 128, 8)
    assert args.enable_chunked_prefill is False and args.enable_prefix_caching is True
    assert (args.block_size, args.num_gpu_blocks, args.policy, args.request_rate) == (32, 100, "priority", 2.5)
    defaults = bench.build_parser().parse_args([])
    assert defaults.enable_chunked_prefill is None and defaults.mode == "sim" and defaults.request_rate == float("inf")


def test_sweeps_form_a_typed_grid():
    parser = bench.build_parser()
    points = bench.parse_sweeps(
        parser, ["max-num-batched-tokens=128,256,512", "--enable-chunked-prefill=true,false", "request-rate=1,2"]
    )
    assert len(points) == 12
    assert points[0] == {"max_num_batched_tokens": 128, "enable_chunked_prefill": True, "request_rate": 1.0}
    assert {p["max_num_batched_tokens"] for p in points} == {128, 256, 512}


def test_sim_sweep_writes_a_table_json_and_csv(tmp_path, capsys):
    out_json, out_csv = tmp_path / "r.json", tmp_path / "r.csv"
    argv = SIM + [
        "--num-prompts",
        "20",
        "--request-rate",
        "5",
        "--max-num-seqs",
        "16",
        "--sweep",
        "max-num-batched-tokens=128,1024",
        "--sweep",
        "max-num-seqs=4,16",
        "--output-json",
        str(out_json),
        "--output-csv",
        str(out_csv),
    ]
    results = bench.main(argv)
    table = capsys.readouterr().out
    assert "max-num-batched-tokens" in table and "TTFT p50 ms" in table and "budget %" in table
    assert len(table.strip().splitlines()) == 5
    doc = json.loads(out_json.read_text())
    assert doc["mode"] == "sim" and len(doc["results"]) == 4
    first = doc["results"][0]
    assert first["point"] == {"max_num_batched_tokens": 128, "max_num_seqs": 4}
    assert first["metrics"]["num_completed"] == 20 and first["metrics"]["ttft_p50"] > 0
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 4 and float(rows[3]["output_throughput"]) == pytest.approx(
        results[3]["metrics"]["output_throughput"]
    )
    assert rows[0]["max_num_batched_tokens"] == "128" and rows[0]["cost_model"] == "llama2_7b_a100"
    # deterministic: the same command gives the same numbers
    again = bench.main(argv)
    assert [r["metrics"]["ttft_p99"] for r in again] == [r["metrics"]["ttft_p99"] for r in results]


def test_a_saved_workload_file_is_replayed(tmp_path, capsys):
    from minivllm.lab.sim.workload import make_workload

    path = tmp_path / "w.json"
    make_workload("short_decode", 5, rate=1.0, seed=2, vocab_size=32000).save(path)
    results = bench.main(SIM[:-2] + ["--workload", str(path)])
    assert results[0]["metrics"]["num_completed"] == 5 and results[0]["workload"]["kind"] == "short_decode"


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--max-num-batched-tokens", "0"], "--max-num-batched-tokens"),
        (["--max-num-batched-tokens", "abc"], "--max-num-batched-tokens"),
        (["--max-num-seqs", "512", "--max-num-batched-tokens", "256"], "--max-num-batched-tokens"),
        (["--no-enable-chunked-prefill", "--long-prefill-token-threshold", "64"], "--long-prefill-token-threshold"),
        (["--policy", "lifo"], "--policy"),
        (["--block-size", "7"], "--block-size"),
        (["--sweep", "max-num-seqs=a,b"], "--max-num-seqs"),
        (["--sweep", "bogus=1,2"], "'bogus'"),
        (["--sweep", "max-num-seqs"], "--sweep"),
        (["--cost-model", "nope"], "--cost-model"),
        (["--num-prompts", "0"], "--num-prompts"),
        (["--request-rate", "-1"], "--request-rate"),
        (["--workload", "nope"], "--workload"),
        (["--mode", "gpu"], "--mode"),
        (["--engine-generation", "v2"], "--engine-generation"),
        (["--num-scheduler-steps", "0"], "--num-scheduler-steps"),
        (["--engine-generation", "v1", "--num-scheduler-steps", "4"], "--num-scheduler-steps"),
    ],
)
def test_bad_flags_are_argparse_errors_naming_the_flag(argv, flag, capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(SIM + argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and flag in err


def test_real_mode_smoke_on_the_tiny_model(tiny_qwen2, tmp_path, capsys):
    from minivllm.lab.sim.workload import make_workload

    path = tmp_path / "w.csv"
    make_workload("uniform", 3, seed=0, vocab_size=320, prompt_len=(20, 60), output_len=4).save(path)
    results = bench.main(
        [
            "--mode",
            "real",
            "--model",
            tiny_qwen2,
            "--workload",
            str(path),
            "--max-model-len",
            "128",
            "--max-num-seqs",
            "4",
            "--no-progress",
            "--sweep",
            "max-num-batched-tokens=16,64",
        ]
    )
    assert [r["metrics"]["num_completed"] for r in results] == [3, 3]
    assert results[0]["metrics"]["num_steps"] > results[1]["metrics"]["num_steps"]
    assert all(r["metrics"]["wall_time_s"] > 0 for r in results)


def test_scheduler_cls_runs_v0s_prefill_first_policy_and_refuses_chunking(capsys):
    flags = [*SIM, "--num-prompts", "12", "--request-rate", "20", "--max-model-len", "1024"]

    def steps(extra: list[str]) -> list:
        engine, workload, _ = bench.build_point(bench.build_parser().parse_args([*flags, *extra]), {}, {})
        run_workload(engine, workload.requests)
        return engine.trace.steps

    def mixed(s) -> bool:
        return bool(s.prefill_tokens and s.decode_tokens)

    assert any(mixed(s) for s in steps(["--no-enable-chunked-prefill"]))  # V1 mixes prefills into decode steps
    v0 = steps(["--scheduler-cls", bench.SCHEDULERS[1], "--no-enable-chunked-prefill"])
    assert not any(mixed(s) for s in v0) and any(s.decode_tokens for s in v0)  # V0: prefill-only steps
    with pytest.raises(SystemExit):
        bench.main([*flags, "--scheduler-cls", bench.SCHEDULERS[1]])
    assert "never splits a prompt: add --no-enable-chunked-prefill" in capsys.readouterr().err


def test_the_engine_generation_flags_reprice_the_same_schedule(capsys):
    """V1 overlaps the host work: every step is cheaper than vLLM 0.6's sum; multi-step bursts share it."""
    argv = SIM + ["--num-prompts", "12", "--request-rate", "4", "--seed", "3"]
    runs = {
        name: bench.main(argv + extra)[0]["metrics"]
        for name, extra in {
            "preset": [],
            "v06": ["--engine-generation", "v0.6-multistep"],
            "v1": ["--engine-generation", "v1"],
            "multistep": ["--num-scheduler-steps", "8"],
        }.items()
    }
    capsys.readouterr()
    for key in ("ttft_p50", "tpot_p50", "output_throughput", "num_preemptions"):  # the preset's own generation
        assert runs["preset"][key] == runs["v06"][key], key
    assert runs["v1"]["tpot_p50"] < runs["v06"]["tpot_p50"]
    assert runs["multistep"]["tpot_p50"] < runs["v06"]["tpot_p50"]
    with pytest.raises(SystemExit):
        bench.main(["--mode", "real", "--engine-generation", "v1", "--no-progress"])
    assert "need --mode sim" in capsys.readouterr().err
