"""Published vLLM runs the simulator is checked against: source, settings, workload, numbers (§11.7, issue 19).

Each :class:`PublishedRun` (:mod:`minivllm.lab.sim.run_records`) writes down one run someone else made on a real
GPU: where it is published, the vLLM version, model, GPU and tensor parallelism, the scheduler settings the source
states (``None`` = not stated, with a note), the workload, and the published metric values under names that say
the statistic and the unit (``latency_avg_ms``, ``median_e2e_s``, ``mean_ttft_s``, ``median_tpot_ms``, ...).
``replay`` holds the bench flags :mod:`minivllm.lab.benchmarks.sim_validation` runs the simulator with, each
assumption beyond the source noted in ``replay_notes``; ``client`` says how the source computed its metrics and
``first_token_s`` is the run's fastest first token (what an API server's intake cost before the engine saw the
burst). These are the targets the cost model is judged by; one of its terms (the host cost per request) is fitted
to the A100 ShareGPT run, so that run is not held out for it (minivllm/lab/sim/gpu_presets.py).

Sources (read 2026-12-01):

* vLLM's perf-benchmark latency test ``latency_llama8B_tp1``: ``.buildkite/nightly-benchmarks/tests/
  latency-tests.json`` (meta-llama/Meta-Llama-3-8B, TP1, ``load_format dummy``, 5 warm-up + 15 timed iterations
  of ``benchmark_latency.py``) and ``performance-benchmarks-descriptions.md`` (32 input tokens, 128 output
  tokens, batch size 8, mean / median / P99 end-to-end latency) in github.com/vllm-project/vllm. The two
  latency values (A100 1,585 ms, H100 997 ms) are from issue 19's text: not re-found in any stored copy of the
  dashboard or a results table.
* The ShareGPT runs: Lambda's vLLM benchmark, github.com/LambdaLabsML/vllm-benchmark, result files
  ``results/prompt_320/1xA100-80GB-SXM/Meta-Llama-3-8B-Instruct_tp1_len2000.json`` (commit a9b42a5f, dated
  2024-09-07) and ``results/prompt_320/1xH100-80GB-SXM/Meta-Llama-3-8B-Instruct_tp1_len2048.json`` (commit
  a4f9f437, 2024-09-07), written by its ``benchmark.py`` (an OpenAI server with ``--max-model-len``,
  ``--gpu-memory-utilization`` 0.95 by default and ``--max-num-seqs``; the client is vLLM's
  ``benchmark_serving.py --dataset-name sharegpt --num-prompts 320``, request rate inf). Each file lists the
  320 requests' ``input_lens`` and ``output_lens``, copied below (their sums equal the files'
  ``total_input_tokens`` 65,578 and ``total_output_tokens`` 65,374 / 65,331).
* inference-sim's vLLM V1 ground truth: :mod:`minivllm.lab.sim.published_runs_v1` (its sources there).
* SGLang's reproduction of vLLM 0.6.0 with multi-step scheduling (read 2026-12-02): github.com/sgl-project/sglang
  ``benchmark/benchmark_vllm_060/README.md`` @120affb: Llama-3.1-8B-Instruct on one A100-80G, the server started
  with ``--num-scheduler-steps 10 --max_model_len 4096``, ``sglang.bench_serving --backend vllm --dataset-name
  sharegpt --num-prompts 1200 --request-rate 4``; its online table (median E2E, TTFT, TPOT, ITL in ms).

Each run names the engine generation it is priced as (:mod:`minivllm.lab.sim.generation`): vLLM 0.6 with its
multi-step setting, or V1. The generation follows the run's engine, never its numbers.
"""

from __future__ import annotations

from dataclasses import replace

from minivllm.lab.sim.published_runs_v1 import V1_RUNS
from minivllm.lab.sim.run_records import PublishedRun, RunWorkload, SchedulerSettings
from minivllm.lab.sim.run_records import ints as _ints

