"""The engine flags (``minivllm/engine/arg_utils.py``, vLLM's ``EngineArgs.add_cli_args``): one per config field,
the same in ``bench`` and ``serve``, built into the engine they describe, errors that name the flag."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from minivllm.config import DEFAULT_MAX_MODEL_LEN, EngineConfig, flag_name, resolve_auto_dtype
from minivllm.engine.arg_utils import CONFIG_CLASSES, ENGINE_ARGS, add_engine_args, build_engine, engine_kwargs
from minivllm.lab.benchmarks import sweep as bench
from minivllm.serving import server

SAMPLE = {bool: None, int: "3", float: "0.5", str: "x"}  # a value of each type, as typed on a command line


def argv_for(names) -> list[str]:
    """Every flag in ``names`` once: a bool as --no-x, the others with a sample value."""
    argv: list[str] = []
    for name in names:
        arg = ENGINE_ARGS[name]
        argv += ["--no-" + arg.flag[2:]] if arg.type is bool else [arg.flag, SAMPLE[arg.type]]
    return argv


def test_every_config_field_has_a_flag_with_help():
    parts = {f.default_factory for f in dataclasses.fields(EngineConfig)}
    assert set(CONFIG_CLASSES) == parts
    fields = [f.name for cls in CONFIG_CLASSES for f in dataclasses.fields(cls)]
    assert list(ENGINE_ARGS) == fields
    options = {o for a in server.build_parser()._actions for o in a.option_strings}
    for name, arg in ENGINE_ARGS.items():
        assert arg.flag == flag_name(name) and arg.flag in options and arg.help, name
        if arg.type is bool:
            assert "--no-" + arg.flag[2:] in options
    defaults = server.build_parser().parse_args([])
    assert engine_kwargs(defaults) == {"model": "smollm2"}  # None everywhere else: the config's defaults
    assert EngineConfig.from_kwargs(**engine_kwargs(defaults)) == EngineConfig()


def test_bench_and_serve_accept_the_same_engine_flags():
    argv = argv_for(bench.ENGINE_FLAGS)
    from_bench = engine_kwargs(bench.build_parser().parse_args(argv))
    from_serve = engine_kwargs(server.build_parser().parse_args(argv))
    assert from_bench == from_serve and list(from_bench) == list(bench.ENGINE_FLAGS)
    assert set(ENGINE_ARGS) - set(bench.ENGINE_FLAGS) == {"seed"}  # bench's --seed is its workload's seed
    bench_args = bench.build_parser().parse_args(["--seed", "5"])
    assert bench_args.seed == 5 and "seed" not in engine_kwargs(bench_args)
    assert engine_kwargs(server.build_parser().parse_args(["--seed", "5"]))["seed"] == 5
    parser = bench.build_parser()
    for name in bench.ENGINE_FLAGS:  # and every one of them can be swept
        typ = ENGINE_ARGS[name].type
        text = "true,false" if typ is bool else f"{SAMPLE[typ]},1"
        values = [True, False] if typ is bool else [typ(SAMPLE[typ]), typ("1")]
        assert [p[name] for p in bench.parse_sweeps(parser, [f"{flag_name(name)[2:]}={text}"])] == values


def test_scheduler_reserve_full_isl_flag_is_a_bool_off_by_default_and_says_so():
    arg = ENGINE_ARGS["scheduler_reserve_full_isl"]
    assert arg.flag == "--scheduler-reserve-full-isl" and arg.type is bool and arg.default is False
    assert "later vLLM" in arg.help and "0.8.5" in arg.help
    parser = server.build_parser()
    on = engine_kwargs(parser.parse_args(["--scheduler-reserve-full-isl"]))
    assert on["scheduler_reserve_full_isl"] is True
    assert EngineConfig.from_kwargs(**on).scheduler_config.scheduler_reserve_full_isl is True
    off = engine_kwargs(parser.parse_args(["--no-scheduler-reserve-full-isl"]))
    assert off["scheduler_reserve_full_isl"] is False
    assert "scheduler_reserve_full_isl" not in engine_kwargs(parser.parse_args([]))  # the config's False
    assert EngineConfig().scheduler_config.scheduler_reserve_full_isl is False


def test_only_and_exclude_pick_the_flags():
    p = argparse.ArgumentParser()
    assert add_engine_args(p, only=["max_num_seqs", "enable_chunked_prefill", "seed"], exclude=["seed"]) == (
        "max_num_seqs",
        "enable_chunked_prefill",
    )
    args = p.parse_args(["--max-num-seqs", "8", "--no-enable-chunked-prefill"])
    assert engine_kwargs(args) == {"max_num_seqs": 8, "enable_chunked_prefill": False}
    assert engine_kwargs(args, {"max_num_seqs": 4, "request_rate": 2.0}) == {
        "max_num_seqs": 4,
        "enable_chunked_prefill": False,
    }
    with pytest.raises(ValueError, match="max_batch"):
        add_engine_args(argparse.ArgumentParser(), only=["max_batch"])


def test_build_engine_builds_what_the_flags_say(tiny_qwen2):
    import torch

    from minivllm.sampling_params import SamplingParams

    flags = [
        "--model",
        tiny_qwen2,
        "--device",
        "cpu",
        "--dtype",
        "auto",
        "--cpu-gemm",
        "torch",
        "--seed",
        "7",
        "--max-num-batched-tokens",
        "64",
        "--max-num-seqs",
        "4",
        "--long-prefill-token-threshold",
        "16",
        "--block-size",
        "32",
        "--num-gpu-blocks",
        "40",
        "--no-enable-prefix-caching",
        "--policy",
        "priority",
        "--num-speculative-tokens",
        "2",
        "--prompt-lookup-max",
        "3",
    ]
    engine = build_engine(**engine_kwargs(server.build_parser().parse_args(flags)))  # loads the model itself
    c = engine.config
    assert (c.model_config.model, c.model_config.device, c.model_config.cpu_gemm) == (tiny_qwen2, "cpu", "torch")
    assert c.model_config.seed == 7
    sc, cc, spec = c.scheduler_config, c.cache_config, c.speculative_config
    assert (sc.max_num_batched_tokens, sc.max_num_seqs, sc.long_prefill_token_threshold) == (64, 4, 16)
    assert sc.policy == "priority" and sc.enable_chunked_prefill is True  # not given: the config's default
    assert sc.max_model_len == 256  # not given: the model's max_position_embeddings (under DEFAULT_MAX_MODEL_LEN)
    assert (cc.block_size, cc.num_gpu_blocks, cc.enable_prefix_caching) == (32, 40, False)
    assert (spec.num_speculative_tokens, spec.prompt_lookup_max, spec.prompt_lookup_min) == (2, 3, 1)
    runner = engine.model_runner
    assert runner.dtype == torch.float32 and runner.cpu_gemm == "torch"  # "auto" on a CPU: float32
    engine.add_request("r", [5, 6, 7, 8, 9], SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True))
    while engine.has_unfinished_requests():
        engine.step()
    assert len(engine.outputs["r"].outputs[0].token_ids) == 6

    loaded = runner.loaded  # a pre-loaded model is used as it is, and still sizes max_model_len
    again = build_engine(loaded=loaded, model=tiny_qwen2, device="cpu", num_gpu_blocks=40, block_size=32)
    assert again.model_runner.loaded is loaded and again.config.scheduler_config.max_model_len == 256


def test_build_engine_with_another_runner_loads_no_model():
    from minivllm.lab.sim.cost_model import CostModel
    from minivllm.lab.sim.sim_runner import SimRunner

    cost_model = CostModel.from_preset("llama2_7b_a100")
    engine = build_engine(
        lambda config: SimRunner(cost_model, config=config),
        model="/no/such/model",
        max_num_batched_tokens=256,
        enable_chunked_prefill=True,
    )
    assert isinstance(engine.model_runner, SimRunner) and engine.model_runner.config is engine.config
    sc = engine.config.scheduler_config
    assert (sc.max_num_batched_tokens, sc.max_model_len) == (256, DEFAULT_MAX_MODEL_LEN)


@pytest.mark.parametrize("name", [n for n, a in ENGINE_ARGS.items() if a.type in (int, float)])
def test_a_value_of_the_wrong_type_is_an_error_naming_the_flag(name, capsys):
    parsers = [server.build_parser()] + ([bench.build_parser()] if name in bench.ENGINE_FLAGS else [])
    for parser in parsers:
        with pytest.raises(SystemExit) as e:
            parser.parse_args([ENGINE_ARGS[name].flag, "lots"])
        assert e.value.code == 2 and ENGINE_ARGS[name].flag in capsys.readouterr().err


@pytest.mark.parametrize(
    "flags, field",
    [
        (["--block-size", "7"], "block_size"),
        (["--gpu-memory-utilization", "2"], "gpu_memory_utilization"),
        (["--dtype", "int8"], "dtype"),
        (["--cpu-gemm", "blas"], "cpu_gemm"),
        (["--prompt-lookup-min", "9"], "prompt_lookup_min"),
        (["--prefix-caching-hash-algo", "md5"], "prefix_caching_hash_algo"),
    ],
)
def test_a_bad_value_is_refused_before_any_model_loads(flags, field, capsys):
    args = server.build_parser().parse_args(["--model", "/no/such/model", *flags])
    with pytest.raises(ValueError, match=field):  # the config's check, not the loader's FileNotFoundError
        build_engine(**engine_kwargs(args))
    with pytest.raises(SystemExit) as e:  # bench names the flag
        bench.main(["--mode", "sim", "--cost-model", "llama2_7b_a100", "--no-progress", *flags])
    assert e.value.code == 2 and flag_name(field) in capsys.readouterr().err


def test_auto_dtype_is_bfloat16_on_cuda_else_float32():
    assert resolve_auto_dtype("auto", "cuda") == "bfloat16"
    assert resolve_auto_dtype("auto", "cpu") == "float32"
    assert resolve_auto_dtype("float16", "cpu") == "float16" and resolve_auto_dtype("float32", "cuda") == "float32"
