"""OpenAI request bodies, error bodies and their mapping onto SamplingParams (§11.9).

Mirrors ``vllm/entrypoints/openai/protocol.py`` (CompletionRequest, ChatCompletionRequest, ErrorResponse)
and the input checks of ``vllm/entrypoints/openai/serving_engine.py`` (``_validate_input``): the
fields minivllm serves, vLLM's extra fields (``top_k``, ``ignore_eos``, ``min_tokens``,
``stop_token_ids``, ``guided_choice``), and a 4xx naming the field for everything it does not serve
(``n > 1``, ``best_of``, ``echo``, ``suffix``, penalties, ``logit_bias``, tools). ``logprobs`` (completions: an
int k) and ``logprobs`` + ``top_logprobs`` (chat) become ``SamplingParams.logprobs``, vLLM's extra field
``prompt_logprobs`` (not with ``stream``) ``SamplingParams.prompt_logprobs``; both are checked against the
engine's ``max_logprobs`` (vLLM's ``check_logprobs`` validators and its Processor).
Integer fields are strict (JSON ``true`` is not 1, ``2.0`` is not 2), numbers must be finite
(Python's JSON parser reads ``NaN`` and ``Infinity``), text must be valid Unicode (no lone surrogates).
Unknown fields are accepted and logged as ignored, as vLLM does (``OpenAIBaseModel``'s
``__log_extra_fields__``). ``install_error_handlers`` makes every error an OpenAI error body, as
``vllm/entrypoints/openai/api_server.py`` does for validation errors.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from minivllm.sampling_params import SamplingParams
from minivllm.serving.errors import APIError
from minivllm.serving.request_caps import check_messages, check_prompt, check_sampling_fields

logger = logging.getLogger("minivllm.entrypoints")
SCALARS = (bool, int, float, str, type(None))
# A float field: ints are fine (temperature 1), bools and strings are not, nor NaN / inf.
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]


def _short(value: Any, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters, for messages (ASCII: a lone surrogate is escaped)."""
    text = ascii(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def unicode_problem(text: str, field: str) -> str | None:
    """Why ``text`` cannot be encoded as UTF-8 (a lone surrogate such as "\\ud800"), as a message naming
    ``field``; None when it is fine. The tokenizer would fail on it with a 500 otherwise."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return (
            f"{field} is not valid Unicode: {e.reason} {text[e.start : e.start + 1]!r} at character {e.start}; "
            "send UTF-8 text."
        )
    return None


def check_text(text: str, field: str) -> None:
    """APIError (400, param ``field``) unless ``text`` is valid Unicode; called before the tokenizer sees it."""
    problem = unicode_problem(text, field)
    if problem:
        raise APIError(problem, field)


def _valid_text(value: Any, field: str) -> Any:
    """For field validators: ValueError (a 400 through ``validation_error``) for a str or list[str] that is
    not valid Unicode."""
    for text in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
        if isinstance(text, str) and (problem := unicode_problem(text, field)):
            raise ValueError(problem)
    return value


class StreamOptions(BaseModel):
    include_usage: StrictBool = False


class _SamplingFields(BaseModel):
    """Fields shared by both endpoints; ``None`` means "not sent"."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    max_tokens: StrictInt | None = None
    temperature: Number | None = None
    top_p: Number | None = None
    n: StrictInt = 1
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    seed: StrictInt | None = None
    stop: str | list[str] | None = None
    presence_penalty: Number = 0.0
    frequency_penalty: Number = 0.0
    logit_bias: dict[str, Number] | None = None
    user: str | None = None
    # vLLM's extra sampling fields (sent as extra_body by the OpenAI client)
    top_k: StrictInt | None = None
    min_tokens: StrictInt = 0
    ignore_eos: StrictBool = False
    stop_token_ids: list[StrictInt] | None = None
    priority: StrictInt = 0
    guided_choice: list[str] | None = None  # SamplingParams bounds its size
    include_stop_str_in_output: StrictBool = False
    # vLLM 0.9+: prefix-cache blocks are shared only between requests with the same salt (tenants).
    cache_salt: Any = None
    prompt_logprobs: StrictInt | None = None  # vLLM's extra field: the prompt tokens' logprobs, not streamed

    @model_validator(mode="before")
    @classmethod
    def _caps(cls, body: Any) -> Any:
        """The server's caps (``request_caps``) on the raw JSON, before any field is built."""
        check_sampling_fields(body)
        return body

    @field_validator("stop", "model", "user")
    @classmethod
    def _plain_text(cls, value: Any, info: Any) -> Any:
        return _valid_text(value, info.field_name)

    @field_validator("guided_choice")
    @classmethod
    def _guided_choice_text(cls, value: Any) -> Any:
        if value is not None and not value:
            raise ValueError("guided_choice must have at least 1 choice, got [].")
        return _valid_text(value, "guided_choice")

    @field_validator("cache_salt")
    @classmethod
    def _cache_salt(cls, value: Any) -> Any:
        """A non-empty string when sent (vLLM's ``check_cache_salt_support``)."""
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError("cache_salt must be a non-empty string if provided")
        return _valid_text(value, "cache_salt")


class CompletionRequest(_SamplingFields):
    """``POST /v1/completions``: ``prompt`` is a string or a list of token ids."""

    prompt: str | list[StrictInt] | list[str] | list[list[StrictInt]]
    best_of: StrictInt | None = None
    logprobs: StrictInt | None = None
    echo: StrictBool = False
    suffix: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _prompt_caps(cls, body: Any) -> Any:
        check_prompt(body)
        return body

    @field_validator("prompt", mode="wrap")
    @classmethod
    def _prompt(cls, value: Any, handler: Any) -> Any:
        """One clear message instead of one per member of the union."""
        if not isinstance(value, (str, list)):
            raise ValueError(f"prompt must be a string or a list of token ids, got {type(value).__name__}.")
        try:
            value = handler(value)
        except ValidationError:
            bad = next((t for t in value if isinstance(t, bool) or not isinstance(t, (int, str, list))), None)
            got = f", got {_short(bad)} in the list" if bad is not None else ""
            raise ValueError(f"prompt must be a string or a list of token ids (integers >= 0){got}.") from None
        if isinstance(value, list) and len(value) == 1 and isinstance(value[0], (str, list)):
            value = value[0]  # a batch of one prompt is that prompt, as vLLM serves it
        return _valid_text(value, "prompt")


class TextPart(BaseModel):
    """One part of a message's content in the OpenAI list form; only text parts are served."""

    type: str
    text: str

    @field_validator("text")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return _valid_text(value, "messages")


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[TextPart] | None = None

    @field_validator("role")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return _valid_text(value, "messages")

    @field_validator("content", mode="wrap")
    @classmethod
    def _content(cls, value: Any, handler: Any) -> Any:
        """A string, None, or a list of text parts; one clear message for anything else."""
        if isinstance(value, list):
            for part in value:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                if kind != "text":
                    raise ValueError(f"only text content parts are supported (type 'text'), got {_short(kind)}.")
                _valid_text(part.get("text"), "messages")  # before the union hides why it failed
        elif value is not None and not isinstance(value, str):
            raise ValueError(f"message content must be a string or a list of text parts, got {type(value).__name__}.")
        return _valid_text(handler(value), "messages")

    @property
    def text(self) -> str:
        """The content as one string: text parts are joined with newlines, as vLLM joins them."""
        if isinstance(self.content, list):
            return "\n".join(p.text for p in self.content)
        return self.content or ""


class ChatCompletionRequest(_SamplingFields):
    """``POST /v1/chat/completions``."""

    messages: list[ChatMessage]
    max_completion_tokens: StrictInt | None = None
    logprobs: StrictBool = False
    top_logprobs: StrictInt | None = None
    tools: list[dict[str, Any]] | None = None

    @model_validator(mode="before")
    @classmethod
    def _message_caps(cls, body: Any) -> Any:
        """How many messages and characters, before 200,000 of them are built one by one."""
        check_messages(body)
        return body


UNSUPPORTED = {  # field -> (is it set to something minivllm cannot do?, why)
    "n": (lambda v: v != 1, "n must be 1: minivllm returns one completion per request"),
    "best_of": (lambda v: v not in (None, 1), "best_of is not supported"),
    "echo": (lambda v: v, "echo is not supported"),
    "suffix": (lambda v: v is not None, "suffix is not supported"),
    "presence_penalty": (lambda v: v != 0.0, "presence_penalty is not supported (must be 0)"),
    "frequency_penalty": (lambda v: v != 0.0, "frequency_penalty is not supported (must be 0)"),
    "logit_bias": (lambda v: bool(v), "logit_bias is not supported"),
    "tools": (lambda v: bool(v), "tools are not supported"),
}


def check_unsupported(req: _SamplingFields) -> None:
    for name, (is_set, why) in UNSUPPORTED.items():
        if name in type(req).model_fields and is_set(getattr(req, name)):
            raise APIError(f"{why}; got {name}={_short(getattr(req, name), 200)}.", param=name)


def ignored_fields(req: BaseModel) -> set[str]:
    """The fields of the body that no model field took (pydantic's ``model_extra``), nested ones as
    ``messages.name``: accepted and ignored, as vLLM does."""
    extra = set(req.model_extra or {})
    for name, value in req:
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, BaseModel):
                extra |= {f"{name}.{key}" for key in ignored_fields(item)}
    return extra