__all__ = ["PUBLISHED_RUNS", "PublishedRun", "RunWorkload", "SchedulerSettings", "get_run"]

LLAMA3_8B = "meta-llama/Meta-Llama-3-8B"


# fmt: off
# Lambda's result files (module docstring): input_lens (the same 320 ShareGPT prompts on both GPUs) and
# output_lens (tokens in the generated text; they differ a little between the runs).
_SHAREGPT_320_PROMPT_LENS = _ints(
    "13 25 27 10 329 29 399 328 4 205 16 372 403 9 12 770 227 8 14 390 659 59 76 744 619 279 344 9 10 45 11 4 "
    "80 768 317 40 619 8 298 16 17 696 575 11 7 281 12 147 481 770 336 6 331 9 45 222 802 481 93 641 22 15 16 "
    "77 32 689 178 9 628 480 42 336 24 515 761 112 113 348 82 467 245 11 24 343 13 387 258 32 28 225 248 35 "
    "133 98 27 23 58 363 203 140 140 230 310 521 768 317 298 336 491 19 10 59 48 20 20 54 107 53 72 18 10 768 "
    "7 933 239 277 26 35 462 386 25 23 17 20 44 661 631 349 53 71 37 10 21 37 496 8 9 353 10 595 5 49 286 305 "
    "56 43 52 310 35 7 7 238 10 143 660 191 72 39 258 312 49 9 15 561 76 561 501 8 66 15 303 19 455 27 143 "
    "688 9 31 361 21 117 8 12 775 338 176 349 166 419 401 307 169 647 21 9 34 12 37 45 154 8 10 18 253 486 "
    "611 96 19 62 529 15 30 10 445 680 762 441 77 12 276 178 22 159 95 366 4 7 770 8 45 480 90 32 329 768 72 "
    "86 53 83 419 44 14 56 28 707 235 27 668 17 427 44 370 8 674 455 185 68 19 132 304 9 34 39 54 768 661 404 "
    "240 25 95 60 24 12 85 66 62 462 22 241 25 32 13 175 31 342 43 339 144 233 16 10 11 269 587 8 233 10 48 9 "
    "335 22 61 29 692 7 332 512 13 128 24"
)
_A100_OUTPUT_LENS = _ints(
    "120 547 233 194 101 741 9 3 6 38 392 84 396 45 291 9 173 277 334 37 587 372 36 135 26 45 450 118 226 4 5 "
    "146 59 11 567 192 447 130 13 223 188 16 35 276 202 492 239 129 26 79 17 204 11 207 78 340 21 9 123 6 559 "
    "5 316 26 417 206 151 42 25 18 159 0 25 267 19 12 768 67 628 11 218 296 371 49 125 0 26 237 350 13 490 "
    "408 58 29 512 413 526 16 416 434 451 17 573 0 7 8 11 22 0 249 281 392 611 572 23 256 31 39 300 355 340 9 "
    "172 458 78 20 154 768 0 141 42 26 780 334 125 4 4 721 63 24 331 481 110 216 184 99 285 22 355 40 150 46 "
    "0 0 574 561 214 0 419 163 162 77 482 170 510 53 16 384 57 9 170 351 173 19 390 339 552 17 520 8 8 198 "
    "510 478 304 398 16 475 91 54 509 608 36 425 15 25 12 363 0 0 44 43 267 437 334 31 261 402 346 176 22 22 "
    "159 203 8 16 16 216 86 0 234 258 247 23 47 16 447 221 702 0 44 142 740 18 76 299 250 24 300 178 5 373 25 "
    "23 76 322 87 389 21 7 527 485 339 394 11 27 254 313 392 111 365 0 79 11 275 22 99 373 38 0 657 283 503 "
    "250 16 407 0 7 261 393 321 91 56 365 343 316 25 444 646 241 222 4 27 290 7 21 336 16 360 199 313 297 18 "
    "338 301 189 373 478 394 23 230 455 283 0 201 0 20 308 30 295"
)
_H100_OUTPUT_LENS = _ints(
    "120 613 233 194 101 741 9 3 6 31 392 84 396 45 291 9 173 277 334 37 587 372 36 135 26 45 450 118 226 4 5 "
    "146 59 11 567 192 476 130 13 223 188 16 35 276 202 492 239 129 26 79 17 204 11 207 78 340 17 9 123 6 559 "
    "5 316 26 417 206 151 42 25 18 159 0 25 267 19 12 768 67 628 11 218 296 382 49 125 0 26 237 350 13 490 "
    "408 58 29 512 413 526 16 416 434 451 17 573 0 7 8 11 22 0 249 281 392 611 572 23 256 31 39 300 355 340 9 "
    "172 458 147 240 154 768 0 141 42 26 780 334 125 4 4 721 63 24 331 482 110 216 184 99 285 22 355 40 150 "
    "46 0 0 574 572 214 0 419 163 162 77 482 170 510 53 16 384 57 9 170 356 173 19 390 339 77 17 520 8 8 198 "
    "510 478 304 398 16 475 91 54 509 608 36 425 15 25 12 363 0 0 44 43 267 474 334 31 261 402 346 176 22 22 "
    "159 203 8 16 16 216 86 0 234 258 247 23 47 16 447 221 702 0 44 142 740 18 76 299 250 24 300 178 5 373 25 "
    "23 76 322 87 389 21 7 527 485 339 394 11 27 254 313 392 111 365 0 79 11 275 22 99 373 38 0 657 283 503 "
    "250 16 407 0 7 261 322 322 91 56 365 342 316 25 441 646 241 222 4 27 290 7 21 336 16 360 199 381 297 18 "
    "338 301 189 373 478 394 23 230 455 283 0 201 0 20 308 30 295"
)
# fmt: on

