"""config.json problems name the file and the field (ValueError), not a bare KeyError."""

from __future__ import annotations

import json

import pytest

from minivllm.model.config import LlamaArchConfig
from minivllm.model.loader import load_model

BASE = dict(
    architectures=["LlamaForCausalLM"],
    vocab_size=10,
    hidden_size=8,
    intermediate_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=1,
)


@pytest.mark.parametrize("missing", ["num_hidden_layers", "vocab_size", "num_attention_heads"])
def test_a_missing_required_field_names_the_file_and_the_field(tmp_path, missing):
    cfg = {k: v for k, v in BASE.items() if k != missing}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    path = str(tmp_path / "config.json")
    with pytest.raises(ValueError, match=f"{path} is missing the required field '{missing}'"):
        LlamaArchConfig.from_folder(str(tmp_path))
    with pytest.raises(ValueError, match=f"is missing the required field '{missing}'"):
        load_model(str(tmp_path))  # the loader reads config.json before any weights


@pytest.mark.parametrize(
    ("field", "value"), [("num_hidden_layers", "2"), ("hidden_size", 0), ("vocab_size", True), ("head_dim", -4)]
)
def test_a_size_that_is_not_a_positive_int_is_named(field, value):
    with pytest.raises(ValueError, match=f"config.json: field '{field}' must be an integer >= 1, got {value!r}"):
        LlamaArchConfig.from_dict({**BASE, field: value})


def test_bad_json_and_non_objects_are_named(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json is not valid JSON"):
        LlamaArchConfig.from_folder(str(tmp_path))
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="config.json must hold a JSON object, got list"):
        LlamaArchConfig.from_folder(str(tmp_path))


def test_optional_fields_still_default():
    arch = LlamaArchConfig.from_dict({**BASE, "head_dim": None, "num_key_value_heads": 0})
    assert (arch.head_dim, arch.num_kv_heads, arch.max_position_embeddings) == (4, 2, 2048)
