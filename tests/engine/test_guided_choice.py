"""Guided choice behind WAITING_FOR_FSM (§11.4.4): compiled in the background, the output is always
one of the choices, a slow compile blocks nobody, a bad grammar fails only its own request."""

from __future__ import annotations

import threading

import pytest

from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.request import RequestStatus
from minivllm.sampling_params import SamplingParams
from minivllm.structured_output.choice import GrammarCompiler, build_vocabulary
from minivllm.worker.model_runner import ModelRunner

CHOICES = ["positive", "negative", "neutral"]


@pytest.fixture(scope="module")
def vocab(smollm2):
    return build_vocabulary(smollm2.tokenizer)


def make_engine(loaded, vocab, delay: threading.Event | None = None) -> LLMEngine:
    config = EngineConfig.from_kwargs(
        model=loaded.hf_folder,
        device="cpu",
        max_num_batched_tokens=128,
        max_num_seqs=8,
        max_model_len=1024,
        num_gpu_blocks=120,
    )
    engine = LLMEngine(config, model_runner=ModelRunner(config, loaded))

    def builder(tokenizer):
        if delay is not None:
            delay.wait(timeout=30)  # a compile that takes as long as the test wants
        return vocab

    engine.grammar_compiler = GrammarCompiler(engine.tokenizer, engine.eos_token_id, vocab_builder=builder)
    return engine


def chat(tok, text: str) -> list[int]:
    prompt = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False)
    return tok.encode(prompt, add_special_tokens=False)


@pytest.mark.slow
def test_outputs_are_always_one_of_the_choices(smollm2, vocab):
    engine = make_engine(smollm2, vocab)
    reviews = ["I loved this film, it was wonderful!", "Terrible service, never again.", "It was a movie."]
    params = [SamplingParams(max_tokens=12, temperature=0.0, guided_choice=CHOICES)] + [
        SamplingParams(max_tokens=12, temperature=1.0, seed=s, guided_choice=CHOICES) for s in range(4)
    ]
    ids = []
    for i, review in enumerate(reviews):
        for j, p in enumerate(params):
            ids.append(f"{i}-{j}")
            engine.add_request(ids[-1], chat(smollm2.tokenizer, f"Sentiment of this review? {review}"), p)
    while engine.has_unfinished_requests():
        engine.step()
    for req_id in ids:
        out = engine.outputs[req_id].outputs[0]
        assert out.text in CHOICES and out.finish_reason == "stop", (req_id, out.text)
    steps_waiting = [s for s in engine.trace.steps if s.num_waiting]
    assert len(steps_waiting) < len(engine.trace.steps)  # compiled, then everyone ran


@pytest.mark.slow
def test_a_slow_compile_blocks_nobody(smollm2, vocab):
    release = threading.Event()
    engine = make_engine(smollm2, vocab, delay=release)
    tok = smollm2.tokenizer
    engine.add_request(
        "guided",
        chat(tok, "Is the sky blue? Answer yes or no."),
        SamplingParams(max_tokens=5, temperature=0.0, guided_choice=["yes", "no"]),
    )
    engine.add_request("free", chat(tok, "Say hello."), SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True))
    for _ in range(4):
        engine.step()
        assert engine.scheduler.waiting[0].status == RequestStatus.WAITING_FOR_FSM
    table = [dict(s.prefill_tokens, **s.decode_tokens) for s in engine.trace.steps]
    assert all("guided" not in row and "free" in row for row in table)  # it waited, the other ran
    release.set()
    while engine.has_unfinished_requests():
        engine.step()
    assert (
        engine.outputs["guided"].outputs[0].text in ("yes", "no")
        and len(engine.outputs["free"].outputs[0].token_ids) == 6
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("choices", "reason"),
    [([], "guided_choice is empty"), (["ok", "\u2fd5\u2fd5"], "cannot be produced by the tokenizer's vocabulary")],
)
def test_a_bad_grammar_fails_only_its_request(smollm2, vocab, choices, reason):
    engine = make_engine(smollm2, vocab)
    engine.add_request("bad", [1, 2, 3], SamplingParams(max_tokens=4, guided_choice=choices))
    engine.add_request("good", [4, 5, 6], SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True))
    while engine.has_unfinished_requests():
        engine.step()
    bad = engine.outputs["bad"].outputs[0]
    assert bad.finish_reason == "abort" and reason in bad.stop_reason and bad.token_ids == []
    assert len(engine.outputs["good"].outputs[0].token_ids) == 4
    pool = engine.scheduler.kv_cache_manager.block_pool
    assert pool.get_num_free_blocks() == pool.num_gpu_blocks - 1


def test_guided_choice_params_are_checked():
    with pytest.raises(ValueError, match="guided_choice must be a list of strings"):
        SamplingParams(guided_choice="yes")
    with pytest.raises(ValueError, match="ignore_eos must be False"):
        SamplingParams(guided_choice=["a"], ignore_eos=True)
