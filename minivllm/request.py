"""Request: one prompt's whole life inside the engine (§11.4, §11.4.3).

Mirrors ``vllm/v1/request.py`` (v0.8.5, plus ``priority`` / ``arrival_time`` /
``cache_salt`` from 0.9.x). The single progress integer is ``num_computed_tokens``: prefill,
chunking, decode and recovery after preemption are all just this number chasing
``num_tokens_with_spec``. There is no phase field and no chunk counter.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, TypeVar, overload

from minivllm.sampling_params import SamplingParams

T = TypeVar("T")


class ConstantList(Sequence[T]):
    """A read-only live view of a list (``vllm/v1/utils.py``).

    Reads see later appends to the underlying list; every mutation raises, so
    outside code can look at a request's tokens but never change them.
    """

    def __init__(self, x: list[T]) -> None:
        self._x = x

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("Cannot modify a constant list")

    append = extend = insert = pop = remove = clear = __setitem__ = __delitem__ = _refuse

    @overload
    def __getitem__(self, item: int) -> T: ...

    @overload
    def __getitem__(self, item: slice) -> list[T]: ...

    def __getitem__(self, item: int | slice) -> T | list[T]:  # int -> element, slice -> plain list
        return self._x[item]

    def __iter__(self) -> Iterator[T]:
        return iter(self._x)

    def __contains__(self, item: object) -> bool:
        return item in self._x

    def __len__(self) -> int:
        return len(self._x)

    def index(self, item: Any, start: int = 0, stop: int | None = None) -> int:
        return self._x.index(item, start, len(self._x) if stop is None else stop)

    def __repr__(self) -> str:
        return f"ConstantList({self._x})"


class Grammar(Protocol):
    """What the scheduler asks of a request's grammar (§11.4.4): is it compiled yet?

    A request that has one starts in WAITING_FOR_FSM and is passed over by the
    waiting loop until ``is_ready()``; ``error`` is set when compiling failed (the
    request then fails alone). While decoding, the scheduler sends the allowed
    tokens to the runner and advances the grammar with each sampled token.
    """

    error: str | None

    def is_ready(self) -> bool: ...

    def allowed_token_ids(self) -> list[int]: ...  # what the next token may be

    def accept_token(self, token_id: int) -> None: ...  # advance past a sampled token


class RequestStatus(enum.IntEnum):
    """Request states, in vLLM's order: anything above PREEMPTED is finished."""

    WAITING = enum.auto()
    WAITING_FOR_FSM = enum.auto()
    RUNNING = enum.auto()
    PREEMPTED = enum.auto()
    FINISHED_STOPPED = enum.auto()
    FINISHED_LENGTH_CAPPED = enum.auto()
    FINISHED_ABORTED = enum.auto()
    FINISHED_IGNORED = enum.auto()

    @staticmethod
    def is_finished(status: RequestStatus) -> bool:
        return status > RequestStatus.PREEMPTED

    @staticmethod
    def get_finished_reason(status: RequestStatus) -> str | None:
        return _FINISHED_REASON_MAP.get(status)


_FINISHED_REASON_MAP = {
    RequestStatus.FINISHED_STOPPED: "stop",
    RequestStatus.FINISHED_LENGTH_CAPPED: "length",
    RequestStatus.FINISHED_ABORTED: "abort",
    RequestStatus.FINISHED_IGNORED: "length",
}


class Request:
    """The scheduler's view of one request: token ids and one progress integer."""

    def __init__(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        sampling_params: SamplingParams,
        eos_token_id: int | None = None,
        arrival_time: float = 0.0,
        priority: int = 0,
        grammar: Grammar | None = None,
        cache_salt: str | None = None,
    ) -> None:
        self.request_id = request_id
        self.sampling_params = sampling_params
        self.eos_token_id = eos_token_id
        self.arrival_time = arrival_time
        self.priority = priority
        # vLLM 0.9+: mixed into the first block's prefix-cache hash, so requests with different salts
        # (tenants) never share cached blocks (``minivllm.core.kv_cache_utils.block_extra_keys``).
        self.cache_salt = cache_salt
        # §11.4.4: a request with a grammar waits until the grammar is compiled.
        self.grammar = grammar
        self.status = RequestStatus.WAITING_FOR_FSM if grammar is not None else RequestStatus.WAITING
        self.stop_reason: int | str | None = None
        self.max_tokens = sampling_params.max_tokens

        self.prompt_token_ids = list(prompt_token_ids)
        self.num_prompt_tokens = len(self.prompt_token_ids)
        self._output_token_ids: list[int] = []
        self._all_token_ids: list[int] = list(self.prompt_token_ids)  # a copy: outputs go here too
        self.spec_token_ids: list[int] = []
        self.num_computed_tokens = 0
        self.num_cached_tokens = -1  # prefix-hit tokens at first admission (vLLM 0.9.x)
        self.num_preemptions = 0
        # Async scheduling (vLLM 0.10, ``minivllm.core.async_scheduler``): tokens scheduled to be sampled by a step
        # still in flight, whose ids the scheduler does not know yet. Always 0 with synchronous scheduling.
        self.num_output_placeholders = 0

        self.output_token_ids = ConstantList(self._output_token_ids)
        self.all_token_ids = ConstantList(self._all_token_ids)

    def append_output_token_ids(self, token_ids: int | list[int]) -> None:
        """The only mutation of a request's tokens: append to outputs and to all tokens."""
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        self._output_token_ids.extend(token_ids)
        self._all_token_ids.extend(token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self._all_token_ids)

    @property
    def num_tokens_with_spec(self) -> int:
        return len(self._all_token_ids) + len(self.spec_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self._output_token_ids)

    def is_finished(self) -> bool:
        return RequestStatus.is_finished(self.status)

    def get_finished_reason(self) -> str | None:
        return RequestStatus.get_finished_reason(self.status)

    def __repr__(self) -> str:
        return (
            f"Request({self.request_id!r}, {self.status.name}, computed={self.num_computed_tokens}"
            f"/{self.num_tokens_with_spec})"
        )


def check_stop(request: Request, max_model_len: int) -> bool:
    """Decide whether ``request`` is done, in v0.8.5's order (``vllm/v1/core/sched/utils.py``).

    Length first (so an EOS that is also the max_tokens-th token finishes as
    "length"), then EOS, then the stop token ids.
    """
    if request.num_tokens >= max_model_len or request.num_output_tokens >= request.max_tokens:
        request.status = RequestStatus.FINISHED_LENGTH_CAPPED
        return True
    params = request.sampling_params
    last = request.output_token_ids[-1]
    if not params.ignore_eos and last == request.eos_token_id:
        request.status = RequestStatus.FINISHED_STOPPED
        return True
    if last in params.stop_token_id_set:  # a set: O(1), however many stop ids the request sent
        request.status = RequestStatus.FINISHED_STOPPED
        request.stop_reason = last
        return True
    return False