_VLLM_LATENCY_SOURCE = (
    "vLLM perf benchmarks, test latency_llama8B_tp1: github.com/vllm-project/vllm "
    ".buildkite/nightly-benchmarks/tests/latency-tests.json + performance-benchmarks-descriptions.md "
    "(settings); the value: issue 19 text, not re-found"
)
_VLLM_LATENCY_SETTINGS = SchedulerSettings(
    notes="not stated: the test passes only model, tensor_parallel_size, load_format=dummy and the iteration "
    "counts to benchmark_latency.py, so the engine runs on its defaults for the (unrecorded) vLLM version"
)
_VLLM_LATENCY_REPLAY = {"max_num_seqs": 256, "max_num_batched_tokens": 2048, "enable_chunked_prefill": True}
_VLLM_LATENCY_REPLAY_NOTES = (
    "8 x 32 = 256 prompt tokens fit one step under any budget, so the replay's scheduler values (vLLM defaults: "
    "max_num_seqs 256, a 2048-token budget) do not change the schedule; offline LLM.generate, so no API-server "
    "intake; latency_avg_ms = the time from t = 0 to "
    "the last of the 8 requests finishing (benchmark_latency.py times one llm.generate over the batch)"
)
_LAMBDA = "Lambda vLLM benchmark, github.com/LambdaLabsML/vllm-benchmark "
_LAMBDA_NOTES = (
    "max_model_len from the result file's name (benchmark.py writes _len{max_model_len}); "
    "gpu_memory_utilization is benchmark.py's default (0.95), not recorded in the result; max_num_seqs not "
    "recorded (benchmark.sh passes MAX_NUM_SEQ, default 256; benchmark.py's own default is 1024); chunked "
    "prefill and max_num_batched_tokens not passed (vLLM 0.6.0 defaults: chunked prefill off below a 32K "
    "context, budget max(max_model_len, 2048)); benchmark.sh hands its NUM_SCHEDULER_STEPS to benchmark.py "
    "(--num-scheduler-steps; the stored benchmark.sh defaults it to 0) and the value used is not recorded"
)
_LAMBDA_REPLAY_NOTES = (
    "vLLM 0.6.0's V0 scheduler (minivllm.lab.baselines.PrefillFirstScheduler: whole prompts in prefill-only steps), "
    "max_num_seqs 256 (benchmark.sh's default), chunked prefill off and a 2048-token budget (vLLM 0.6.0's "
    "defaults for this context length), gpu_memory_utilization 0.95: assumed, not recorded; the 320 recorded "
    "(prompt, output) lengths, all at t = 0 (--request-rate inf), output 0 replayed as 1 token and, as "
    "benchmark_serving.py counts it (no text ever arrived), TTFT 0 and no TPOT; the API server's intake "
    "(minivllm.lab.sim.intake) from the run's fastest first token (first_token_s) less the first prefill step, over "
    "320 requests; prefix caching stays on but random token ids never hit; 10-step multi-step bursts, read off "
    "the file's inter-token gaps (generation_notes)"
)
_LAMBDA_REPLAY = {
    "scheduler_cls": "minivllm.lab.baselines.PrefillFirstScheduler",
    "max_num_seqs": 256,
    "max_num_batched_tokens": 2048,
    "enable_chunked_prefill": False,
    "gpu_memory_utilization": 0.95,
}
_LAMBDA_VERSION = "0.6.0 (issue 19; the result file records no version; it is dated 2024-09-07, after v0.6.0)"


