"""``python -m minivllm bench serve --base-url URL``: replay a seeded workload against any OpenAI server (§11.9).

Mirrors vLLM's ``benchmarks/benchmark_serving.py`` (``async_request_openai_completions``): requests go
out at the workload's arrival times (``--request-rate``, ``--burstiness``) or as fast as
``--max-concurrency`` allows, each one ``POST /v1/completions`` with the prompt as token ids,
``stream: true``, ``max_tokens``, ``temperature`` and vLLM's extra field ``ignore_eos``. From the stream:

* TTFT = first chunk with choices - send time; ITL = gaps between consecutive chunks with choices (one
  chunk per engine step, so per token without speculative decoding); E2E = [DONE] - send time;
  TPOT = (E2E - TTFT) / (chunks - 1).
* The timings become an EngineTrace (one RequestRecord per request), so ``summarize`` gives the same
  metrics, table and JSON shape as the offline ``python -m minivllm bench``. What only the server knows
  (steps, preemptions, prefix-cache hits) is read from the difference of two ``/metrics`` scrapes (vLLM's
  metric names; nan when the server has no /metrics).

Speaks only the OpenAI API, so it runs unchanged against ``vllm serve`` (pass ``--vocab-size`` of that
model: the prompts are random token ids).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

SERVER_COUNTERS = {  # metric in the JSON -> Prometheus counters (0.9+ name first, then 0.8.5's)
    "num_preemptions": ("vllm:num_preemptions_total",),
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
}


@dataclass
class RequestResult:
    """What the client saw of one request; times are ``time.perf_counter()`` seconds."""

    request_id: str
    prompt_len: int
    max_tokens: int
    send_time: float
    chunk_times: list[float] = field(default_factory=list)
    end_time: float | None = None
    response_id: str | None = None
    finish_reason: str | None = None
    usage_completion_tokens: int | None = None
    text: str = ""
    error: str | None = None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m minivllm bench serve", description=__doc__.splitlines()[0])
    p.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8000")
    p.add_argument("--endpoint", default="/v1/completions")
    p.add_argument("--model", default=None, help="default: the first model of GET /v1/models")
    p.add_argument("--workload", default="uniform", help="a workload kind, or a saved workload .json / .csv")
    p.add_argument("--num-prompts", type=int, default=100)
    p.add_argument("--request-rate", type=float, default=math.inf, help="requests/s; inf = all at t=0")
    p.add_argument("--burstiness", type=float, default=1.0, help="CV of the arrival gaps (1 = Poisson)")
    p.add_argument("--max-concurrency", type=int, default=None, help="at most this many requests in flight")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--vocab-size", type=int, default=49152, help="prompt token ids are drawn below this")
    p.add_argument("--max-model-len", type=int, default=None, help="default: the server's (from /v1/models)")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per request")
    p.add_argument("--save-detailed", action="store_true", help="keep per-request timings in the JSON")
    p.add_argument("--output-json")
    p.add_argument("--output-csv")
    p.add_argument("--no-progress", action="store_true")
    return p


async def send_one(client: Any, url: str, model: str, req: Any, result: RequestResult) -> None:
    """One streamed completion; fills ``result`` (chunk times, usage, finish reason, or the error)."""
    sp = req.sampling_params
    body = {
        "model": model,
        "prompt": req.prompt_token_ids,
        "max_tokens": sp.max_tokens,
        "temperature": sp.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": sp.ignore_eos,
    }
    result.send_time = time.perf_counter()
    try:
        async with client.stream("POST", url, json=body) as resp:
            if resp.status_code != 200:
                result.error = f"HTTP {resp.status_code}: {(await resp.aread()).decode(errors='replace')[:300]}"
                return
            async for line in resp.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[len("data: ") :]
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    result.error = chunk["error"].get("message", str(chunk["error"]))
                    return
                result.response_id = chunk.get("id", result.response_id)
                if chunk.get("choices"):
                    result.chunk_times.append(time.perf_counter())
                    choice = chunk["choices"][0]
                    result.text += choice.get("text") or ""
                    result.finish_reason = choice.get("finish_reason") or result.finish_reason
                elif chunk.get("usage"):
                    result.usage_completion_tokens = chunk["usage"].get("completion_tokens")
        result.end_time = time.perf_counter()
    except Exception as e:  # a failed request is counted, not fatal
        result.error = f"{type(e).__name__}: {e}"


async def run_workload(args: argparse.Namespace, url: str, model: str, requests: list[Any], progress: Any) -> tuple:
    import httpx

    limits = httpx.Limits(max_connections=args.max_concurrency, max_keepalive_connections=args.max_concurrency)
    semaphore = asyncio.Semaphore(args.max_concurrency) if args.max_concurrency else None
    results = [
        RequestResult(r.request_id, len(r.prompt_token_ids), r.sampling_params.max_tokens, math.nan) for r in requests
    ]

    async def one(req: Any, result: RequestResult, client: Any) -> None:
        if semaphore is None:
            await send_one(client, url, model, req, result)
        else:
            async with semaphore:
                await send_one(client, url, model, req, result)
        if progress is not None:
            progress.update(1)

    async with httpx.AsyncClient(timeout=httpx.Timeout(args.timeout), limits=limits) as client:
        start = time.perf_counter()
        tasks = []
        for req, result in zip(requests, results):
            delay = start + req.arrival_time - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(req, result, client)))
        await asyncio.gather(*tasks)
    return start, results


def to_trace(start: float, results: list[RequestResult]) -> Any:
    """The client's view as an EngineTrace (times from the benchmark start); failed requests count as aborted."""
    from minivllm.metrics.trace import EngineTrace

    trace = EngineTrace()
    for r in results:
        trace.on_arrival(r.request_id, r.send_time - start, r.prompt_len)
        rec = trace.requests[r.request_id]
        rec.token_times = [t - start for t in r.chunk_times]
        if r.error is not None:
            done = r.chunk_times[-1] if r.chunk_times else r.send_time
        elif r.end_time is None:  # send_one() sets end_time whenever it returns without an error
            raise ValueError(f"Request {r.request_id} has neither an error nor an end_time.")
        else:
            done = r.end_time
        rec.finish_time, rec.finish_reason = done - start, "abort" if r.error else (r.finish_reason or "length")
    return trace


