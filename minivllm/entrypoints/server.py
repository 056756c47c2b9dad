"""``python -m minivllm serve``: an OpenAI-compatible HTTP server over one LLMEngine (§11.9).

Mirrors ``vllm/entrypoints/openai/api_server.py`` (``vllm serve``): the same routes (``/v1/completions``,
``/v1/chat/completions``, ``/v1/models``, ``/health``, ``/metrics``), vLLM's engine flags
(``--max-num-batched-tokens``, ``--enable-chunked-prefill`` / ``--no-enable-chunked-prefill``, ...),
OpenAI-style error bodies, and vLLM's Prometheus metric names (``minivllm.engine.prometheus``). One
background thread steps the engine (``AsyncEngine``); the live demo page is at ``/`` (``demo_routes``).

Example: ``python -m minivllm serve --model smollm2 --port 8000 --max-num-batched-tokens 256``, then
open http://127.0.0.1:8000/ or ``curl http://127.0.0.1:8000/v1/completions -H 'Content-Type:
application/json' -d '{"prompt": "Hello", "max_tokens": 16, "stream": true}'``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from minivllm.config import DEFAULT_MAX_MODEL_LEN, EngineConfig, flag_name
from minivllm.entrypoints import demo_routes
from minivllm.entrypoints.async_engine import AsyncEngine
from minivllm.entrypoints.protocol import APIError, ChatCompletionRequest, CompletionRequest, Limits, validation_error
from minivllm.entrypoints.serving import FALLBACK_CHAT_TEMPLATE, ServerState, serve

logger = logging.getLogger("minivllm.entrypoints")
ENGINE_FLAGS: dict[str, Any] = {  # config field -> argparse type; None: --x / --no-x
    "max_num_batched_tokens": int, "max_num_seqs": int, "max_model_len": int, "long_prefill_token_threshold": int,
    "enable_chunked_prefill": None, "enable_prefix_caching": None, "block_size": int, "num_gpu_blocks": int,
    "policy": str, "kv_cache_memory_bytes": int, "device": str, "dtype": str, "attention_backend": str, "cpu_gemm": str,
    "seed": int,
}  # fmt: skip


def build_app(engine: AsyncEngine, model_name: str) -> FastAPI:
    """The ASGI app around a (not yet started) AsyncEngine; the engine thread runs while the app does."""
    llm = engine.engine
    sc = llm.scheduler.scheduler_config
    limits = Limits(sc.max_model_len, llm.vocab_size)
    state = ServerState(engine, model_name, limits, llm.tokenizer, int(time.time()))
    if sc.enable_chunked_prefill:
        state.chunked_budget = sc.max_num_batched_tokens
    if llm.tokenizer is not None and not getattr(llm.tokenizer, "chat_template", None):
        logger.warning("The tokenizer has no chat template; chat uses the fallback %r.", FALLBACK_CHAT_TEMPLATE)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        engine.start()
        yield
        engine.shutdown()

    app = FastAPI(title="minivllm", lifespan=lifespan)
    app.state.minivllm = state

    @app.exception_handler(APIError)
    async def api_error(_: Request, e: APIError) -> JSONResponse:
        return JSONResponse(e.body(), status_code=e.status)

    @app.exception_handler(RequestValidationError)
    async def bad_body(_: Request, e: RequestValidationError) -> JSONResponse:
        err = validation_error(list(e.errors()))
        return JSONResponse(err.body(), status_code=err.status)

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=200)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        card = {"id": model_name, "object": "model", "created": state.created, "owned_by": "minivllm",
                "root": llm.config.model_config.model, "max_model_len": limits.max_model_len}  # fmt: skip
        return {"object": "list", "data": [card]}

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        from minivllm.engine.prometheus import prometheus_text

        text = await engine.call(lambda e: prometheus_text(e.trace, model_name=model_name))
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.post("/v1/completions")
    async def completions(req: CompletionRequest, raw: Request) -> Response:
        return await serve(state, raw, req)

    @app.post("/v1/chat/completions")
    async def chat_completions(req: ChatCompletionRequest, raw: Request) -> Response:
        return await serve(state, raw, req)

    app.include_router(demo_routes.router)
    return app


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m minivllm serve", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2", help="'smollm2' or a local HF folder (Llama / Qwen2 / Mistral)")
    p.add_argument("--served-model-name", default=None, help="the name clients send as 'model' (default: --model)")
    p.add_argument("--host", default="127.0.0.1", help="0.0.0.0 to accept other machines")
    p.add_argument("--port", type=int, default=8000)
    for name, typ in ENGINE_FLAGS.items():
        if typ is None:
            p.add_argument(flag_name(name), action=argparse.BooleanOptionalAction, default=None)
        else:
            p.add_argument(flag_name(name), type=typ, default=None)
    p.add_argument("--max-trace-steps", type=int, default=20_000, help="bound on the steps the trace keeps")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    return p


def build_engine(args: argparse.Namespace, loaded: Any | None = None) -> AsyncEngine:
    """Load the model (unless ``loaded`` is given), size max_model_len to it (as ``bench`` does), and build the
    engine (not started)."""
    from minivllm.engine.llm_engine import LLMEngine
    from minivllm.executor.model_runner import ModelRunner, resolve_device
    from minivllm.model.loader import load_model, resolve_dtype

    kwargs = {k: getattr(args, k) for k in ENGINE_FLAGS if getattr(args, k) is not None}
    config = EngineConfig.from_kwargs(model=args.model, **kwargs)  # bad flags fail before the model loads
    device = resolve_device(config.model_config.device)
    dtype = config.model_config.dtype
    if loaded is None:
        loaded = load_model(args.model, resolve_dtype(dtype if dtype != "auto" else
                            ("bfloat16" if device.type == "cuda" else "float32")), device)  # fmt: skip
    if "max_model_len" not in kwargs:
        kwargs["max_model_len"] = min(loaded.arch.max_position_embeddings, DEFAULT_MAX_MODEL_LEN)
        config = EngineConfig.from_kwargs(model=args.model, **kwargs)
    llm = LLMEngine(config, executor=ModelRunner(config, loaded))
    return AsyncEngine(llm, max_trace_steps=args.max_trace_steps)


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        engine = build_engine(args)
    except (ValueError, FileNotFoundError) as e:
        parser.error(str(e))
    name = args.served_model_name or args.model
    sc = engine.engine.scheduler.scheduler_config
    logger.info("serving %s on http://%s:%d (max_model_len %d, budget %d, chunked prefill %s, %d KV blocks)",
                name, args.host, args.port, sc.max_model_len, sc.max_num_batched_tokens, sc.enable_chunked_prefill,
                engine.engine.config.cache_config.num_gpu_blocks)  # fmt: skip
    uvicorn.run(build_app(engine, name), host=args.host, port=args.port, log_level=args.log_level)