def completion_prompt(req: CompletionRequest, tokenizer: Any) -> tuple[list[int], str | None]:
    """(prompt token ids, prompt text or None). One prompt per request."""
    p = req.prompt
    if isinstance(p, str):
        if tokenizer is None:
            raise APIError("This model has no tokenizer: send the prompt as a list of token ids.", "prompt")
        check_text(p, "prompt")
        return list(tokenizer.encode(p)), p
    ids = [t for t in p if isinstance(t, int)]
    if len(ids) != len(p):
        raise APIError("Batched prompts are not supported: send one prompt (a string or token ids).", "prompt")
    return ids, None


@dataclass
class Limits:
    """What the served model allows: max_model_len, the vocabulary size, the most logprobs per token."""

    max_model_len: int
    vocab_size: int | None
    max_logprobs: int = 20  # the engine's ModelConfig.max_logprobs


def requested_logprobs(req: _SamplingFields, limits: Limits) -> int | None:
    """SamplingParams.logprobs for the request, or an APIError naming the field and its range.

    Completions: ``logprobs`` is k. Chat: ``logprobs: true`` asks for them, ``top_logprobs`` (default 0) is k;
    ``top_logprobs`` > 0 without ``logprobs`` is an error, as in vLLM and OpenAI."""
    if isinstance(req, ChatCompletionRequest):
        field, k = "top_logprobs", req.top_logprobs
        if k is not None and k > 0 and not req.logprobs:
            raise APIError("when using `top_logprobs`, `logprobs` must be set to true.", field)
        wanted = req.logprobs
        k = k or 0
    else:
        field, k = "logprobs", getattr(req, "logprobs", None)
        wanted = k is not None
    _check_range(field, k, limits)
    return k if wanted else None