def _sharegpt(output_lens: tuple[int, ...]) -> RunWorkload:
    return RunWorkload(
        "ShareGPT_V3_unfiltered_cleaned_split.json, 320 prompts sampled by vLLM benchmark_serving.py "
        "(--dataset-name sharegpt, its default seed), request rate inf; per-request lengths from the result file",
        num_requests=320,
        request_rate=None,
        prompt_lens=_SHAREGPT_320_PROMPT_LENS,
        output_lens=output_lens,
    )


def _latency_run(gpu: str, gpu_note: str, latency_ms: float) -> PublishedRun:
    """vLLM's perf-benchmark latency test on one GPU (the test's settings are the same on both)."""
    return PublishedRun(
        name=f"vllm_latency_llama3_8b_{gpu}",
        source=_VLLM_LATENCY_SOURCE,
        vllm_version=None,
        model=LLAMA3_8B,
        gpu=gpu_note,
        tensor_parallel_size=1,
        settings=_VLLM_LATENCY_SETTINGS,
        workload=RunWorkload("8 requests x 32 prompt / 128 output tokens, one batch", 8, prompt_len=32, output_len=128),
        metrics={"latency_avg_ms": latency_ms},
        preset=f"llama3_8b_{gpu}",
        replay=_VLLM_LATENCY_REPLAY,
        replay_notes=_VLLM_LATENCY_REPLAY_NOTES,
        notes="vLLM version and the date of the value are unknown (issue 19 quotes it without either)",
        generation_notes="version unknown: priced as the presets' own generation (vLLM 0.6, serial host work, "
        "single steps), an assumption",
    )


def _lambda_run(
    gpu: str,
    result_file: str,
    max_model_len: int,
    output_lens: tuple[int, ...],
    metrics: dict[str, float],
    first_token_s: float,
) -> PublishedRun:
    """One of Lambda's ShareGPT-320 runs: its result file, max_model_len, recorded outputs and numbers."""
    return PublishedRun(
        name=f"lambda_sharegpt320_llama3_8b_{gpu}",
        source=_LAMBDA + result_file,
        vllm_version=_LAMBDA_VERSION,
        model="meta-llama/Meta-Llama-3-8B-Instruct",
        gpu=f"{gpu.upper()}-80GB-SXM",
        tensor_parallel_size=1,
        settings=SchedulerSettings(max_model_len=max_model_len, gpu_memory_utilization=0.95, notes=_LAMBDA_NOTES),
        workload=_sharegpt(output_lens),
        metrics=metrics,
        preset=f"llama3_8b_{gpu}",
        replay={**_LAMBDA_REPLAY, "max_model_len": max_model_len},
        replay_notes=_LAMBDA_REPLAY_NOTES,
        client="benchmark_serving",
        first_token_s=first_token_s,  # min of the file's ttfts over requests with text
        num_scheduler_steps=10,
        generation_notes="vLLM 0.6.0 (V0 engine) with 10-step bursts: the file's streamed tokens arrive in chunks of "
        "~10 (its itls: one gap per ~10 tokens, e.g. 120 tokens in 12 gaps of ~114 ms in the 10-prompt A100 "
        "file), as vLLM 0.6 streams with --num-scheduler-steps 10",
    )


