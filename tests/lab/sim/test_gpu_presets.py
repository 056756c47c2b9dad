"""The GPU presets: built from their sources, each term explained, the profile's facts kept (§11.7, issue 19)."""

from __future__ import annotations

import pytest

from minivllm.lab.sim import gpu_presets as gp
from minivllm.lab.sim.cost_model import CostModel

NAMES = sorted(gp.PRESETS)


def test_the_stored_presets_are_what_the_builder_makes(capsys):
    assert gp.main(["--check"]) == 0, capsys.readouterr().out  # else: python -m minivllm.lab.sim.gpu_presets
    assert NAMES == ["llama2_7b_a100", "llama2_7b_h100", "llama3_8b_a100", "llama3_8b_h100"]


@pytest.mark.parametrize("name", NAMES)
def test_every_nonzero_term_has_a_source_line(name):
    m = CostModel.from_preset(name)
    terms = " ".join(m.meta["terms"])
    for field in (
        "host_step_s",
        "per_request_s",
        "linear_profile",
        "overhead_s",
        "attn_pair_s",
        "attn_floor_s",
        "kv_read_s_per_byte",
        "kv_bytes_per_token",
        "memory",
    ):
        assert getattr(m, field) or field == "overhead_s", (name, field)  # Llama-2-7B: the profiled LM head
        assert field in terms, (name, field)
    assert m.per_token_s == 0 and m.ridge_tokens == 0  # the profile table prices the linear layers


def test_kv_bytes_come_from_each_models_own_kv_heads():
    l2, l3 = CostModel.from_preset("llama2_7b_a100"), CostModel.from_preset("llama3_8b_a100")
    assert l2.kv_bytes_per_token == 2 * 32 * 32 * 128 * 2 and l3.kv_bytes_per_token == l2.kv_bytes_per_token // 4
    # GQA: the same GPU holds ~4x the tokens (less the bigger weights)
    assert 3.0 < l3.num_blocks(16, 2048, 256) / l2.num_blocks(16, 2048, 256) < 4.0


@pytest.mark.parametrize("name", NAMES)
def test_kv_capacity_shrinks_as_the_budget_grows_and_follows_the_utilisation(name):
    m = CostModel.from_preset(name)
    blocks = [m.num_blocks(16, b, 256) for b in (512, 2048, 8192, 32768)]
    assert all(b > a for a, b in zip(blocks[1:], blocks)), blocks  # activations of the profiling run
    assert m.num_blocks(16, 2048, 256, 0.5) < m.num_blocks(16, 2048, 256, 0.9) < m.num_blocks(16, 2048, 256, 0.95)
    assert m.kv_cache_bytes == m.memory_model().kv_cache_bytes(2048, 256)  # the default a config-less caller gets


@pytest.mark.parametrize("name", NAMES)
def test_the_linear_term_is_the_profile_and_keeps_its_tile_steps(name):
    m = CostModel.from_preset(name)
    model, gpu = gp.PRESETS[name]
    points = gp.read_profile(gpu.profiles.get(model.name, gpu.profiles["llama2_7b"]))
    scale = 1.0 if model.name in gpu.profiles else model.linear_params / gp.LLAMA2_7B.linear_params
    top = 0.0
    for t, s in points:
        top = max(top, s * scale)
        assert m.profiled_linear(t) == pytest.approx(top)
    # the steps SARATHI section 4.4 describes: 8 more tokens past a tile boundary cost much more
    jump = m.profiled_linear(520) / m.profiled_linear(512)
    assert jump > 1.05, jump


@pytest.mark.parametrize("name", NAMES)
def test_piggybacked_decodes_are_cheap_and_lone_decodes_are_not(name):
    m = CostModel.from_preset(name)
    # SARATHI section 4.3: decodes riding on a chunk share its weight read; alone they pay for it
    alone, mixed = m.step_time([(1016, 0)]), m.step_time([(1016, 0)] + [(1, 1024)] * 8)
    per_piggybacked = (mixed - alone) / 8
    decode_only = m.step_time([(1, 1024)] * 8) / 8
    assert decode_only > 5 * per_piggybacked
    # the host terms are there: a one-request decode costs more than its GPU work alone
    gpu_only = CostModel(**{**m.to_dict(), "host_step_s": 0.0, "per_request_s": 0.0})
    assert m.step_time([(1, 100)]) - gpu_only.step_time([(1, 100)]) == pytest.approx(m.host_step_s + m.per_request_s)
