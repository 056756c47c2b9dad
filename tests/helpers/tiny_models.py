"""Tiny random Hugging Face models (Qwen2, Llama, Mistral) saved to a folder, with a byte-level BPE tokenizer:
what the ``tiny_*`` fixtures of tests/conftest.py load."""

from __future__ import annotations

import torch

CORPUS = ["the cat sat on the mat and the dog ran far", "hello world, the cat and the dog"] * 10


def save_tiny_tokenizer(folder: str) -> None:
    """A byte-level BPE (< 300 ids) trained on two sentences: loads as Qwen2Tokenizer or the generic fast one."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"], initial_alphabet=alphabet, show_progress=False
    )
    tok.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(folder)


def save_tiny_model(
    folder: str, kind: str, dtype: torch.dtype = torch.float32, max_position_embeddings: int = 256
) -> str:
    """Random HF model saved to ``folder``: "qwen2" (qkv bias, untied), "llama" (tied, llama3 rope) or
    "mistral" (head_dim 24 != hidden / heads). ``max_position_embeddings`` changes no weight."""
    from transformers import LlamaConfig, MistralConfig, MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM
    from transformers import LlamaForCausalLM as HFLlama

    common = dict(
        vocab_size=320,
        hidden_size=64,
        intermediate_size=112,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_position_embeddings,
        rms_norm_eps=1e-6,
        eos_token_id=2,
        bos_token_id=1,
    )
    torch.manual_seed(len(kind))
    if kind == "qwen2":
        cfg = Qwen2Config(
            **common, tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}
        )
        hf = Qwen2ForCausalLM(cfg)
        with torch.no_grad():  # random init leaves biases at 0: make them matter
            for layer in hf.model.layers:
                for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                    proj.bias.normal_(std=0.5)
    elif kind == "llama":
        rope = {
            "rope_type": "llama3",
            "rope_theta": 10000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
        }
        hf = HFLlama(LlamaConfig(**common, tie_word_embeddings=True, rope_parameters=rope))
    elif kind == "mistral":
        hf = MistralForCausalLM(MistralConfig(**common, head_dim=24, tie_word_embeddings=False, sliding_window=4096))
    else:
        raise ValueError(kind)
    with torch.no_grad():  # larger weights than the default 0.02 init: logits far from uniform
        for p in hf.parameters():
            if p.dim() == 2:
                p.mul_(5.0)
    hf.to(dtype).save_pretrained(folder)
    save_tiny_tokenizer(folder)
    return folder
