"""``python -m minivllm serve``: an OpenAI-compatible HTTP server over one LLMEngine (§11.9).

Mirrors ``vllm/entrypoints/openai/api_server.py`` (``vllm serve``): the same routes (``/v1/completions``,
``/v1/chat/completions``, ``/v1/models``, ``/health``, ``/metrics``), vLLM's engine flags
(``--max-num-batched-tokens``, ``--enable-chunked-prefill`` / ``--no-enable-chunked-prefill``, ...),
OpenAI-style error bodies, and vLLM's Prometheus metric names (``minivllm.serving.metrics.prometheus``). One
background thread steps the engine (``AsyncEngine``); the live demo page is at ``/`` (``demo_routes``).

Example: ``python -m minivllm serve --model smollm2 --port 8000 --demo-preset`` (``demo_preset``), then
open http://127.0.0.1:8000/ or ``curl http://127.0.0.1:8000/v1/completions -H 'Content-Type:
application/json' -d '{"prompt": "Hello", "max_tokens": 16, "stream": true}'``.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import time
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from minivllm.engine import arg_utils
from minivllm.engine.llm_engine import LLMEngine
from minivllm.serving import demo_chats, demo_routes
from minivllm.serving.admin_guard import AdminGuard, AdminLimits, allowed_hosts
from minivllm.serving.async_engine import AsyncEngine, EngineDeadError
from minivllm.serving.body_limit import DEFAULT_MAX_BODY_BYTES, BodySizeLimit
from minivllm.serving.demo_preset import DEMO_PRESET_HELP, parse_with_preset
from minivllm.serving.metrics.loggers import PrometheusStatLogger
from minivllm.serving.protocol import (
    APIError,
    ChatCompletionRequest,
    CompletionRequest,
    Limits,
    error_response,
    install_error_handlers,
)
from minivllm.serving.request_caps import DEFAULT_MAX_CHAT_MESSAGES, CapsContext, DemoLimits, RequestCaps
from minivllm.serving.server_args import add_request_cap_args, check_server_args, request_caps
from minivllm.serving.serving import FALLBACK_CHAT_TEMPLATE, ServerState, max_prompt_chars, serve

logger = logging.getLogger("minivllm.entrypoints")


def build_app(
    engine: AsyncEngine,
    model_name: str,
    admin_guard: AdminGuard | None = None,
    max_request_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    caps: RequestCaps | None = None,
    demo_limits: DemoLimits | None = None,
) -> FastAPI:
    """The ASGI app around a (not yet started) AsyncEngine; the engine thread runs while the app does."""
    llm = engine.engine
    sc = llm.scheduler.scheduler_config
    max_model_len, budget, max_num_seqs = sc.max_model_len, sc.max_num_batched_tokens, sc.max_num_seqs
    if max_model_len is None or budget is None or max_num_seqs is None:  # SchedulerConfig.__post_init__ sets them
        raise ValueError(
            "build_app needs a resolved SchedulerConfig: max_model_len, max_num_batched_tokens and max_num_seqs "
            f"must be set (got {max_model_len}, {budget}, {max_num_seqs})."
        )
    limits = Limits(max_model_len, llm.vocab_size, llm.config.model_config.max_logprobs)
    caps = model_caps(caps or RequestCaps(), llm.tokenizer, max_model_len)
    admin_limits = AdminLimits.from_start(budget, max_num_seqs, max_model_len)
    state = ServerState(
        engine,
        model_name,
        limits,
        llm.tokenizer,
        int(time.time()),
        admin_limits,
        admin_guard=admin_guard or AdminGuard(),
        max_prompt_chars=caps.max_prompt_chars,
        demo_limits=demo_limits or DemoLimits(),
    )
    if sc.enable_chunked_prefill:
        state.chunked_budget = budget
    if llm.tokenizer is not None and not getattr(llm.tokenizer, "chat_template", None):
        logger.warning("The tokenizer has no chat template; chat uses the fallback %r.", FALLBACK_CHAT_TEMPLATE)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        engine.start()
        yield
        engine.shutdown()

    app = FastAPI(title="minivllm", lifespan=lifespan)
    app.state.minivllm = state

    install_error_handlers(app)  # every error in the OpenAI shape: APIError, bad bodies, 404/405/413

    @app.exception_handler(EngineDeadError)
    async def engine_dead(_: Request, e: EngineDeadError) -> JSONResponse:
        code = "server_shutting_down" if engine.closing and engine.dead is None else "engine_dead"
        return error_response(APIError(str(e), status=503, code=code))

    @app.get("/health")
    async def health() -> Response:
        """200 while the engine loop runs; 503 once it has stopped (vLLM: EngineDeadError)."""
        return Response(status_code=200 if engine.alive else 503)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        card = {
            "id": model_name,
            "object": "model",
            "created": state.created,
            "owned_by": "minivllm",
            "root": llm.config.model_config.model,
            "max_model_len": limits.max_model_len,
        }
        return {"object": "list", "data": [card]}

    stats = PrometheusStatLogger(model_name=model_name)
    llm.trace.observers.append(stats)  # counters and histograms kept step by step: a scrape costs O(1)

    def render(e: LLMEngine) -> str:
        s = e.scheduler
        return stats.render(len(s.running), len(s.waiting), s.kv_cache_manager.usage)  # live gauges

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        text = await engine.call(render)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.post("/v1/completions")
    async def completions(req: CompletionRequest, raw: Request) -> Response:
        return await serve(state, raw, req)

    @app.post("/v1/chat/completions")
    async def chat_completions(req: ChatCompletionRequest, raw: Request) -> Response:
        return await serve(state, raw, req)

    app.include_router(demo_routes.router)
    app.include_router(demo_chats.router)
    app.include_router(demo_routes.admin)
    app.add_middleware(BodySizeLimit, max_bytes=max_request_body_bytes)
    app.add_middleware(CapsContext, caps=caps)  # the request models check these caps on the raw JSON
    return app


def model_caps(caps: RequestCaps, tokenizer: Any, max_model_len: int) -> RequestCaps:
    """``caps`` with the model's defaults filled in where the flags left them out: the characters no longer
    text fits in, the messages no more of fit in max_model_len (each costs the template's tokens)."""
    chars = caps.max_prompt_chars if caps.max_prompt_chars is not None else max_prompt_chars(tokenizer, max_model_len)
    messages = caps.max_chat_messages
    if messages == DEFAULT_MAX_CHAT_MESSAGES and tokenizer is not None:
        messages = max(1, max_model_len // template_tokens_per_message(tokenizer))
    return dataclasses.replace(
        caps, max_prompt_chars=chars, max_chat_messages=messages, max_prompt_tokens=max_model_len - 1
    )


def template_tokens_per_message(tokenizer: Any) -> int:
    """The tokens one more empty user message adds to a templated chat (at least 1)."""
    template = None if getattr(tokenizer, "chat_template", None) else FALLBACK_CHAT_TEMPLATE

    def size(n: int) -> int:
        msgs = [{"role": "user", "content": ""}] * n
        text = tokenizer.apply_chat_template(msgs, chat_template=template, add_generation_prompt=True, tokenize=False)
        return len(tokenizer.encode(text, add_special_tokens=False))

    return max(1, size(2) - size(1))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m minivllm serve", description=__doc__.splitlines()[0])
    p.add_argument("--served-model-name", default=None, help="the name clients send as 'model' (default: --model)")
    p.add_argument("--host", default="127.0.0.1", help="0.0.0.0 to accept other machines")
    p.add_argument("--port", type=int, default=8000)
    arg_utils.add_engine_args(p)  # --model and every other engine flag, vLLM's names
    add_request_cap_args(p)  # the caps on one request, /demo/chats' bounds (``server_args``)
    p.add_argument(
        "--max-trace-steps",
        type=int,
        default=4_000,
        help="bound on the steps the trace keeps (/admin/state, /admin/trace; /metrics does not need them)",
    )
    p.add_argument(
        "--max-request-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        help="larger request bodies are refused (413) before they are read",
    )
    admin = p.add_argument_group("the /admin endpoints (runtime scheduler settings, state, trace; the demo page)")
    admin.add_argument("--disable-admin", action="store_true", help="switch /admin off (404)")
    admin.add_argument(
        "--admin-token",
        default=None,
        help="require 'Authorization: Bearer TOKEN' on /admin (the demo page: open /?admin_token=TOKEN)",
    )
    admin.add_argument(
        "--allowed-hosts",
        default=None,
        help="comma-separated Host/Origin names /admin accepts besides localhost names ('*': any)",
    )
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    p.add_argument("--demo-preset", action="store_true", help=DEMO_PRESET_HELP)
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    """``serve``'s flags, ``--demo-preset`` applied (``demo_preset``)."""
    return parse_with_preset(build_parser(), argv)


def build_engine(args: argparse.Namespace, loaded: Any | None = None) -> AsyncEngine:
    """The engine for the flags, not started: ``arg_utils.build_engine`` checks them before the model loads
    (unless ``loaded`` is given), then sizes max_model_len to the model when the flags leave it out."""
    llm = arg_utils.build_engine(loaded=loaded, **arg_utils.engine_kwargs(args))
    return AsyncEngine(llm, max_trace_steps=args.max_trace_steps)


def build_server(args: argparse.Namespace, engine: AsyncEngine, **config: Any) -> Any:
    """The uvicorn server for ``serve``'s flags (``config`` overrides uvicorn settings, e.g. ``port=0``).
    Streams still open at SIGTERM get 5 s, then the engine fails them ("server shutting down"); a dead
    engine makes the server exit instead of lingering with a 503."""
    from minivllm.serving import lifecycle

    check_server_args(args)
    guard = AdminGuard(not args.disable_admin, args.admin_token, allowed_hosts(args.allowed_hosts, args.host))
    demo = DemoLimits(args.demo_max_connections, args.demo_max_answers)
    name = args.served_model_name or args.model
    app = build_app(engine, name, guard, args.max_request_body_bytes, request_caps(args), demo)
    settings = dict(host=args.host, port=args.port, log_level=args.log_level)
    server = lifecycle.build(app, engine, args.admin_token is not None, **{**settings, **config})
    engine.on_dead = lambda why: setattr(server, "should_exit", True)
    return server


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parse_with_preset(parser, sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        check_server_args(args)  # before the model loads
        engine = build_engine(args)
    except (ValueError, FileNotFoundError) as e:
        parser.error(str(e))
    name = args.served_model_name or args.model
    sc = engine.engine.scheduler.scheduler_config
    logger.info(
        "serving %s on http://%s:%d (max_model_len %d, budget %d, chunked prefill %s, %d KV blocks)",
        name,
        args.host,
        args.port,
        sc.max_model_len,
        sc.max_num_batched_tokens,
        sc.enable_chunked_prefill,
        engine.engine.config.cache_config.num_gpu_blocks,
    )
    server = build_server(args, engine)
    server.run()
    if engine.dead is not None:
        sys.exit(f"minivllm serve: the engine loop stopped: {engine.dead}")
