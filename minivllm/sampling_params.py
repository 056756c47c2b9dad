"""SamplingParams: how one request wants its tokens chosen and when it stops.

Mirrors ``vllm/sampling_params.py`` (the fields minivllm uses, same names and
defaults; the checks of ``SamplingParams._verify_args``). Invalid values raise
``ValueError`` whose first word is the field's name and which says the allowed
range, at the API boundary (§11.4: the request carries these into the engine;
the HTTP server turns that first word into the error's ``param``). Types are
checked too: a bool is not an int, 1.5 is not an int, a string is not a number,
and NaN / inf are not allowed anywhere.
"""

from __future__ import annotations

import logging
import math
import numbers
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

# torch.Generator.manual_seed takes any integer in [-2**63, 2**64 - 1] (it reads a signed or an unsigned
# 64-bit value); outside that it raises OverflowError inside the engine step, so those seeds are refused here.
SEED_MIN, SEED_MAX = -(2**63), 2**64 - 1
MIN_TEMPERATURE = 1e-2  # vLLM's _MAX_TEMP: smaller positive temperatures are raised to it (nan / inf otherwise)
MAX_GUIDED_CHOICES = 1024  # bounds on guided_choice: how many choices, and their UTF-8 bytes in all
MAX_GUIDED_CHOICE_BYTES = 64 * 1024


def _show(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (a bad value can be a huge string)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _as_int(name: str, value: Any, allowed: str) -> int:
    """``value`` as an int, or ValueError naming ``name``; bools and floats (even 2.0) are refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer {allowed}, got {_show(value)}.")
    return int(value)


def _as_float(name: str, value: Any, allowed: str) -> float:
    """``value`` as a finite float (ints accepted), or ValueError naming ``name``; bools, NaN and inf refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number {allowed}, got {_show(value)}.")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite and {allowed}, got {value}.")
    return float(value)


