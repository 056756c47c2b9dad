"""Published vLLM V1 runs: inference-sim's Llama-2-7B H100 ground truth (§11.7, issue 32).

Source (read 2026-12-02): github.com/inference-sim/training @c4f0340, ``default_args/<experiment>/results/
config.yaml`` (inference-perf's workload and load stages) and ``results/summary_lifecycle_metrics.json``
(per-request latency summaries), Llama-2-7B on one H100-SXM (``datasheets/h100-sxm.json``; the README: "vLLM
serving traces collected with inference-perf", step traces from vLLM V1's OTEL journey tracing), vLLM's default
engine arguments (the directory ``default_args``; its ``exp-config.yaml`` files: max_num_batched_tokens 2048,
max_num_seqs 128, max_model_len 4096). The experiment list with rates: ``split.py`` in the same repository
(codegen 5 then 10 req/s, roleplay 6 req/s). The client's prompt pool: inference-perf's
``inference_perf/datagen/shared_prefix_datagen.py`` (github.com/kubernetes-sigs/inference-perf). The registry is
:data:`minivllm.lab.sim.published_runs.PUBLISHED_RUNS`.
"""

from __future__ import annotations

from minivllm.lab.sim.run_records import PublishedRun, RunWorkload, SchedulerSettings

_INFERENCE_SIM = "inference-sim training data, github.com/inference-sim/training @c4f0340 default_args/"
_INFERENCE_SIM_SETTINGS = SchedulerSettings(
    max_num_seqs=128,
    max_num_batched_tokens=2048,
    enable_chunked_prefill=True,
    max_model_len=4096,
    notes="vLLM's defaults as the experiments' exp-config.yaml files record them (the codegen and roleplay "
    "directories hold none of their own; their siblings in default_args/ do); chunked prefill and prefix caching "
    "are always on in V1; gpu_memory_utilization not recorded (vLLM's default 0.9 assumed)",
)
_INFERENCE_SIM_REPLAY = {"max_num_seqs": 128, "max_num_batched_tokens": 2048, "enable_chunked_prefill": True}
REPLAY_SECONDS_PER_STAGE = 60.0  # each load stage replayed for its first minute (set before any replay, not tuned)
_INFERENCE_SIM_REPLAY_NOTES = (
    "the V1 Scheduler with the recorded engine arguments; each load stage's first "
    f"{REPLAY_SECONDS_PER_STAGE:.0f} s at its constant rate (inference-perf's load type 'constant': evenly "
    "spaced), compared with the whole run's summary (the published latencies are steady: p1-p99 within "
    "+-25% of the mean); every prompt is the run's mean recorded prompt length, its first system_prompt_len "
    "tokens shared by one of num_groups groups; the client cycles num_groups x num_prompts_per_group = 100 "
    "prompts drawn once (inference-perf's SharedPrefixDataGenerator: request i sends prompt i % 100; the "
    "recorded prompt_len percentiles are identical in every stage), so after the first 100 requests every "
    "prompt is a full prefix-cache hit (V1: prefix caching on): the replay sends those 100 first as an uncounted "
    "warm-up (in the published run they are ~1% of the requests); every output is the configured output_len "
    "(ignore_eos: the recorded output_len counts re-tokenised text, whose low tail the narrow latencies rule "
    "out); the API server's own work per request (minivllm.lab.sim.intake) is the fastest published first token "
    "(first_token_s, the summary's min time_to_first_token) less the fastest simulated one without it"
)


def _inference_sim_run(
    experiment: str,
    profile: str,
    stages: tuple[tuple[float, float], ...],
    prompt_len: int,
    output_len: int,
    system_prompt_len: int,
    metrics: dict[str, float],
    first_token_s: float,
) -> PublishedRun:
    """One of inference-sim's Llama-2-7B H100 experiments, its load stages cut to REPLAY_SECONDS_PER_STAGE each."""
    full = ", ".join(f"{r:g} req/s for {d:g} s" for r, d in stages)
    replayed = tuple((rate, min(seconds, REPLAY_SECONDS_PER_STAGE)) for rate, seconds in stages)
    count = sum(round(rate * seconds) for rate, seconds in replayed)
    return PublishedRun(
        name=f"inference_sim_{profile}_llama2_7b_h100",
        source=f"{_INFERENCE_SIM}{experiment}/results (config.yaml, summary_lifecycle_metrics.json)",
        vllm_version="V1 (journey tracing; the release is not recorded in the stored files)",
        model="meta-llama/Llama-2-7b-hf",
        gpu="H100-80GB-SXM",
        tensor_parallel_size=1,
        settings=_INFERENCE_SIM_SETTINGS,
        workload=RunWorkload(
            f"inference-perf shared_prefix '{profile}': 10 groups, system prompt {system_prompt_len} tokens, "
            f"prompts {prompt_len} tokens (recorded mean), output {output_len}; {full} (replayed: the first "
            f"{REPLAY_SECONDS_PER_STAGE:.0f} s of each stage)",
            num_requests=count,
            prompt_len=prompt_len,
            output_len=output_len,
            stages=replayed,
            shared_prefix_len=system_prompt_len,
            num_prefix_groups=10,
            num_distinct_prompts=10 * 10,  # config.yaml: num_groups 10 x num_prompts_per_group 10
        ),
        metrics=metrics,
        preset="llama2_7b_h100",
        replay=_INFERENCE_SIM_REPLAY,
        replay_notes=_INFERENCE_SIM_REPLAY_NOTES,
        client="inference_perf",
        first_token_s=first_token_s,
        engine_generation="v1",
        generation_notes="vLLM V1 (its OTEL journey traces are V1's): host work overlapped with the GPU",
    )


V1_RUNS: tuple[PublishedRun, ...] = (
    _inference_sim_run(  # summary_lifecycle_metrics.json: request_latency and time_to_first_token, seconds
        "20260217-155451-llama-2-7b-tp1-codegen",
        "codegen",
        ((5.0, 600.0), (10.0, 600.0)),
        592,  # prompt_len mean 591.63 (580-604); config: system prompt 100 + question 466
        247,
        100,
        {"mean_e2e_s": 2.08074, "median_e2e_s": 2.11062, "mean_ttft_s": 0.027982, "median_ttft_s": 0.027236},
        0.016297,  # time_to_first_token min (stage_1_lifecycle_metrics.json's min too)
    ),
    _inference_sim_run(
        "20260217-162547-llama-2-7b-tp1-roleplay",
        "roleplay",
        ((6.0, 1200.0),),
        786,  # prompt_len mean 785.84 (770-806); config: system prompt 150 + question 600
        251,
        150,
        {"mean_e2e_s": 2.07112, "median_e2e_s": 2.06609, "mean_ttft_s": 0.027129, "median_ttft_s": 0.026828},
        0.019211,  # time_to_first_token min
    ),
)
