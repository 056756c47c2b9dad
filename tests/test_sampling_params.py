"""SamplingParams validation at the API boundary (vLLM's ``_verify_args``): types, ranges, finiteness; every
message starts with the field's name (the HTTP server makes it the error's ``param``) and says what is allowed."""

from __future__ import annotations

import math

import pytest
import torch

from minivllm.sample.sampler import make_generator
from minivllm.sampling_params import MAX_GUIDED_CHOICE_BYTES, MAX_GUIDED_CHOICES, SEED_MAX, SEED_MIN, SamplingParams


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(seed="a"), r"seed must be an integer in \[-9223372036854775808, 18446744073709551615\] or None, got 'a'"),
        (dict(seed=2**64), rf"seed must be None or in \[{SEED_MIN}, {SEED_MAX}\], got {2**64}\."),
        (dict(seed=-(2**63) - 1), r"seed must be None or in \[-9223372036854775808, "),
        (dict(seed=1.0), "seed must be an integer"),
        (dict(seed=True), "seed must be an integer"),
        (dict(top_k=1.5), r"top_k must be an integer \(-1 or 0 to disable, or at least 1\), got 1.5"),
        (dict(top_k=True), "top_k must be an integer"),
        (dict(max_tokens=True), r"max_tokens must be an integer \(at least 1\), got True"),
        (dict(max_tokens=2.0), "max_tokens must be an integer"),
        (dict(max_tokens="16"), "max_tokens must be an integer"),
        (dict(min_tokens=1.5), r"min_tokens must be an integer \(greater than or equal to 0\), got 1.5"),
        (dict(min_tokens=False), "min_tokens must be an integer"),
        (dict(temperature=math.nan), "temperature must be finite and non-negative, got nan"),
        (dict(temperature=math.inf), "temperature must be finite and non-negative, got inf"),
        (dict(temperature=True), "temperature must be a number non-negative, got True"),
        (dict(temperature="hot"), "temperature must be a number"),
        (dict(top_p=math.nan), r"top_p must be finite and in \(0, 1\], got nan"),
        (dict(top_p=math.inf), r"top_p must be finite and in \(0, 1\], got inf"),
        (dict(top_p=True), r"top_p must be a number in \(0, 1\], got True"),
        (dict(ignore_eos=1), "ignore_eos must be True or False, got 1"),
        (dict(stop_token_ids="ab"), r"stop_token_ids must be a list of token ids \(integers >= 0\), got 'ab'"),
        (dict(stop_token_ids=["a", "b"]), r"stop_token_ids must be a list of token ids .* got 'a' at index 0"),
        (dict(stop_token_ids=[1, True]), "stop_token_ids must be a list .* got True at index 1"),
        (dict(stop_token_ids=[-1]), "stop_token_ids must be a list .* got -1 at index 0"),
        (dict(stop_token_ids=[1.0]), "stop_token_ids must be a list .* got 1.0 at index 0"),
        (dict(guided_choice=["yes", ""]), "guided_choice entries must be non-empty strings, got '' at index 1"),
        (dict(guided_choice=["yes", 3]), "guided_choice entries must be non-empty strings, got 3 at index 1"),
        (dict(guided_choice=["\ud800"]), "guided_choice entry 0 is not valid Unicode"),
        (
            dict(guided_choice=[str(i) for i in range(MAX_GUIDED_CHOICES + 1)]),
            "guided_choice must have at most 1024 choices, got 1025",
        ),
        (
            dict(guided_choice=["x" * 40_000, "y" * 40_000]),
            r"guided_choice must hold at most 65536 bytes \(64 KiB\) of UTF-8 text in all, got 80000",
        ),
    ],
)
def test_bad_values_are_refused_naming_the_field_first(kwargs, message):
    with pytest.raises(ValueError, match=message) as info:
        SamplingParams(**kwargs)
    assert str(info.value).split(" ", 1)[0] == next(iter(kwargs))  # the server's param is the first word


@pytest.mark.parametrize(
    ("kwargs", "message"),  # the messages other tests and clients already rely on
    [
        (dict(max_tokens=0), "max_tokens must be at least 1, got 0."),
        (dict(temperature=-1.0), "temperature must be non-negative, got -1.0."),
        (dict(top_p=2.0), "top_p must be in (0, 1], got 2.0."),
        (dict(top_k=-2), "top_k must be -1 (disable), 0 (disable) or at least 1, got -2."),
        (dict(min_tokens=-1), "min_tokens must be greater than or equal to 0, got -1."),
        (dict(min_tokens=5, max_tokens=2), "min_tokens must be less than or equal to max_tokens=2, got 5."),
        (dict(guided_choice="yes"), "guided_choice must be a list of strings, got str."),
    ],
)
def test_existing_messages_are_unchanged(kwargs, message):
    with pytest.raises(ValueError) as info:
        SamplingParams(**kwargs)
    assert str(info.value) == message


