"""Published vLLM runs replayed in the simulator: published vs simulated, the ratio, each term's share (§11.7).

``python -m minivllm.lab.benchmarks.sim_validation [--output-json PATH] [--max-requests N] [--run NAME ...] [--check]
[--engine-generation NAME [--num-scheduler-steps N]]``

For each run in :data:`minivllm.lab.sim.published_runs.PUBLISHED_RUNS` this builds the run's workload (fixed
lengths, or the per-request lengths the source recorded, at the arrival times it states), saves it and
replays it with ``python -m minivllm bench --mode sim``'s pieces (``sweep.build_parser`` + ``sweep.build_point``:
the real Scheduler, or V0's prefill-first policy where the run used vLLM V0, on a virtual clock priced by the
run's preset: Llama-3-8B on its GPU, built by :mod:`minivllm.lab.sim.gpu_presets`). The metrics are computed
the way the run's client computed them (``benchmark_latency.py``: the batch's wall time; ``benchmark_serving.py``:
per-request TTFT / E2E / TPOT, a request that never streamed text counting TTFT 0; inference-perf: per-request
E2E and TTFT). Each run is priced as the engine generation it ran on (``PublishedRun.engine_generation``,
:mod:`minivllm.lab.sim.generation`: vLLM 0.6's serial host work and multi-step bursts, or V1's overlap), printed
beside every row; ``--engine-generation`` prices every run as another one instead, to show what the choice
carries. It prints one row per
published metric (published, simulated, ratio = simulated / published, the target band) and, per run, each
cost-model term's share of the simulated busy time, so a match cannot hide one term's error behind another's
without showing it. Targets: every metric within ±15%, TTFT within ±25% (issue 19); ``--check`` exits 1 when
a ratio is outside, except on a row the run's record marks not comparable (``PublishedRun.not_comparable``: the
replay lacks what the metric rests on, e.g. SGLang's per-request lengths): that row is still printed with its
ratio, marked "not comparable", and listed with its reason under the table.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from minivllm.config import flag_name
from minivllm.lab.sim.cost_model import CostModel
from minivllm.lab.sim.generation import GENERATIONS, check_generation
from minivllm.lab.sim.published_runs import PUBLISHED_RUNS, PublishedRun, get_run
from minivllm.lab.sim.run import run_workload
from minivllm.lab.sim.workload import Workload, WorkloadRequest
from minivllm.sampling_params import SamplingParams

TOLERANCE = {"ttft": 0.25, "other": 0.15}  # |ratio - 1| allowed: TTFT metrics, every other metric
ABLATIONS = {  # --ablate: a term left out (its coefficients 0), to show what each one carries
    "host": ("host_step_s", "per_request_s"),
    "attention": ("attn_floor_s", "attn_pair_s"),
    "kv_read": ("kv_read_s_per_byte",),
    "intake": ("intake_per_request_s",),
}
HEADER = ("run", "generation", "metric", "published", "simulated", "ratio", "target")


def tolerance(metric: str) -> float:
    return TOLERANCE["ttft" if "ttft" in metric else "other"]


def build_workload(run: PublishedRun, vocab_size: int, max_requests: int | None = None, seed: int = 0) -> Workload:
    """The run's requests (the first ``max_requests`` of them if given), random token ids, ignore_eos. With
    ``num_distinct_prompts`` (inference-perf's prompt pool) request i sends pool prompt i % N; with stages too,
    the pool is sent once first at the first stage's rate (``warm-*``, not counted by :func:`client_metrics`),
    so the counted requests meet the prefix cache as the published run did after its first N."""
    w = run.workload
    lengths = w.lengths()[:max_requests]
    rng = np.random.default_rng(seed)
    rate = w.request_rate
    warm = w.num_distinct_prompts if w.stages else 0  # the pool's first pass, before the measured window
    if w.stages:  # constant-rate stages: evenly spaced arrivals
        times = np.array(w.arrival_times()[: len(lengths)]) + warm / w.stages[0][0]
    else:
        gaps = rng.exponential(1.0 / rate, len(lengths) - 1) if rate else np.zeros(len(lengths) - 1)
        times = np.concatenate([[0.0], np.cumsum(gaps)])
    groups = max(1, w.num_prefix_groups)
    prefixes = [rng.integers(3, vocab_size, w.shared_prefix_len).tolist() for _ in range(groups)]
    pool: dict[int, list[int]] = {}  # num_distinct_prompts: prompt i % N, drawn once (the client's pool)

    def prompt(i: int, p: int) -> list[int]:
        if not w.num_distinct_prompts:
            return prefixes[i % groups] + rng.integers(3, vocab_size, p - w.shared_prefix_len).tolist()
        j = i % w.num_distinct_prompts
        if j not in pool:
            pool[j] = prefixes[j % groups] + rng.integers(3, vocab_size, p - w.shared_prefix_len).tolist()
        return pool[j]

    def request(name: str, i: int, t: float, p: int, o: int) -> WorkloadRequest:
        return WorkloadRequest(name, t, prompt(i, p), SamplingParams(max_tokens=o, temperature=0.0, ignore_eos=True))

    # warm-up: the pool's first pass at the first stage's rate (every later request finds its prompt cached, as
    # in the published run after its first num_distinct_prompts requests); not counted (client_metrics: req-*)
    requests = [request(f"warm-{k}", k, k / w.stages[0][0], *w.lengths()[k]) for k in range(warm)]
    requests += [request(f"req-{i}", i, float(t), p, o) for i, ((p, o), t) in enumerate(zip(lengths, times))]
    params = {"published_run": run.name, "num_requests": len(lengths), "request_rate": rate, "warm_up": warm}
    return Workload(f"published:{run.name}", seed, requests, params)


def bench_argv(run: PublishedRun, workload_path: str, cost_model: str) -> list[str]:
    """``python -m minivllm bench`` flags for this run (the run's replay settings, vLLM-named)."""
    argv = ["--mode", "sim", "--cost-model", cost_model, "--workload", workload_path, "--no-progress"]
    for name, value in run.replay.items():
        if isinstance(value, bool):
            argv.append(flag_name(name) if value else "--no-" + flag_name(name)[2:])
        else:
            argv += [flag_name(name), str(value)]
    return argv


def intake_per_request(run: PublishedRun, model: CostModel, fastest_engine_ttft: float | None = None) -> float:
    """The API server's intake per request. A burst at t = 0 (the ShareGPT-320 runs): the run's fastest first
    token, less the first prefill step the scheduler runs (whole prompts in queue order up to the budget), spread
    over the burst's requests. Spaced arrivals (inference-perf's stages; ``fastest_engine_ttft`` given): the
    fastest published first token less the fastest simulated one without intake (each request's own server work,
    paid once: requests spaced wider than it never queue, minivllm.lab.sim.intake)."""
    if run.first_token_s is None:
        return 0.0
    if fastest_engine_ttft is not None:
        return max(0.0, run.first_token_s - fastest_engine_ttft)
    budget, tokens = int(run.replay.get("max_num_batched_tokens", 2048)), 0
    first: list[tuple[int, int]] = []
    for p, _ in run.workload.lengths():
        if tokens + p > budget or len(first) >= int(run.replay.get("max_num_seqs", 256)):
            break
        first.append((p, 0))
        tokens += p
    return max(0.0, run.first_token_s - model.step_time(first)) / run.workload.num_requests


def client_metrics(run: PublishedRun, trace: Any, recorded_outputs: list[int]) -> dict[str, float]:
    """The run's metrics from the simulated trace, as its client computes them."""
    recs = [trace.requests[f"req-{i}"] for i in range(len(recorded_outputs))]
    start, end = min(r.arrival_time for r in recs), max(r.finish_time for r in recs)
    if run.client == "benchmark_latency":
        return {"latency_avg_ms": (end - start) * 1e3}
    if run.client == "inference_perf":  # request_latency and time_to_first_token over every request
        e2e_all = [r.finish_time - r.arrival_time for r in recs]
        ttft_all = [r.ttft for r in recs]
        return {
            "mean_e2e_s": statistics.fmean(e2e_all),
            "median_e2e_s": statistics.median(e2e_all),
            "mean_ttft_s": statistics.fmean(ttft_all),
            "median_ttft_s": statistics.median(ttft_all),
        }
    # benchmark_serving.py: ttft stays 0 when no text ever arrived; tpot only for outputs of 2+ tokens
    ttft = [0.0 if out == 0 else r.ttft for r, out in zip(recs, recorded_outputs)]
    e2e = [r.finish_time - r.arrival_time for r in recs]
    tpot = [(e - t) / (out - 1) for e, t, out in zip(e2e, ttft, recorded_outputs) if out > 1]
    return {
        "median_e2e_s": statistics.median(e2e),
        "mean_e2e_s": statistics.fmean(e2e),
        "mean_ttft_s": statistics.fmean(ttft),
        "median_ttft_s": statistics.median(ttft),
        "median_tpot_ms": statistics.median(tpot) * 1e3,
        "duration_s": end - start,
        "output_throughput_tok_s": sum(recorded_outputs) / (end - start),
    }


def replay(
    run: PublishedRun,
    max_requests: int | None = None,
    without: str | None = None,
    engine_generation: str | None = None,
    num_scheduler_steps: int | None = None,
) -> dict[str, Any]:
    """Run one published run in the simulator; its rows (published, simulated, ratio) and the term shares.
    ``without``: a key of ABLATIONS, replayed with that term left out. ``engine_generation`` /
    ``num_scheduler_steps``: price the run as that engine instead of the one it ran on."""
    from minivllm.lab.benchmarks import sweep

    generation = engine_generation or run.engine_generation
    if num_scheduler_steps is None:
        num_scheduler_steps = run.num_scheduler_steps if engine_generation is None else 1
    check_generation(generation, num_scheduler_steps)
    model = CostModel.from_preset(run.preset)
    model.engine_generation, model.num_scheduler_steps = generation, num_scheduler_steps
    for name in ABLATIONS[without] if without else ():
        setattr(model, name, 0.0)
    workload = build_workload(run, model.vocab_size, max_requests)
    measured = int(workload.params["num_requests"])
    recorded = list(run.workload.output_lens[:measured]) or [o for _, o in run.workload.lengths()[:measured]]

    def simulate() -> tuple[Any, list[str]]:
        with tempfile.TemporaryDirectory() as tmp:
            path, preset_path = str(Path(tmp) / "workload.json"), str(Path(tmp) / f"{run.preset}.json")
            workload.save(path)
            model.save(preset_path)
            argv = bench_argv(run, path, preset_path)
            engine, loaded, intake = sweep.build_point(sweep.build_parser().parse_args(argv), {}, {})
            run_workload(engine, loaded.requests, intake=intake)
        return engine, [run.preset if a == preset_path else ("<workload.json>" if a == path else a) for a in argv]

    fastest = None
    if run.first_token_s is not None and run.workload.stages and without != "intake":  # spaced arrivals
        engine, _ = simulate()  # without intake: the engine's own fastest first token
        fastest = min(engine.trace.requests[f"req-{i}"].ttft for i in range(measured))
    if without != "intake":
        model.intake_per_request_s = intake_per_request(run, model, fastest)
    engine, argv = simulate()
    simulated = client_metrics(run, engine.trace, recorded)
    rows = []
    for name, published in run.metrics.items():
        ratio = simulated[name] / published
        ok = abs(ratio - 1) <= tolerance(name)
        row = {"metric": name, "published": published, "simulated": simulated[name], "ratio": ratio, "ok": ok}
        if name in run.not_comparable:  # printed with its ratio, never counted by --check
            row["not_comparable"] = run.not_comparable[name]
        rows.append(row)
    waits = [r.arrival_time for r in engine.trace.requests.values()]
    intake = model.intake()
    ready = intake(sorted(waits)) if intake is not None else sorted(waits)
    mean_intake = statistics.fmean(b - a for a, b in zip(sorted(waits), ready))
    return {
        "run": run.name,
        "source": run.source,
        "vllm_version": run.vllm_version,
        "model": run.model,
        "gpu": run.gpu,
        "tensor_parallel_size": run.tensor_parallel_size,
        "workload": run.workload.description,
        "num_requests": measured,
        "num_warm_up_requests": len(workload.requests) - measured,
        "preset": run.preset,
        "engine_generation": generation,
        "num_scheduler_steps": num_scheduler_steps,
        "generation_notes": run.generation_notes if generation == run.engine_generation else "--engine-generation",
        "kv_bytes_per_token": model.kv_bytes_per_token,
        "num_gpu_blocks": engine.config.cache_config.num_gpu_blocks,
        "intake_per_request_s": model.intake_per_request_s,
        "mean_intake_wait_s": mean_intake,
        "bench_argv": argv,
        "replay_notes": run.replay_notes,
        "term_shares": engine.model_runner.term_shares(),
        "num_preemptions": sum(r.num_preemptions for r in engine.trace.requests.values()),
        "rows": rows,
    }


def counted(r: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of one replayed run that ``--check`` counts as outside: ratio outside its band, comparable."""
    return [row for row in r["rows"] if not row["ok"] and "not_comparable" not in row]


def _fmt(x: float) -> str:
    return f"{x:.4g}" if math.isfinite(x) else str(x)


def format_table(results: list[dict[str, Any]]) -> str:
    """One line per (run, metric): run, engine generation, metric, published, simulated, ratio, target band (and
    'OUTSIDE' when the ratio misses it, or 'not comparable' for a metric the run's record says the replay cannot
    reproduce: its reason is in the run's assumptions)."""
    lines = [list(HEADER)]
    for r in results:
        for row in r["rows"]:
            tol = tolerance(row["metric"])
            mark = " not comparable" if "not_comparable" in row else ("" if row["ok"] else " OUTSIDE")
            band = f"{1 - tol:.2f}-{1 + tol:.2f}" + mark
            cells = [r["run"], generation_label(r), row["metric"], _fmt(row["published"]), _fmt(row["simulated"])]
            lines.append([*cells, f"{row['ratio']:.3f}", band])
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
    return "\n".join(
        "  ".join(
            x.ljust(w) if i in (0, 1, 2, 6) else x.rjust(w) for i, (x, w) in enumerate(zip(line, widths))
        ).rstrip()
        for line in lines
    )


def generation_label(r: dict[str, Any]) -> str:
    """``v1``, ``v0.6-multistep`` or ``v0.6-multistep/10`` (num_scheduler_steps when it is not 1)."""
    steps = r["num_scheduler_steps"]
    return r["engine_generation"] + (f"/{steps}" if steps != 1 else "")


def format_ablations(
    runs: list[PublishedRun],
    max_requests: int | None,
    full: list[dict[str, Any]],
    engine_generation: str | None = None,
    num_scheduler_steps: int | None = None,
) -> str:
    """Ratio per (run, metric) with every term, and with each term of ABLATIONS left out (each run priced as in
    ``full``: its own engine generation unless one is given)."""
    columns = {
        "all terms": full,
        **{
            f"no {k}": [replay(r, max_requests, k, engine_generation, num_scheduler_steps) for r in runs]
            for k in ABLATIONS
        },
    }
    lines = [["run", "metric", *columns]]
    for i, r in enumerate(full):
        for j, row in enumerate(r["rows"]):
            lines.append([r["run"], row["metric"], *(f"{col[i]['rows'][j]['ratio']:.3f}" for col in columns.values())])
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join(
        "  ".join(x.ljust(w) if i < 2 else x.rjust(w) for i, (x, w) in enumerate(zip(line, widths))) for line in lines
    )


def describe(r: dict[str, Any]) -> str:
    shares = ", ".join(f"{k} {v:.0%}" for k, v in r["term_shares"].items())
    intake = (
        f"; API-server intake {r['intake_per_request_s'] * 1e3:.2f} ms/request "
        f"(mean wait {r['mean_intake_wait_s']:.2f} s)"
        if r["intake_per_request_s"]
        else ""
    )
    return (
        f"{r['run']}: {r['model']} on {r['gpu']}, TP{r['tensor_parallel_size']}, vLLM {r['vllm_version']}\n"
        f"  source: {r['source']}\n"
        f"  workload: {r['workload']} ({r['num_requests']} replayed)\n"
        f"  engine generation: {generation_label(r)}: {r['generation_notes']}\n"
        f"  preset {r['preset']}: KV {r['kv_bytes_per_token']:,} B/token, "
        f"{r['num_gpu_blocks']:,} blocks of 16{intake}\n"
        f"  busy time by term: {shares}\n"
        f"  replay: {' '.join(r['bench_argv'])}; {r['num_preemptions']} preemptions\n"
        f"  assumptions: {r['replay_notes']}"
        + "".join(
            f"\n  not comparable (printed, not checked): {row['metric']}: {row['not_comparable']}"
            for row in r["rows"]
            if "not_comparable" in row
        )
    )


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(
        prog="python -m minivllm.lab.benchmarks.sim_validation", description=__doc__.splitlines()[0]
    )
    p.add_argument("--output-json", help="write every run's rows, source, settings and term shares here")
    p.add_argument("--max-requests", type=int, help="replay only each run's first N requests (a quick check)")
    p.add_argument("--run", action="append", default=[], help="replay only this run (repeatable)")
    p.add_argument("--check", action="store_true", help="exit 1 when a ratio is outside its target")
    p.add_argument("--ablate", action="store_true", help="also replay each run with each term left out")
    p.add_argument(
        "--engine-generation",
        help=f"price every run as this engine ({', '.join(GENERATIONS)}) instead of the one it ran on",
    )
    p.add_argument("--num-scheduler-steps", type=int, help="with --engine-generation v0.6-multistep: the burst length")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.max_requests is not None and args.max_requests < 1:
        p.error(f"--max-requests must be >= 1, got {args.max_requests}")
    try:
        runs = [get_run(n) for n in args.run] if args.run else list(PUBLISHED_RUNS)
    except ValueError as e:
        p.error(f"--run: {e}")
    if args.num_scheduler_steps is not None and args.engine_generation is None:
        p.error("--num-scheduler-steps needs --engine-generation (each run's own setting is used otherwise)")
    if args.engine_generation is not None:
        try:
            check_generation(args.engine_generation, args.num_scheduler_steps or 1)
        except ValueError as e:
            flag = "--engine-generation" if "engine_generation must" in str(e) else "--num-scheduler-steps"
            p.error(f"{flag}: {e}")
    results = [replay(run, args.max_requests, None, args.engine_generation, args.num_scheduler_steps) for run in runs]
    for r in results:
        print(describe(r))
    print()
    print(format_table(results))
    if args.output_json:
        doc = {"argv": sys.argv[1:] if argv is None else list(argv), "max_requests": args.max_requests, "runs": results}
        Path(args.output_json).write_text(json.dumps(doc, indent=1) + "\n")
    if args.ablate:
        print()
        print(format_ablations(runs, args.max_requests, results, args.engine_generation, args.num_scheduler_steps))
    outside = [f"{r['run']} {row['metric']}" for r in results for row in counted(r)]
    if args.check and outside:
        print(f"outside the target: {', '.join(outside)}")
        raise SystemExit(1)
    return results


if __name__ == "__main__":
    main()