def scrape_counters(base_url: str) -> dict[str, float]:
    """The SERVER_COUNTERS summed over label sets; {} when /metrics cannot be read."""
    import httpx

    try:
        text = httpx.get(f"{base_url}/metrics", timeout=30).text
    except httpx.HTTPError:
        return {}
    out: dict[str, float] = {}
    for key, names in SERVER_COUNTERS.items():
        for name in names:
            values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{")]
            if values:
                out[key] = sum(values)
                break
    return out


def main(argv: list[str] | None = None) -> list[dict]:
    import httpx

    from minivllm.lab.benchmarks.results import RUN_FLAGS, format_table, load_workload, write_outputs
    from minivllm.lab.metrics.summary import summarize

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    args.mode = "serve"  # read by write_outputs
    base = args.base_url.rstrip("/")
    if args.num_prompts < 1 or (args.max_concurrency is not None and args.max_concurrency < 1):
        parser.error("--num-prompts and --max-concurrency must be >= 1")
    try:
        card = httpx.get(f"{base}/v1/models", timeout=30).raise_for_status().json()["data"][0]
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as e:
        parser.error(f"--base-url: cannot list models at {base}/v1/models ({e})")
    model = args.model or card["id"]
    max_model_len = args.max_model_len or card.get("max_model_len")
    try:
        workload = load_workload(args, {}, args.vocab_size, max_model_len)
    except ValueError as e:
        parser.error(f"--workload: {e}")
    from tqdm import tqdm

    before = scrape_counters(base)
    with tqdm(total=len(workload.requests), unit="req", disable=args.no_progress, file=sys.stderr) as progress:
        start, results = asyncio.run(run_workload(args, base + args.endpoint, model, workload.requests, progress))
    wall = time.perf_counter() - start
    after = scrape_counters(base)
    summary = summarize(to_trace(start, results))
    metrics = summary.to_dict()
    for key in SERVER_COUNTERS:
        metrics[key] = after[key] - before[key] if key in after and key in before else math.nan
    failed = [r for r in results if r.error]
    metrics.update(num_failed=len(failed), wall_time_s=wall, requests_per_wall_s=len(results) / wall)
    config = {
        "base_url": base,
        "endpoint": args.endpoint,
        "model": model,
        "max_concurrency": args.max_concurrency,
        **{k: getattr(args, k) for k in RUN_FLAGS if hasattr(args, k)},
    }
    result: dict[str, Any] = {"point": {}, "config": config, "workload": workload.params, "metrics": metrics}
    if args.save_detailed:
        result["requests"] = [asdict(r) for r in results]
    print(format_table([result]))
    print(summary.table())
    server = ", ".join(f"{k} {metrics[k]:g}" for k in SERVER_COUNTERS)
    print(f"server       from /metrics: {server}" if after else "server       no /metrics: its counters are nan")
    if failed:
        print(f"{len(failed)} of {len(results)} requests failed; first: {failed[0].error}", file=sys.stderr)
    write_outputs(args, [result], argv)
    return [result]
