"""OpenAI request bodies, error bodies and their mapping onto SamplingParams (§11.9).

Mirrors ``vllm/entrypoints/openai/protocol.py`` (CompletionRequest, ChatCompletionRequest, ErrorResponse)
and the input checks of ``vllm/entrypoints/openai/serving_engine.py`` (``_validate_input``): the
fields minivllm serves, vLLM's extra fields (``top_k``, ``ignore_eos``, ``min_tokens``,
``stop_token_ids``), and a 4xx naming the field for everything it does not serve (``n > 1``,
``best_of``, ``logprobs``, ``echo``, ``suffix``, penalties, ``logit_bias``, ``stop`` strings, tools).
Unknown fields are ignored, as vLLM does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from minivllm.sampling_params import SamplingParams


class APIError(Exception):
    """An error that becomes an OpenAI-style JSON body: {"error": {"message", "type", "param", "code"}}."""

    def __init__(self, message: str, param: str | None = None, status: int = 400, code: str | None = None) -> None:
        super().__init__(message)
        self.message, self.param, self.status = message, param, status
        self.code = code or {400: "invalid_request_error", 404: "model_not_found"}.get(status, "server_error")

    @property
    def type(self) -> str:
        return {400: "invalid_request_error", 404: "invalid_request_error"}.get(self.status, "server_error")

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class StreamOptions(BaseModel):
    include_usage: bool = False


class _SamplingFields(BaseModel):
    """Fields shared by both endpoints; ``None`` means "not sent"."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    n: int = 1
    stream: bool = False
    stream_options: StreamOptions | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: dict[str, float] | None = None
    user: str | None = None
    # vLLM's extra sampling fields (sent as extra_body by the OpenAI client)
    top_k: int | None = None
    min_tokens: int = 0
    ignore_eos: bool = False
    stop_token_ids: list[int] | None = None
    priority: int = 0


class CompletionRequest(_SamplingFields):
    """``POST /v1/completions``: ``prompt`` is a string or a list of token ids."""

    prompt: str | list[int] | list[str] | list[list[int]]
    best_of: int | None = None
    logprobs: int | None = None
    echo: bool = False
    suffix: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | None = None


class ChatCompletionRequest(_SamplingFields):
    """``POST /v1/chat/completions``."""

    messages: list[ChatMessage]
    max_completion_tokens: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = None
    tools: list[dict[str, Any]] | None = None


UNSUPPORTED = {  # field -> (is it set to something minivllm cannot do?, why)
    "n": (lambda v: v != 1, "n must be 1: minivllm returns one completion per request"),
    "best_of": (lambda v: v not in (None, 1), "best_of is not supported"),
    "logprobs": (lambda v: v not in (None, False), "logprobs are not supported"),
    "top_logprobs": (lambda v: v is not None, "top_logprobs are not supported"),
    "echo": (lambda v: v, "echo is not supported"),
    "suffix": (lambda v: v is not None, "suffix is not supported"),
    "presence_penalty": (lambda v: v != 0.0, "presence_penalty is not supported (must be 0)"),
    "frequency_penalty": (lambda v: v != 0.0, "frequency_penalty is not supported (must be 0)"),
    "logit_bias": (lambda v: bool(v), "logit_bias is not supported"),
    "stop": (lambda v: bool(v), "stop strings are not supported; use stop_token_ids"),
    "tools": (lambda v: bool(v), "tools are not supported"),
}


def check_unsupported(req: _SamplingFields) -> None:
    for name, (is_set, why) in UNSUPPORTED.items():
        if name in type(req).model_fields and is_set(getattr(req, name)):
            raise APIError(f"{why}; got {name}={getattr(req, name)!r}.", param=name)


def completion_prompt(req: CompletionRequest, tokenizer: Any) -> tuple[list[int], str | None]:
    """(prompt token ids, prompt text or None). One prompt per request."""
    p = req.prompt
    if isinstance(p, str):
        if tokenizer is None:
            raise APIError("This model has no tokenizer: send the prompt as a list of token ids.", "prompt")
        return list(tokenizer.encode(p)), p
    if p and not all(isinstance(t, int) for t in p):
        raise APIError("Batched prompts are not supported: send one prompt (a string or token ids).", "prompt")
    return list(p), None


@dataclass
class Limits:
    """What the served model allows: max_model_len and the vocabulary size."""

    max_model_len: int
    vocab_size: int | None


def build_sampling_params(req: _SamplingFields, num_prompt_tokens: int, limits: Limits, prompt_field: str,
                          default_max_tokens: int | None) -> SamplingParams:  # fmt: skip
    """SamplingParams for a validated request; prompt length and max_tokens are checked against max_model_len
    as vLLM's ``_validate_input`` does (its error text)."""
    check_unsupported(req)
    mml = limits.max_model_len
    if num_prompt_tokens == 0:
        raise APIError("The prompt is empty; it needs at least 1 token.", prompt_field)
    if num_prompt_tokens >= mml:
        raise APIError(
            f"This model's maximum context length is {mml} tokens. However, your prompt has "
            f"{num_prompt_tokens} tokens; it must be shorter than {mml} to leave room for output.",
            prompt_field,
        )
    max_tokens = getattr(req, "max_completion_tokens", None) or req.max_tokens
    field = "max_completion_tokens" if getattr(req, "max_completion_tokens", None) else "max_tokens"
    if max_tokens is None:
        max_tokens = default_max_tokens if default_max_tokens is not None else mml - num_prompt_tokens
    if max_tokens < 1:
        raise APIError(f"{field} must be at least 1, got {max_tokens}.", field)
    if num_prompt_tokens + max_tokens > mml:
        raise APIError(
            f"This model's maximum context length is {mml} tokens. However, you requested "
            f"{num_prompt_tokens + max_tokens} tokens ({num_prompt_tokens} in the {prompt_field}, {max_tokens} in "
            f"the completion). Please reduce the length of the {prompt_field} or completion.",
            field,
        )
    kwargs: dict[str, Any] = dict(max_tokens=max_tokens, ignore_eos=req.ignore_eos, min_tokens=req.min_tokens)
    for name in ("temperature", "top_p", "top_k", "seed", "stop_token_ids"):
        if getattr(req, name) is not None:
            kwargs[name] = getattr(req, name)
    try:
        return SamplingParams(**kwargs)
    except (ValueError, TypeError) as e:
        first = str(e).split(" ", 1)[0]
        raise APIError(str(e), param=first if first in kwargs else None) from e


def check_token_ids(ids: list[int], limits: Limits, prompt_field: str) -> None:
    bad = [t for t in ids if t < 0 or (limits.vocab_size is not None and t >= limits.vocab_size)]
    if bad:
        raise APIError(f"Token id {bad[0]} is out of range; allowed 0..{(limits.vocab_size or 1) - 1}.", prompt_field)


def validation_error(errors: list[dict[str, Any]]) -> APIError:
    """A FastAPI RequestValidationError (malformed JSON, wrong types, missing fields) as an APIError."""
    if not errors:
        return APIError("Invalid request body.")
    err = errors[0]
    loc = [str(x) for x in err.get("loc", ())[1:] if not isinstance(x, int) or err.get("type") != "json_invalid"]
    if err.get("type") == "json_invalid":
        return APIError(f"Malformed JSON body: {err.get('msg', '')} ({err.get('ctx', {}).get('error', '')}).")
    param = loc[0] if loc else None
    return APIError(f"{'.'.join(loc) or 'body'}: {err.get('msg', 'invalid value')}.", param=param)
