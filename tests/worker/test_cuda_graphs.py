"""CUDA graphs for decode (minivllm.worker.cuda_graphs, ``enforce_eager``): vLLM's capture sizes, the flag's
validation and CLI form, the eager fall-back on a CPU with its reason, and the static-buffer replay path giving
the eager tokens (run eagerly on a CPU under the Triton interpreter; a GPU check compares real graphs)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minivllm.config import EngineConfig
from minivllm.engine.arg_utils import add_engine_args, engine_kwargs
from minivllm.worker.cuda_graphs import capture_sizes

ROOT = Path(__file__).resolve().parents[2]


def test_capture_sizes_are_vllms_default_up_to_max_num_seqs():
    assert capture_sizes(256) == [1, 2, 4, *range(8, 257, 8)]
    assert capture_sizes(6) == [1, 2, 4, 6]  # max_num_seqs itself always has a graph
    assert capture_sizes(1) == [1]
    assert capture_sizes(4096)[-1] == 512  # vLLM's largest; bigger decode batches run eagerly


def test_enforce_eager_is_validated_and_defaults_to_eager():
    assert EngineConfig.from_kwargs().model_config.enforce_eager is True
    with pytest.raises(ValueError, match="enforce_eager must be True or False, got 'no'"):
        EngineConfig.from_kwargs(enforce_eager="no")


def test_enforce_eager_flag_as_vllm_spells_it():
    parser = argparse.ArgumentParser()
    add_engine_args(parser)
    assert engine_kwargs(parser.parse_args(["--enforce-eager"]))["enforce_eager"] is True
    assert engine_kwargs(parser.parse_args(["--no-enforce-eager"]))["enforce_eager"] is False
    assert "enforce_eager" not in engine_kwargs(parser.parse_args([]))
    assert "CUDA graphs" in parser.format_help()


@pytest.mark.slow  # two engines on a tiny model
def test_graphs_on_a_cpu_fall_back_to_eager_and_say_why(tiny_llama, caplog):
    from minivllm.engine.arg_utils import build_engine
    from minivllm.sampling_params import SamplingParams

    tokens = []
    for eager in (True, False):
        with caplog.at_level(logging.WARNING, logger="minivllm.worker.model_runner"):
            engine = build_engine(model=tiny_llama, device="cpu", enforce_eager=eager, max_model_len=64)
        runner = engine.model_runner
        assert runner.decode_graphs is None  # type: ignore[attr-defined]
        engine.add_request("a", [5, 6, 7, 8], SamplingParams(max_tokens=5, temperature=0.0, ignore_eos=True))
        while engine.has_unfinished_requests():
            engine.step()
        tokens.append(engine.outputs["a"].outputs[0].token_ids)
    assert runner.eager_reason == "CUDA graphs need a CUDA device; this runner is on cpu"  # type: ignore[attr-defined]
    assert "enforce_eager=False, but running eagerly: CUDA graphs need a CUDA device" in caplog.text
    assert tokens[0] == tokens[1]


@pytest.mark.slow  # a fresh process under the Triton interpreter (~15 s)
def test_decode_graph_buffers_replay_the_eager_tokens(tiny_llama):
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-m", "tests.helpers.graph_replay_cpu", tiny_llama], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["tokens"]["graphs"] == out["tokens"]["eager"]
    sizes = out["replayed_sizes"]
    assert {8, 4} <= set(sizes)  # 5 decodes padded to 8; 3 padded to 4
    assert all(s in (1, 2, 4, 8) for s in sizes)