SGLANG_REPLAYED_REQUESTS = 600  # the first half of the 1200 (150 s at 4 req/s): chosen before any replay
_SGLANG_RUN = PublishedRun(
    name="sglang_vllm060_multistep10_llama31_8b_a100",
    source="SGLang v0.3 vs vLLM v0.6.0 reproduction, github.com/sgl-project/sglang "
    "benchmark/benchmark_vllm_060/README.md @120affb (online, Llama 3.1 8B Instruct, 1 x A100 80G, RPS 4)",
    vllm_version="0.6.0",
    model="meta-llama/Llama-3.1-8B-Instruct",
    gpu="A100-80GB",
    tensor_parallel_size=1,
    settings=SchedulerSettings(
        max_model_len=4096,
        notes="server flags: --num-scheduler-steps 10 --max_model_len 4096 --disable-log-requests; the rest vLLM "
        "0.6.0's defaults (max_num_seqs 256, chunked prefill off below a 32K context, budget max(max_model_len, "
        "2048) = 4096, gpu_memory_utilization 0.9), not restated by the source",
    ),
    workload=RunWorkload(
        "ShareGPT_V3 through sglang.bench_serving (1200 prompts, Poisson 4 req/s, outputs its completions' lengths "
        "with ignore_eos); the sampled lengths are not published: replayed with Lambda's 320 recorded ShareGPT "
        f"(prompt, output) pairs (same dataset and length filters), cycled, first {SGLANG_REPLAYED_REQUESTS} requests",
        num_requests=SGLANG_REPLAYED_REQUESTS,
        request_rate=4.0,
        prompt_lens=tuple(_SHAREGPT_320_PROMPT_LENS[i % 320] for i in range(SGLANG_REPLAYED_REQUESTS)),
        output_lens=tuple(max(1, _A100_OUTPUT_LENS[i % 320]) for i in range(SGLANG_REPLAYED_REQUESTS)),
    ),
    metrics={"median_e2e_s": 1.69197, "median_ttft_s": 0.10048, "median_tpot_ms": 14.14},
    preset="llama3_8b_a100",
    replay={**_LAMBDA_REPLAY, "max_num_batched_tokens": 4096, "gpu_memory_utilization": 0.9, "max_model_len": 4096},
    replay_notes="vLLM 0.6.0's V0 scheduler (PrefillFirstScheduler: whole prompts in prefill-only steps) with its "
    "defaults for this context; Llama-3.1-8B priced by the Llama-3-8B preset (the same shapes); the lengths are a "
    "stand-in sample (workload); Poisson arrivals seeded; no API-server intake (none measured); the median ITL "
    "(129 ms: tokens reach the client once per 10-step burst) is not compared: the simulator stamps each token at "
    "its own step; the median E2E depends on the sample's output lengths: the published medians imply ~114 "
    "output tokens for the median request ((E2E - TTFT) / TPOT + 1), the stand-in's median output is 156",
    client="benchmark_serving",
    recorded_lengths=False,
    engine_generation="v0.6-multistep",
    num_scheduler_steps=10,
    not_comparable={
        "median_e2e_s": "the median request's E2E is its TTFT plus (output - 1) x TPOT, so it rests on the sample's "
        "output lengths, which the source does not publish: the simulated median TTFT and TPOT are both below the "
        "published ones yet the median E2E above, because the stand-in's median request has ~156 output "
        "tokens where the published medians imply ~114 ((1692 - 100) / 14.14 + 1); a per-token cost error would "
        "move TPOT and E2E the same way"
    },
    generation_notes="vLLM 0.6.0 started with --num-scheduler-steps 10: 10 decode steps per scheduler call",
)