def test_every_accepted_seed_seeds_a_generator():
    """Before: seed=2**64 was accepted and the engine step failed in manual_seed (OverflowError)."""
    for seed in (SEED_MIN, -1, 0, 2**63 - 1, 2**63, SEED_MAX):
        gen = make_generator(SamplingParams(seed=seed))
        assert gen is not None and gen.initial_seed() == seed % 2**64
    with pytest.raises((RuntimeError, ValueError, OverflowError)):
        torch.Generator().manual_seed(SEED_MAX + 1)  # the bound is torch's own


def test_valid_values_are_kept_and_normalised():
    p = SamplingParams(max_tokens=4, temperature=1, top_p=1, stop_token_ids=(5, 7), seed=3, min_tokens=2)
    assert (p.temperature, p.top_p, p.stop_token_ids, p.seed) == (1.0, 1.0, [5, 7], 3)
    assert isinstance(p.temperature, float) and p.stop_token_ids == [5, 7]
    assert SamplingParams(stop_token_ids=None).stop_token_ids == []
    assert SamplingParams(temperature=0).greedy and SamplingParams(top_k=0).top_k == 0
    assert SamplingParams(guided_choice=("a", "b")).guided_choice == ["a", "b"]
    assert SamplingParams(guided_choice=[]).guided_choice == []  # refused per request by the grammar compiler
    big = ["x" * 64] * (MAX_GUIDED_CHOICE_BYTES // 64)
    assert len(SamplingParams(guided_choice=big).guided_choice) == MAX_GUIDED_CHOICES  # exactly at both bounds


def test_tiny_temperatures_are_raised_to_001_as_vllm_does(caplog):
    with caplog.at_level("WARNING", logger="minivllm.sampling_params"):
        assert SamplingParams(temperature=1e-40).temperature == 0.01
    assert "temperature 1e-40 is less than 0.01" in caplog.text
    assert SamplingParams(temperature=0.5).temperature == 0.5


def test_vllms_other_fields_are_understood_at_their_defaults():
    """A vLLM script may spell out vLLM's defaults (n=1, stop=None, logprobs=None, ...): all accepted."""
    p = SamplingParams(
        n=1, best_of=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, min_p=0.0, stop=[],
        bad_words=None, logprobs=None, prompt_logprobs=None, detokenize=True, skip_special_tokens=True,
        spaces_between_special_tokens=True, include_stop_str_in_output=True, logit_bias={}, allowed_token_ids=None,
    )  # fmt: skip
    assert (p.n, p.max_tokens, p.temperature, p.top_p, p.top_k) == (1, 16, 1.0, 1.0, -1)  # vLLM 0.8.5's defaults
    assert (
        p.stop == [] and SamplingParams(stop="\n").stop == ["\n"] and SamplingParams(stop=("a", "b")).stop == ["a", "b"]
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n": 2}, "n must be 1: minivllm samples one sequence per request; got n=2."),
        ({"n": True}, "n must be 1"),
        ({"best_of": 4}, "best_of must be None or 1"),
        ({"presence_penalty": 0.5}, "presence_penalty is not supported (must be 0.0); got presence_penalty=0.5."),
        ({"frequency_penalty": -1}, "frequency_penalty is not supported"),
        ({"repetition_penalty": 1.2}, "repetition_penalty is not supported (must be 1.0)"),
        ({"min_p": 0.05}, "min_p is not supported"),
        ({"stop": [""]}, "stop must be a string or a list of non-empty strings, got ['']."),
        ({"stop": 5}, "stop must be a string or a list of non-empty strings"),
        ({"logprobs": -1}, "logprobs must be None or non-negative, got -1."),
        ({"logprobs": 1.5}, "logprobs must be an integer (None, or 0 or more), got 1.5."),
        ({"logprobs": True}, "logprobs must be an integer"),
        ({"prompt_logprobs": -2}, "prompt_logprobs must be None or non-negative, got -2."),
        ({"prompt_logprobs": "3"}, "prompt_logprobs must be an integer"),
        ({"detokenize": False}, "detokenize must be True"),
        ({"skip_special_tokens": False}, "skip_special_tokens must be True"),
        ({"include_stop_str_in_output": "yes"}, "include_stop_str_in_output must be True or False"),
        ({"logit_bias": {5: 1.0}}, "logit_bias is not supported"),
        ({"allowed_token_ids": [1, 2]}, "allowed_token_ids is not supported"),
    ],
)
def test_vllm_fields_minivllm_does_not_implement_are_refused_by_name(kwargs, message):
    with pytest.raises(ValueError) as e:
        SamplingParams(**kwargs)
    assert str(e.value).startswith(next(iter(kwargs))) and message in str(e.value)


def test_logprobs_are_none_or_a_count_of_top_tokens():
    """vLLM's ``logprobs``: None, or k >= 0 (0: the sampled token only); the upper bound is the engine's
    ``max_logprobs`` (checked at ``add_request``: tests/sample/test_logprobs.py)."""
    assert [SamplingParams(logprobs=k).logprobs for k in (None, 0, 5, 1000)] == [None, 0, 5, 1000]
    assert [SamplingParams(prompt_logprobs=k).prompt_logprobs for k in (None, 0, 5)] == [None, 0, 5]
