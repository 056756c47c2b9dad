"""AsyncEngine: one background thread steps the LLMEngine; asyncio handlers stream its outputs (§11.9).

Mirrors the split of ``vllm/v1/engine/async_llm.py`` (``AsyncLLM.generate``: one asyncio queue per
request, ``abort`` when the caller goes away) and ``vllm/v1/engine/core.py`` (``EngineCoreProc``: a
busy loop that drains an input queue, then steps while there is work). vLLM runs the core in another
process; minivllm runs it in a thread (torch releases the GIL while it computes), which keeps the
engine single-owner: only the engine thread touches the LLMEngine, its scheduler and its trace.

* Commands (add, abort, call) go in through a thread-safe ``queue.SimpleQueue`` and run between steps,
  so ``set_scheduling`` and ``prometheus_text`` never see a half-done step.
* Each step's new tokens go out, detokenized incrementally, as one ``Delta`` per request through
  ``loop.call_soon_threadsafe`` into that request's ``asyncio.Queue``.
* The trace is bounded for a long-running server: past ``max_trace_steps`` the oldest half of the
  steps, and the finished requests older than what is left, are dropped (the /metrics counters live in
  ``PrometheusStatLogger``, which watched them go by, so they keep counting).
* No request's failure stops the loop: the engine contains a failed step (``minivllm.core.rollback``), a
  caller that went away (a cancelled future) is skipped, and a closed event loop is ignored. If anything
  still escapes, ``dead`` says why, every stream and waiting command gets the error, and ``on_dead`` fires.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

from minivllm.engine.detokenizer import REPLACEMENT_CHAR, IncrementalDetokenizer
from minivllm.engine.llm_engine import LLMEngine
from minivllm.engine.output_processor import stopped_by_token
from minivllm.engine.stop_strings import hold_back
from minivllm.outputs import RequestOutput
from minivllm.sampling_params import SamplingParams
from minivllm.sequence import Logprob
from minivllm.serving.state_snapshot import StateSnapshots

logger = logging.getLogger("minivllm.entrypoints")


SHUTTING_DOWN = "server shutting down"


class EngineDeadError(RuntimeError):
    """The engine loop has stopped (vLLM's ``EngineDeadError``): no request can be served any more."""


@dataclass
class Delta:
    """What one step added to one request."""

    text: str
    token_ids: list[int]
    num_output_tokens: int  # so far
    finished: bool = False
    finish_reason: str | None = None
    error: str | None = None
    stop_reason: int | str | None = None  # with finish_reason "stop": the stop string or stop token id (vLLM's)
    error_status: int = 500  # the HTTP status of ``error``: 503 when the server is shutting down
    logprobs: list[dict[int, Logprob]] | None = None  # one per token of ``token_ids``, with SamplingParams.logprobs
    prompt_logprobs: list[dict[int, Logprob] | None] | None = None  # the request's, in its first delta with tokens


@dataclass
class _Stream:
    queue: asyncio.Queue
    loop: asyncio.AbstractEventLoop
    detokenizer: IncrementalDetokenizer
    num_sent: int = 0
    # With stop strings the text comes from the engine's check (cut at a stop string), and the last
    # stop_hold characters wait until no stop string can begin in them (vLLM's detokenizer holds them back too).
    stop_hold: int | None = None
    num_chars_sent: int = 0
    include_stop_str_in_output: bool = False
    ended: bool = False  # its last delta has been put (by the engine, or by ``end_streams`` at shutdown)

    def put(self, delta: Delta) -> None:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, delta)
        except RuntimeError:  # the event loop is closed (server shutting down): nobody is listening
            pass


@dataclass
class _Command:
    kind: str  # "add" | "abort" | "call"
    args: tuple = ()
    future: concurrent.futures.Future | None = None

    def cancelled(self) -> bool:
        """The caller went away before the command ran (its asyncio task was cancelled)."""
        return self.future is not None and self.future.cancelled()

    def settle(self, result: Any = None, error: BaseException | None = None) -> None:
        """Hand the result back, unless the caller has gone (a cancelled future takes no result)."""
        if self.future is None:
            return
        try:
            if error is None:
                self.future.set_result(result)
            else:
                self.future.set_exception(error)
        except concurrent.futures.InvalidStateError:
            pass  # cancelled meanwhile