def requested_prompt_logprobs(req: _SamplingFields, limits: Limits) -> int | None:
    """SamplingParams.prompt_logprobs: in range, and not with ``stream`` (vLLM's ``check_logprobs``)."""
    k = req.prompt_logprobs
    if k is not None and req.stream:
        raise APIError("`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs")
    _check_range("prompt_logprobs", k, limits)
    return k


def _check_range(field: str, k: int | None, limits: Limits) -> None:
    if k is not None and not 0 <= k <= limits.max_logprobs:
        raise APIError(f"{field} must be in [0, {limits.max_logprobs}] (the server's max_logprobs), got {k}.", field)


def _max_tokens(req: _SamplingFields) -> tuple[str, int | None]:
    """(the field that sets the output length, its value): chat's ``max_completion_tokens`` wins over the
    deprecated ``max_tokens`` when sent, even as 0 (which is then refused, not ignored)."""
    mct = getattr(req, "max_completion_tokens", None)
    return ("max_completion_tokens", mct) if mct is not None else ("max_tokens", req.max_tokens)


def build_sampling_params(
    req: _SamplingFields, num_prompt_tokens: int, limits: Limits, prompt_field: str, default_max_tokens: int | None
) -> SamplingParams:
    """SamplingParams for a validated request; prompt length and max_tokens are checked against max_model_len
    as vLLM's ``_validate_input`` does (its error text), ``stop_token_ids`` against the vocabulary. Logs the
    fields the request sent that nothing reads."""
    check_unsupported(req)
    ignored = ignored_fields(req)
    if ignored:
        logger.warning("The following fields were present in the request but ignored: %s", ignored)
    mml = limits.max_model_len
    if num_prompt_tokens == 0:
        raise APIError("The prompt is empty; it needs at least 1 token.", prompt_field)
    if num_prompt_tokens >= mml:
        raise APIError(
            f"This model's maximum context length is {mml} tokens. However, your prompt has "
            f"{num_prompt_tokens} tokens; it must be shorter than {mml} to leave room for output.",
            prompt_field,
        )
    field, max_tokens = _max_tokens(req)
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
    kwargs: dict[str, Any] = dict(
        logprobs=requested_logprobs(req, limits),
        prompt_logprobs=requested_prompt_logprobs(req, limits),
        max_tokens=max_tokens,
        ignore_eos=req.ignore_eos,
        min_tokens=req.min_tokens,
        include_stop_str_in_output=req.include_stop_str_in_output,
    )
    for name in ("temperature", "top_p", "top_k", "seed", "stop_token_ids", "guided_choice", "stop"):
        if getattr(req, name) is not None:
            kwargs[name] = getattr(req, name)
    try:
        params = SamplingParams(**kwargs)
    except (ValueError, TypeError) as e:
        first = str(e).split(" ", 1)[0]
        raise APIError(str(e), param=first if first in kwargs else None) from e
    check_token_ids(params.stop_token_ids, limits, "stop_token_ids", "stop_token_ids entry")
    return params