def _lambda10_run(
    gpu: str, result_file: str, max_model_len: int, outputs: str, metrics: dict[str, float], first_token_s: float
) -> PublishedRun:
    """One of Lambda's 10-prompt runs: the first 10 ShareGPT prompts of the 320, by the same benchmark.py."""
    run = _lambda_run(gpu, result_file, max_model_len, _ints(outputs), metrics, first_token_s)
    return replace(
        run,
        name=f"lambda_sharegpt10_llama3_8b_{gpu}",
        source=_LAMBDA + result_file,
        workload=replace(
            run.workload,
            num_requests=10,
            prompt_lens=_SHAREGPT_320_PROMPT_LENS[:10],
            description=run.workload.description.replace("320", "10"),
        ),
    )


PUBLISHED_RUNS: tuple[PublishedRun, ...] = (
    _latency_run("a100", "A100 (memory size not stated)", 1585.0),
    _latency_run("h100", "H100 (variant not stated)", 997.0),
    _lambda_run(
        "a100",
        "results/prompt_320/1xA100-80GB-SXM/Meta-Llama-3-8B-Instruct_tp1_len2000.json (a9b42a5f)",
        2000,
        _A100_OUTPUT_LENS,
        {  # the result file's median/mean_latency_ms, mean/median_ttft_ms, median_tpot_ms, duration, ...
            "median_e2e_s": 10.6368,
            "mean_e2e_s": 10.8573,
            "mean_ttft_s": 3.4232,
            "median_ttft_s": 3.6970,
            "median_tpot_ms": 40.858,
            "duration_s": 21.038,
            "output_throughput_tok_s": 3107.5,
        },
        first_token_s=1.2654,
    ),
    _lambda_run(
        "h100",
        "results/prompt_320/1xH100-80GB-SXM/Meta-Llama-3-8B-Instruct_tp1_len2048.json (a4f9f437)",
        2048,
        _H100_OUTPUT_LENS,
        {
            "median_tpot_ms": 20.034,
            "mean_ttft_s": 1.6285,
            "median_ttft_s": 1.7314,
            "median_e2e_s": 5.0575,
            "mean_e2e_s": 5.2481,
            "duration_s": 10.840,
            "output_throughput_tok_s": 6026.6,
        },
        first_token_s=0.8144,
    ),
    *V1_RUNS,
    _SGLANG_RUN,
    _lambda10_run(
        "a100",
        "results/prompt_10/1xA100-80GB-SXM/Meta-Llama-3-8B-Instruct_tp1_len2000.json (a9b42a5f)",
        2000,
        "120 507 233 194 101 741 9 3 6 31",
        {
            "mean_ttft_s": 0.139225,
            "median_tpot_ms": 11.9557,
            "mean_e2e_s": 2.40707,
            "median_e2e_s": 1.42057,
            "duration_s": 8.56683,
        },
        first_token_s=0.138707,
    ),
    _lambda10_run(
        "h100",
        "results/prompt_10/1xH100-80GB-SXM/Meta-Llama-3-8B-Instruct_tp1_len2048.json (a4f9f437)",
        2048,
        "120 429 233 194 101 741 9 3 6 31",
        {
            "mean_ttft_s": 0.0624264,
            "median_tpot_ms": 7.55826,
            "mean_e2e_s": 1.43178,
            "median_e2e_s": 0.874290,
            "duration_s": 5.36661,
        },
        first_token_s=0.0619239,
    ),
)


def get_run(name: str) -> PublishedRun:
    for run in PUBLISHED_RUNS:
        if run.name == name:
            return run
    raise ValueError(f"unknown published run {name!r}; recorded: {', '.join(r.name for r in PUBLISHED_RUNS)}.")