def _token_id_list(name: str, value: Any) -> list[int]:
    """A list (or tuple) of token ids >= 0; None means []. A string is not a list of token ids."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{name} must be a list of token ids (integers >= 0), got {_show(value)}.")
    ids = []
    for i, t in enumerate(value):
        if isinstance(t, bool) or not isinstance(t, numbers.Integral) or t < 0:
            raise ValueError(f"{name} must be a list of token ids (integers >= 0), got {_show(t)} at index {i}.")
        ids.append(int(t))
    return ids


def _choice_list(value: Any) -> list[str]:
    """guided_choice as a list of non-empty, valid-Unicode strings within the size bounds."""
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"guided_choice must be a list of strings, got {type(value).__name__}.")
    if len(value) > MAX_GUIDED_CHOICES:
        raise ValueError(f"guided_choice must have at most {MAX_GUIDED_CHOICES} choices, got {len(value)}.")
    total = 0
    for i, choice in enumerate(value):
        if not isinstance(choice, str) or not choice:
            raise ValueError(f"guided_choice entries must be non-empty strings, got {_show(choice)} at index {i}.")
        try:
            total += len(choice.encode("utf-8"))
        except UnicodeEncodeError as e:
            raise ValueError(f"guided_choice entry {i} is not valid Unicode ({e.reason} at {e.start}).") from e
    if total > MAX_GUIDED_CHOICE_BYTES:
        raise ValueError(
            f"guided_choice must hold at most {MAX_GUIDED_CHOICE_BYTES} bytes (64 KiB) of UTF-8 text in all, "
            f"got {total}."
        )
    return list(value)


# (field, accepted?, why not) for vLLM's SamplingParams fields that minivllm accepts only at their defaults.
UNSUPPORTED_FIELDS: tuple[tuple[str, Any, str], ...] = (
    ("n", lambda v: v == 1 and not isinstance(v, bool), "must be 1: minivllm samples one sequence per request"),
    ("best_of", lambda v: v is None or (v == 1 and not isinstance(v, bool)), "must be None or 1 (n is 1)"),
    ("presence_penalty", lambda v: v == 0, "is not supported (must be 0.0)"),
    ("frequency_penalty", lambda v: v == 0, "is not supported (must be 0.0)"),
    ("repetition_penalty", lambda v: v == 1, "is not supported (must be 1.0)"),
    ("min_p", lambda v: v == 0, "is not supported (must be 0.0)"),
    ("bad_words", lambda v: not v, "is not supported"),
    ("detokenize", lambda v: v is True, "must be True: finished outputs are always detokenized"),
    ("skip_special_tokens", lambda v: v is True, "must be True: special tokens are always left out of the text"),
    ("spaces_between_special_tokens", lambda v: v is True, "must be True"),
    ("include_stop_str_in_output", lambda v: isinstance(v, bool), "must be True or False"),
    ("logit_bias", lambda v: not v, "is not supported"),
    ("allowed_token_ids", lambda v: not v, "is not supported"),
)


@dataclass
class SamplingParams:
    """Per-request sampling and stopping rules.

    temperature == 0 means greedy; a positive temperature below 0.01 is raised to 0.01 with a warning, as
    vLLM does. ``top_k`` of 0 or -1 means "all tokens" (vLLM accepts -1; 0 is accepted here too). ``seed``
    (None or an integer in [-2**63, 2**64 - 1], what ``torch.Generator.manual_seed`` takes) gives the
    request its own generator, so its samples do not depend on what else is in the batch.
    ``guided_choice``: at most 1,024 non-empty strings, 64 KiB of UTF-8 text in all.
    ``logprobs``: None, or k >= 0: each generated token's log-probability and the top k
    (``CompletionOutput.logprobs``; 0: the sampled token's only), at most the engine's ``max_logprobs``.
    ``prompt_logprobs``: the same for every prompt token after the first (``RequestOutput.prompt_logprobs``).
    """

    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    seed: int | None = None
    ignore_eos: bool = False
    stop_token_ids: list[int] = field(default_factory=list)
    min_tokens: int = 0
    guided_choice: list[str] | None = None  # §11.4.4: the output must be exactly one of these
    # vLLM's other fields, with vLLM's defaults, so that a vLLM script's keyword arguments are understood. stop
    # and include_stop_str_in_output work; the others are accepted at their default and refused otherwise, by
    # name (UNSUPPORTED_FIELDS: minivllm does not implement them).
    n: int = 1
    best_of: int | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    min_p: float = 0.0
    stop: str | list[str] | None = None  # stop strings (minivllm.engine.stop_strings); kept as a list
    bad_words: list[str] | None = None
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    detokenize: bool = True
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    logit_bias: dict[int, float] | None = None
    allowed_token_ids: list[int] | None = None
    # ``stop_token_ids`` as a set, so that ``check_stop`` costs O(1) per token whatever the list's length
    # (minivllm addition; vLLM keeps the list, its server bounds nothing).
    stop_token_id_set: frozenset[int] = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._verify()
        self._check_stop()
        self._refuse_unsupported()
        self.stop_token_id_set = frozenset(self.stop_token_ids)

    def _check_stop(self) -> None:
        """``stop``: None, one string or a list of non-empty strings (kept as a list; the engine checks them)."""
        if self.stop is None or isinstance(self.stop, str):
            self.stop = [] if not self.stop else [self.stop]
        if not isinstance(self.stop, (list, tuple)) or not all(isinstance(x, str) and x for x in self.stop):
            raise ValueError(f"stop must be a string or a list of non-empty strings, got {_show(self.stop)}.")
        self.stop = list(self.stop)

    def _refuse_unsupported(self) -> None:
        """vLLM fields minivllm does not implement: only their defaults (or what means the same) pass."""
        for name, ok, why in UNSUPPORTED_FIELDS:
            value = getattr(self, name)
            if not ok(value):
                raise ValueError(f"{name} {why}; got {name}={_show(value)}.")

    def _verify(self) -> None:
        """vLLM's ``_verify_args``, plus the type and finiteness checks; normalises the values it accepts."""
        self.max_tokens = _as_int("max_tokens", self.max_tokens, "(at least 1)")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}.")
        self.temperature = _as_float("temperature", self.temperature, "non-negative")
        if self.temperature < 0.0:
            raise ValueError(f"temperature must be non-negative, got {self.temperature}.")
        if 0.0 < self.temperature < MIN_TEMPERATURE:
            logger.warning(
                "temperature %s is less than %s, which may cause numerical errors (nan or inf); raised to %s.",
                self.temperature,
                MIN_TEMPERATURE,
                MIN_TEMPERATURE,
            )
            self.temperature = MIN_TEMPERATURE
        self.top_p = _as_float("top_p", self.top_p, "in (0, 1]")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}.")
        self.top_k = _as_int("top_k", self.top_k, "(-1 or 0 to disable, or at least 1)")
        if self.top_k < -1:
            raise ValueError(f"top_k must be -1 (disable), 0 (disable) or at least 1, got {self.top_k}.")
        if self.seed is not None:
            self.seed = _as_int("seed", self.seed, f"in [{SEED_MIN}, {SEED_MAX}] or None")
            if not SEED_MIN <= self.seed <= SEED_MAX:
                raise ValueError(f"seed must be None or in [{SEED_MIN}, {SEED_MAX}], got {self.seed}.")
        if not isinstance(self.ignore_eos, bool):
            raise ValueError(f"ignore_eos must be True or False, got {_show(self.ignore_eos)}.")
        self.stop_token_ids = _token_id_list("stop_token_ids", self.stop_token_ids)
        if self.guided_choice is not None:
            self.guided_choice = _choice_list(self.guided_choice)
            if self.ignore_eos:
                raise ValueError("guided_choice ends the output with EOS, so ignore_eos must be False.")
        for name in ("logprobs", "prompt_logprobs"):  # the upper bound is the engine's max_logprobs (add_request)
            if (value := getattr(self, name)) is not None:
                value = _as_int(name, value, "(None, or 0 or more)")
                if value < 0:
                    raise ValueError(f"{name} must be None or non-negative, got {value}.")
                setattr(self, name, value)
        self.min_tokens = _as_int("min_tokens", self.min_tokens, "(greater than or equal to 0)")
        if self.min_tokens < 0:
            raise ValueError(f"min_tokens must be greater than or equal to 0, got {self.min_tokens}.")
        if self.min_tokens > self.max_tokens:
            raise ValueError(
                f"min_tokens must be less than or equal to max_tokens={self.max_tokens}, got {self.min_tokens}."
            )

    @property
    def greedy(self) -> bool:
        """True when sampling is argmax (temperature 0)."""
        return self.temperature == 0.0