@dataclass
class AsyncEngine:
    """Owns the engine thread. ``start()`` once, then ``generate()`` from any asyncio loop."""

    engine: LLMEngine
    max_trace_steps: int = 4_000
    idle_poll_s: float = 0.05
    clock_offset: float = 0.0  # time.perf_counter() - engine clock, set by start()
    _inbox: queue.SimpleQueue = field(default_factory=queue.SimpleQueue, init=False)
    _streams: dict[str, _Stream] = field(default_factory=dict, init=False)
    on_dead: Callable[[str], None] | None = None  # called (on the engine thread) if the loop itself stops
    # Built on the engine thread after every step and every batch of commands (``state_snapshot``); readers
    # take ``snapshot`` as it is, without waiting behind the step in progress.
    snapshot_fn: Callable[[LLMEngine], dict[str, Any]] | None = field(default_factory=lambda: StateSnapshots().build)
    snapshot: dict[str, Any] | None = field(default=None, init=False)
    step_started: float | None = field(default=None, init=False)  # perf_counter() of the step running, or None
    dead: str | None = field(default=None, init=False)  # why the loop stopped, once it has
    _thread: threading.Thread | None = field(default=None, init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    # Shutdown (SIGTERM): new requests are refused at once; those in flight get ``shutdown_grace_s`` to finish,
    # then end with the "server shutting down" error (``end_streams``, from the event loop, so a long step in
    # progress cannot delay it past uvicorn's own graceful-shutdown timeout).
    closing: bool = field(default=False, init=False)
    num_ended_at_shutdown: int = field(default=0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)  # guards _streams

    # ------------------------------------------------------------------ asyncio side
    def start(self) -> None:
        # Arrival times are taken when the HTTP request arrives (as vLLM's API server does), on the engine's clock.
        self.clock_offset = time.perf_counter() - self.engine.clock.now()
        self.engine.trace.max_steps = self.max_trace_steps  # a server runs forever: keep the trace bounded
        self._publish()  # the first snapshot, before any step (still on the caller's thread: nothing runs yet)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="minivllm-engine", daemon=True)
            self._thread.start()

    @property
    def alive(self) -> bool:
        """The engine thread is running and has not stopped on an error (``/health``)."""
        return self.dead is None and self._thread is not None and self._thread.is_alive()

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _check_alive(self) -> None:
        if self.dead is not None:
            raise EngineDeadError(f"the engine loop has stopped: {self.dead}")
        if self.closing:
            raise EngineDeadError(SHUTTING_DOWN)

    async def close(self, grace_s: float) -> int:
        """Stop taking requests; let those in flight finish for up to ``grace_s`` seconds, then end the rest with
        the "server shutting down" error (each stream's last delta) and abort them. Returns how many were ended."""
        with self._lock:
            self.closing = True
        deadline = time.perf_counter() + grace_s
        while self._streams and time.perf_counter() < deadline:
            await asyncio.sleep(0.05)
        return self.end_streams(SHUTTING_DOWN)

    def end_streams(self, message: str) -> int:
        """From any thread: every open stream gets its last delta (``message``, 503) and its request an abort."""
        with self._lock:
            streams = [(r, s) for r, s in self._streams.items() if not s.ended]
            for _, stream in streams:
                stream.ended = True
        for request_id, stream in streams:
            stream.put(Delta("", [], stream.num_sent, True, "abort", error=message, error_status=503))
            self.abort(request_id)
        self.num_ended_at_shutdown += len(streams)
        return len(streams)

    async def call(self, fn: Callable[[LLMEngine], Any]) -> Any:
        """Run ``fn(engine)`` on the engine thread between two steps; return its result (or raise)."""
        self._check_alive()
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._inbox.put(_Command("call", (fn,), future))
        return await asyncio.wrap_future(future)

    async def generate(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        params: SamplingParams,
        priority: int = 0,
        cache_salt: str | None = None,
    ) -> AsyncGenerator[Delta, None]:  # a generator, not just an iterator: callers ``aclosing`` it
        """Queue a request and yield its deltas; the engine's ValueError comes out of the first ``anext``.
        Leaving early (the client went away, or the task was cancelled) aborts the request. ``cache_salt``:
        as ``LLMEngine.add_request``'s (prefix-cache blocks shared within one salt only)."""
        self._check_alive()
        arrival = time.perf_counter() - self.clock_offset
        stream = _Stream(asyncio.Queue(), asyncio.get_running_loop(), IncrementalDetokenizer(self.engine.tokenizer))
        stream.stop_hold = hold_back(params)
        stream.include_stop_str_in_output = params.include_stop_str_in_output
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._inbox.put(
            _Command("add", (request_id, prompt_token_ids, params, priority, arrival, stream, cache_salt), future)
        )
        finished = False
        try:
            await asyncio.wrap_future(future)  # inside try: cancelled while queued still aborts
            while not finished:
                delta = await stream.queue.get()
                finished = delta.finished
                yield delta
        finally:
            if not finished:
                self.abort(request_id)

    def abort(self, request_id: str) -> None:
        self._inbox.put(_Command("abort", (request_id,)))

    # ------------------------------------------------------------------ engine thread
    def _run(self) -> None:
        """The loop. A request's failure inside a step is the engine's to contain (it aborts that request
        alone, ``minivllm.core.rollback``); anything that still escapes means the engine's own state is in
        doubt: every stream gets the error, ``dead`` says why, and ``on_dead`` lets the server exit."""
        engine = self.engine
        try:
            while not self._stop.is_set():
                if self._drain(block=not engine.has_unfinished_requests()):
                    self._publish()  # settings or queues changed
                if not engine.has_unfinished_requests():
                    continue
                self.step_started = time.perf_counter()
                for out in engine.step():
                    self._dispatch(out)
                self._publish()
                self.step_started = None
        except BaseException as e:
            logger.exception("the engine loop stopped")
            self.dead = f"{type(e).__name__}: {e}"
        self._fail_all(SHUTTING_DOWN if self.dead is None else f"the engine loop stopped: {self.dead}")
        self._fail_inbox()
        if self.dead is not None and self.on_dead is not None:
            self.on_dead(self.dead)

    def _drain(self, block: bool) -> bool:
        """Run the queued commands; True if there were any."""
        try:
            cmd = self._inbox.get(timeout=self.idle_poll_s) if block else self._inbox.get_nowait()
        except queue.Empty:
            return False
        while True:
            self._handle(cmd)
            try:
                cmd = self._inbox.get_nowait()
            except queue.Empty:
                return True

    def _publish(self) -> None:
        """Replace ``snapshot`` with a new one (one reference assignment: readers see the old or the new)."""
        if self.snapshot_fn is not None:
            self.snapshot = self.snapshot_fn(self.engine)

    def _handle(self, cmd: _Command) -> None:
        """Run one command. Its errors go back to its caller; a caller that has gone gets nothing."""
        engine = self.engine
        if cmd.cancelled():
            return  # e.g. a client that disconnected while its request was queued: never added
        try:
            if cmd.kind == "add":
                request_id, ids, params, priority, arrival, stream, salt = cmd.args
                with self._lock:  # with ``close``: a request is refused, or in _streams when it ends them
                    if self.closing:
                        raise EngineDeadError(SHUTTING_DOWN)
                    engine.add_request(
                        request_id, ids, params, arrival_time=arrival, priority=priority, cache_salt=salt
                    )
                    self._streams[request_id] = stream
                result = None
            elif cmd.kind == "abort":
                (request_id,) = cmd.args
                engine.abort_request(request_id)
                engine.output_processor.pop_output(request_id)
                with self._lock:
                    self._streams.pop(request_id, None)
                result = None
            else:
                result = cmd.args[0](engine)
        except Exception as e:
            if cmd.future is None:
                logger.exception("engine command %s failed", cmd.kind)
            cmd.settle(error=e)
            return
        cmd.settle(result)

    def _fail_inbox(self) -> None:
        """Commands nobody will run any more: their callers get the reason instead of waiting forever."""
        while True:
            try:
                cmd = self._inbox.get_nowait()
            except queue.Empty:
                return
            cmd.settle(error=EngineDeadError(self.dead or SHUTTING_DOWN))

    def _dispatch(self, out: RequestOutput) -> None:
        stream = self._streams.get(out.request_id)
        if stream is None or stream.ended:
            return
        completion = out.outputs[0]
        new_ids = completion.token_ids[stream.num_sent :]
        logprobs = None if completion.logprobs is None else completion.logprobs[stream.num_sent :]
        prompt_logprobs = out.prompt_logprobs if stream.num_sent == 0 and new_ids else None
        stream.num_sent = len(completion.token_ids)
        if stream.stop_hold is None:
            drop = stopped_by_token(
                out.finished, completion.finish_reason, completion.stop_reason, stream.include_stop_str_in_output
            )  # the stop token's text is left out, as vLLM's detokenizer does
            text = stream.detokenizer.update(new_ids[:-1] if drop else new_ids, finished=out.finished)
        else:
            text = self._stop_string_text(stream, completion.text, out.finished)
        # An abort the engine decided (a failed step, a grammar that failed) carries its reason.
        reason = completion.stop_reason
        error = reason if completion.finish_reason == "abort" and isinstance(reason, str) else None
        stop_reason = reason if completion.finish_reason == "stop" else None
        delta = Delta(
            text,
            new_ids,
            stream.num_sent,
            out.finished,
            completion.finish_reason,
            error,
            stop_reason,
            logprobs=logprobs,
            prompt_logprobs=prompt_logprobs,
        )
        stream.put(delta)
        if out.finished:
            stream.ended = True
            with self._lock:
                del self._streams[out.request_id]
            self.engine.output_processor.pop_output(out.request_id)

    @staticmethod
    def _stop_string_text(stream: _Stream, full: str, finished: bool) -> str:
        """The new text of a request with stop strings: ``full`` is the engine's decode so far (cut at the stop
        string once one is found). Until it finishes, the last ``stop_hold`` characters and a half-decoded
        character at the end (U+FFFD) are held back."""
        end = len(full)
        if not finished:
            assert stream.stop_hold is not None  # only streams with stop strings come here
            end = max(stream.num_chars_sent, len(full.rstrip(REPLACEMENT_CHAR)) - stream.stop_hold)
        text, stream.num_chars_sent = full[stream.num_chars_sent : end], end
        return text

    def _fail_all(self, message: str) -> None:
        with self._lock:
            streams = list(self._streams.items())
            self._streams.clear()
        for request_id, stream in streams:
            try:
                self.engine.abort_request(request_id)
            except Exception:  # the engine may be what failed: the streams must end all the same
                logger.exception("abort of %s failed", request_id)
            self.engine.output_processor.pop_output(request_id)
            if not stream.ended:
                status = 503 if message == SHUTTING_DOWN else 500
                stream.put(Delta("", [], stream.num_sent, True, "abort", error=message, error_status=status))