def check_token_ids(ids: list[int], limits: Limits, field: str, what: str = "Token id") -> None:
    """Token ids (of the prompt, or ``stop_token_ids``) must exist in the vocabulary; APIError naming ``field``."""
    bad = [t for t in ids if t < 0 or (limits.vocab_size is not None and t >= limits.vocab_size)]
    if bad:
        raise APIError(f"{what} {bad[0]} is out of range; allowed 0..{(limits.vocab_size or 1) - 1}.", field)


def _got(err: dict[str, Any]) -> str:
    value = err.get("input")
    return f", got {_short(value)}" if isinstance(value, SCALARS) else ""


def validation_error(errors: list[dict[str, Any]]) -> APIError:
    """A FastAPI RequestValidationError (malformed JSON, wrong types, missing fields) as an APIError."""
    if not errors:
        return APIError("Invalid request body.")
    err = errors[0]
    kind = err.get("type")
    loc = [str(x) for x in err.get("loc", ())[1:] if not isinstance(x, int) or kind != "json_invalid"]
    if kind == "json_invalid":
        return APIError(f"Malformed JSON body: {err.get('msg', '')} ({err.get('ctx', {}).get('error', '')}).")
    if not loc:  # the body as a whole
        body = err.get("input")
        if kind == "missing":
            return APIError("The request body is empty; send a JSON object.")
        if isinstance(body, (bytes, bytearray)):
            return APIError("The request body is not JSON: send a JSON object with Content-Type: application/json.")
        if kind in ("model_attributes_type", "dict_type", "model_type"):
            return APIError(f"The request body must be a JSON object, got {type(body).__name__}.")
    param = loc[0] if loc else None
    if kind == "value_error" and "error" in err.get("ctx", {}):  # our validators' own message, naming the field
        return APIError(f"{err['ctx']['error']}", param=param)
    return APIError(f"{'.'.join(loc) or 'body'}: {err.get('msg', 'invalid value')}{_got(err)}.", param=param)


def error_response(err: APIError) -> Any:
    """The JSON response of an APIError, as ASCII (a lone surrogate it quotes cannot make the error itself fail
    to encode, as Starlette's JSONResponse would)."""
    from starlette.responses import Response

    body = json.dumps(err.body(), ensure_ascii=True).encode("ascii")
    return Response(body, status_code=err.status, media_type="application/json", headers=err.headers)


def http_error(method: str, path: str, status: int, detail: Any, headers: dict[str, str] | None) -> APIError:
    """Starlette's HTTPException (404 unknown route, 405 wrong method, FastAPI's 400 for an undecodable body)
    as an APIError."""
    if status == 404:
        return APIError(f"Not found: there is no route {path!r} ({method} {path}).", status=404, code="not_found")
    if status == 405:
        allowed = (headers or {}).get("allow") or (headers or {}).get("Allow") or ""
        return APIError(
            f"Method {method} is not allowed on {path!r}" + (f"; allowed: {allowed}." if allowed else "."),
            status=405,
            code="method_not_allowed",
            headers=headers,
        )
    return APIError(str(detail), status=status, headers=headers)


def install_error_handlers(app: Any) -> None:
    """Every error as an OpenAI error body: APIError, RequestValidationError (bad bodies, 400) and Starlette's
    HTTPException (404, 405, ...). vLLM's ``api_server.py`` maps RequestValidationError the same way."""
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException

    async def on_api_error(_: Any, e: APIError) -> Any:
        return error_response(e)

    async def on_bad_body(_: Any, e: RequestValidationError) -> Any:
        return error_response(validation_error(list(e.errors())))

    async def on_http_error(request: Any, e: HTTPException) -> Any:
        err = http_error(request.method, request.url.path, e.status_code, e.detail, dict(e.headers or {}))
        if e.status_code == 400 and e.__cause__ is not None:  # FastAPI's "There was an error parsing the body"
            err.message = f"{e.detail}: {type(e.__cause__).__name__}: {e.__cause__}."
        return error_response(err)

    handlers: list[tuple[type[Exception], Callable[[Any, Any], Awaitable[Any]]]] = [
        (APIError, on_api_error),
        (RequestValidationError, on_bad_body),
        (HTTPException, on_http_error),
    ]
    for exc, handler in handlers:
        app.add_exception_handler(exc, handler)
