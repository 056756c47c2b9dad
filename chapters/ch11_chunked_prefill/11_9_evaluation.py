# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 11.9-11.10 · Evaluation and misconceptions · 评估与常见误解
#
# - §11.9 evaluates chunked prefill the way a serving team would: a seeded workload shaped like real
#   traffic, arriving over time. It reports tail latencies, queues, KV usage and preemptions, plus the
#   Prometheus metrics that a vLLM server exports.
# - §11.10 takes five common beliefs about chunked prefill and tests each one with an experiment.
# - GPU-scale numbers come from the simulator: the real `Scheduler`, with a virtual clock priced as
#   Llama-2-7B on an A100. They are deterministic. The last experiment runs the real model
#   (SmolLM2-135M on this CPU).

# %%
from minivllm.metrics.summary import summarize
from minivllm.sim.run import simulate
from minivllm.sim.workload import make_workload

PRESET = "llama2_7b_a100"  # cost model of the simulator: Llama-2-7B, fp16, one A100 (6,797 KV blocks of 16)

# %% [markdown]
# ## 11.9 Evaluating like production · 生产级评估
#
# - **Workload**: prompt and output lengths follow a published trace (ShareGPT conversations), arrivals are
#   Poisson at a rate close to what the server can sustain, and the seed is fixed so every run is the same.
# - **Distributions, not means**: SLOs are written on tails (TTFT p99, ITL p99), so we report p50 / p95 /
#   p99 for each metric.
# - **Engine state over time**: running and waiting queues, KV-cache usage, preemptions.
# - Three settings on the same requests: chunked with budget 512, chunked with budget 2048 (the V1
#   default) and chunking off.

# %%
workload = make_workload("sharegpt", 80, rate=2.5, arrival="poisson", seed=0, vocab_size=32000, max_model_len=4096)
st = workload.stats()
print(f"{st['num_requests']} requests over {st['duration']:.1f} s (Poisson, mean {st['mean_rate']:.2f} req/s)")
print(f"prompt tokens: mean {st['prompt_mean']:.0f}, median {st['prompt_median']:.0f}, p90 {st['prompt_p90']:.0f}")
print(f"output tokens: mean {st['output_mean']:.0f}, median {st['output_median']:.0f}, p90 {st['output_p90']:.0f}")

# %%
CONFIGS = {
    "budget 512": dict(max_num_batched_tokens=512),
    "budget 2048": dict(max_num_batched_tokens=2048),
    "unchunked": dict(max_num_batched_tokens=4096, enable_chunked_prefill=False),
}
runs = {}
for label, settings in CONFIGS.items():
    result = simulate(workload.requests, preset=PRESET, max_num_seqs=128, max_model_len=4096, **settings)
    assert result.ok, result.message
    runs[label] = result.trace
summaries = {label: summarize(trace) for label, trace in runs.items()}

ROWS = [  # (label, how to read it from a MetricsSummary, format)
    ("TTFT p50 (ms)", lambda m: m.ttft.p50 * 1e3, ".0f"),
    ("TTFT p95 (ms)", lambda m: m.ttft.p95 * 1e3, ".0f"),
    ("TTFT p99 (ms)", lambda m: m.ttft.p99 * 1e3, ".0f"),
    ("TPOT p50 (ms)", lambda m: m.tpot.p50 * 1e3, ".1f"),
    ("TPOT p95 (ms)", lambda m: m.tpot.p95 * 1e3, ".1f"),
    ("TPOT p99 (ms)", lambda m: m.tpot.p99 * 1e3, ".1f"),
    ("ITL p99 (ms)", lambda m: m.itl.p99 * 1e3, ".1f"),
    ("ITL max (ms)", lambda m: m.itl.max * 1e3, ".0f"),
    ("queue time p99 (ms)", lambda m: m.queue_time.p99 * 1e3, ".0f"),
    ("max waiting requests", lambda m: m.max_num_waiting, "d"),
    ("max running requests", lambda m: max(m.series.num_running), "d"),
    ("max KV usage", lambda m: m.max_kv_usage, ".0%"),
    ("preemptions", lambda m: m.num_preemptions, "d"),
    ("prefix-cache hit tokens", lambda m: m.prefix_cache_hits, "d"),
    ("output tokens / s", lambda m: m.output_throughput, ".0f"),
    ("engine steps", lambda m: m.num_steps, "d"),
]
print(f"{'':24}" + "".join(f"{label:>14}" for label in summaries))
for name, get, fmt in ROWS:
    print(f"{name:24}" + "".join(f"{get(m):>14{fmt}}" for m in summaries.values()))

# %%
best = {
    "lowest TTFT p50": min(summaries, key=lambda k: summaries[k].ttft.p50),
    "lowest TPOT p99": min(summaries, key=lambda k: summaries[k].tpot.p99),
    "lowest ITL p99": min(summaries, key=lambda k: summaries[k].itl.p99),
    "lowest ITL max": min(summaries, key=lambda k: summaries[k].itl.max),
    "highest output tokens / s": max(summaries, key=lambda k: summaries[k].output_throughput),
}
for what, label in best.items():
    print(f"{what:>26}: {label}")

# %% [markdown]
# - No setting wins everywhere. Large steps (budget 2048, or no chunking) give the best median TTFT.
#   Small chunks give the smoothest token stream: decodes never wait behind a big prompt.
# - The load is high on purpose: KV usage reaches 100%, requests queue up, and some are preempted. The
#   prefix-cache hits are preempted requests that find their own blocks again (§11.8.3).
# - The full report of one run (`summarize(trace).table()`):

# %%
print(summaries["budget 2048"].table())

# %% [markdown]
# - Stalls are inter-token gaps above 5x the median gap (Sarathi-Serve's "generation stalls").
# - Distributions show more than percentiles: the TTFT and TPOT CDFs of the three runs.

# %%
from minivllm.viz.figures import latency_cdfs

latency_cdfs(runs, title="TTFT and TPOT, ShareGPT at 2.5 req/s (simulated Llama-2-7B, A100)")

# %%
from minivllm.viz.figures import queue_kv_over_time


def first_time(times, flags):
    t = next((t for t, flag in zip(times, flags) if flag), None)
    return "never" if t is None else f"{t:.1f} s"


for label, m in summaries.items():
    s = m.series
    print(f"{label:>12}: KV cache full (>= 99%) from {first_time(s.time, [u >= 0.99 for u in s.kv_usage])},"
          f" first preemption at {first_time(s.time, s.num_preemptions)}, at most {max(s.num_waiting)} waiting")
fig = queue_kv_over_time(runs["budget 2048"], title="Queues and KV usage over time (budget 2048)")
for line in fig.data:  # whole milliseconds and 3 digits of usage keep the saved notebook small
    line.x = [round(t) for t in line.x]
    line.y = [round(y, 3) for y in line.y]
fig  # noqa: B018 (the cell's value is what Jupyter displays)

# %% [markdown]
# - The running queue grows until the KV cache is full. After that new requests wait, and the engine
#   preempts to make room for the running ones' next tokens.
# - Preemption also explains the ITL max, about the same in all three runs. The worst gap is a preempted
#   request waiting to be readmitted, not a prefill:

# %%
for label, trace in runs.items():
    worst = max(trace.requests.values(), key=lambda rec: max(rec.itls, default=0.0))
    print(f"{label:>12}: worst gap {max(worst.itls) * 1e3:.0f} ms in {worst.request_id},"
          f" preempted {worst.num_preemptions} time(s)")  # fmt: skip

# %% [markdown]
# ### 11.9.1 The Prometheus view · Prometheus 指标
#
# - A vLLM server exports these numbers on `/metrics`, with vLLM's names. `prometheus_text(trace)`
#   writes the same page for a finished run: gauges from the last step, counters and histograms over the
#   whole run.
# - A few lines of it:

# %%
from minivllm.metrics.prometheus import prometheus_text

text = prometheus_text(runs["budget 2048"], model_name="llama-2-7b")
lines = text.splitlines()
print(len(lines), "lines; a few of them:")
wanted = ("vllm:num_preemptions_total{", "vllm:prompt_tokens_total{", "vllm:generation_tokens_total{",
          "vllm:prefix_cache_hits_total{", "# TYPE vllm:time_to_first_token_seconds ")  # fmt: skip
ttft_buckets = [x for x in lines if x.startswith("vllm:time_to_first_token_seconds_")]
for line in lines:
    if line.startswith(wanted):
        print(line)
for line in ttft_buckets:
    if any(f'le="{b}"' in line for b in ("0.25", "0.5", "1.0", "2.5", "5.0", "+Inf")) or "_count" in line:
        print(line)

# %% [markdown]
# - A dashboard estimates quantiles from histogram buckets (`histogram_quantile`). The bucket tells you
#   a range, not a number. The p99 TTFT lies in the first bucket that holds 99% of the requests:

# %%
counts = [(x.split('le="')[1].split('"')[0], float(x.rsplit(" ", 1)[1])) for x in ttft_buckets if 'le="' in x]
total = counts[-1][1]
k = next(i for i, (_, c) in enumerate(counts) if c >= 0.99 * total)
print(f"Prometheus buckets: TTFT p99 is in ({counts[k - 1][0]}, {counts[k][0]}] s")
print(f"exact, from the trace: TTFT p99 = {summaries['budget 2048'].ttft.p99:.3f} s")

# %% [markdown]
# ## 11.10 Five misconceptions · 五个常见误解
#
# - Each belief is stated, then tested. The verdict printed under each experiment is computed from its
#   numbers.
#
# ### 11.10.1 "Chunked prefill makes everything faster" · 误解一：分块预填充让一切都更快
#
# - Experiment A: one 4,000-token prompt alone, chunked (budget 512) and unchunked. Compare its TTFT.
# - Experiment B: 32 conversation requests all at once (offline). Compare the total time and the
#   decodes' ITL tail.

# %%
from minivllm.sampling_params import SamplingParams
from minivllm.sim.workload import WorkloadRequest

CHUNKED = dict(max_num_batched_tokens=512)
UNCHUNKED = dict(max_num_batched_tokens=4096, enable_chunked_prefill=False)
lone = [WorkloadRequest("doc", 0.0, list(range(3, 4003)), SamplingParams(max_tokens=8, ignore_eos=True))]
offline = make_workload("azure_conv", 32, rate=None, seed=0, vocab_size=32000, max_model_len=4096).requests
result = {}
for label, settings in (("chunked 512", CHUNKED), ("unchunked", UNCHUNKED)):
    a = summarize(simulate(lone, preset=PRESET, max_num_seqs=32, max_model_len=4096, **settings).trace)
    b = summarize(simulate(offline, preset=PRESET, max_num_seqs=32, max_model_len=4096, **settings).trace)
    result[label] = (a.ttft.p50, b.duration, b.itl.p99)
    print(f"{label:>11}: A: TTFT {a.ttft.p50 * 1e3:.1f} ms in {a.num_steps} steps | B: all done in"
          f" {b.duration:.2f} s, ITL p99 {b.itl.p99 * 1e3:.1f} ms")  # fmt: skip
(ttft_c, total_c, itl_c), (ttft_u, total_u, itl_u) = result.values()
slower = ttft_c > ttft_u and total_c > total_u
print(f"Verdict: {'false' if slower else 'not refuted'} — chunking made the lone prompt's TTFT"
      f" {ttft_c / ttft_u - 1:+.0%} and the offline batch's total time {total_c / total_u - 1:+.1%};"
      f" what it buys is a {itl_u / itl_c:.1f}x lower ITL p99 for the decodes.")  # fmt: skip

# %% [markdown]
# - Chunking adds steps: each step pays the fixed overhead again, and each later chunk re-reads the KV
#   of the earlier ones.
# - It is a latency trade: smoother decodes in exchange for a slightly later first token and total time.
#   (vLLM maintainers: chunked prefill "does not improve offline throughput".)
#
# ### 11.10.2 "Smaller chunks are always better" · 误解二：块越小越好
#
# - Experiment: the same 80 conversation requests at 6 req/s, one run per budget from 32 to 2048 tokens.

# %%
sweep_workload = make_workload("azure_conv", 80, rate=6.0, seed=1, vocab_size=32000, max_model_len=4096)
sweep = {}
for budget in (32, 64, 128, 256, 512, 1024, 2048):
    trace = simulate(sweep_workload.requests, preset=PRESET, max_num_batched_tokens=budget, max_num_seqs=32,
                     max_model_len=4096).trace  # fmt: skip
    sweep[budget] = summarize(trace).to_dict()
print(f"{'budget':>6} {'TTFT p50 ms':>12} {'TTFT p99 ms':>12} {'ITL p99 ms':>11} {'output tok/s':>13} {'steps':>6}")
for budget, m in sweep.items():
    print(f"{budget:>6} {m['ttft_p50'] * 1e3:>12.0f} {m['ttft_p99'] * 1e3:>12.0f} {m['itl_p99'] * 1e3:>11.1f}"
          f" {m['output_throughput']:>13.0f} {m['num_steps']:>6.0f}")  # fmt: skip
smallest, peak = min(sweep), max(sweep, key=lambda b: sweep[b]["output_throughput"])
worse = sweep[smallest]["output_throughput"] < sweep[peak]["output_throughput"] and (
    sweep[smallest]["ttft_p50"] > sweep[512]["ttft_p50"]
)
print(f"Verdict: {'false' if worse else 'not refuted'} — budget {smallest} gives the lowest ITL but"
      f" {sweep[smallest]['ttft_p50'] / sweep[512]['ttft_p50']:.0f}x the median TTFT of budget 512 and"
      f" {1 - sweep[smallest]['output_throughput'] / sweep[peak]['output_throughput']:.0%} less throughput"
      f" than the peak (budget {peak}).")  # fmt: skip
# Which budgets are as good as the peak? Within 3% of it is within what a simulator can tell apart.
near = [b for b, m in sweep.items() if m["output_throughput"] >= 0.97 * sweep[peak]["output_throughput"]]
print(f"throughput within 3% of the peak: budgets {near} (no winner among them)")

# %%
from minivllm.viz.figures import chunk_size_curves

chunk_size_curves(sweep, title="Chunk size sweep: Azure conversations at 6 req/s (simulated Llama-2-7B, A100)")

# %% [markdown]
# - Tiny chunks pay the fixed per-step cost (weights read, launch, scheduling) for only a few tokens.
#   Prompts then crawl: the queue grows and TTFT explodes.
# - The right budget is the largest one whose ITL still meets the SLO (§11.7).
#
# ### 11.10.3 "Chunking reduces the compute" · 误解三：分块减少了计算量
#
# - Experiment: one 2,048-token prompt, prefilled in chunks of 2048, 1024, 512, 128 and 32 tokens.
#   From each run's steps (`shapes_from_steps`: tokens and KV context per step) we count the prompt tokens
#   through the linear layers, the causal attention pairs (query, key), and the KV tokens read back
#   from the cache.

# %%
from minivllm.sim.cost_model import CostModel, shapes_from_steps

cost = CostModel.from_preset(PRESET)
doc = [WorkloadRequest("doc", 0.0, list(range(3, 2051)), SamplingParams(max_tokens=1, ignore_eos=True))]
print(f"{'chunk':>6} {'steps':>6} {'tokens':>7} {'attention pairs':>16} {'KV tokens read':>15} {'KV GB read':>11}"
      f" {'prefill ms':>11}")  # fmt: skip
rows = {}
for chunk in (2048, 1024, 512, 128, 32):
    trace = simulate(doc, preset=PRESET, max_num_batched_tokens=chunk, max_num_seqs=1, max_model_len=4096).trace
    shapes = shapes_from_steps(trace.steps)
    tokens = sum(q for shape in shapes for q, _ in shape)
    pairs = sum(q * k + q * (q + 1) // 2 for shape in shapes for q, k in shape)
    kv_read = sum(k for shape in shapes for _, k in shape)
    rows[chunk] = (tokens, pairs, kv_read)
    gb, ms = kv_read * cost.kv_bytes_per_token / 1e9, trace.steps[-1].end * 1e3
    print(f"{chunk:>6} {len(shapes):>6} {tokens:>7} {pairs:>16} {kv_read:>15} {gb:>11.1f} {ms:>11.1f}")
same_work = len({r[:2] for r in rows.values()}) == 1
more_reads = rows[32][2] > rows[2048][2]
print(f"Verdict: {'false' if same_work and more_reads else 'not refuted'} — every chunk size computes the same"
      f" {rows[2048][0]} tokens and {rows[2048][1]} attention pairs; chunks of 32 also re-read"
      f" {rows[32][2]} KV tokens that one whole prefill never reads.")  # fmt: skip

# %% [markdown]
# - Chunking moves work around, it does not remove any. It adds KV reads: chunk `i` reads the K/V of
#   all earlier chunks, about `P² / (2c)` tokens in total for a prompt of `P` tokens in chunks of `c`.
#
# ### 11.10.4 "V1 has a separate chunked-prefill code path" · 误解四：V1 有一条单独的分块预填充代码路径
#
# - Experiment A: read the scheduler. Which methods mention prefill or chunks, and which lines read the
#   switch `enable_chunked_prefill`?
# - Experiment B: replay 24 requests that arrive at once, with chunking on and off. First use a budget that
#   always has room for a whole prompt, then a smaller one.

# %%
import inspect

from minivllm.core.scheduler import Scheduler

methods = [name for name in vars(Scheduler) if callable(getattr(Scheduler, name)) and not name.startswith("__")]
print("Scheduler methods:", methods)
print("methods named after prefill or chunks:", [m for m in methods if "prefill" in m or "chunk" in m])
switch = [line.strip() for line in inspect.getsource(Scheduler).splitlines() if "enable_chunked_prefill" in line]
print(f"lines that read enable_chunked_prefill: {len(switch)}")
for line in switch:
    print("   ", line)

# %%
burst = make_workload("uniform", 24, rate=None, seed=0, vocab_size=32000, max_model_len=1024).requests


def schedule_of(budget, chunked):
    trace = simulate(burst, preset=PRESET, max_num_batched_tokens=budget, max_num_seqs=16, max_model_len=1024,
                     enable_chunked_prefill=chunked).trace  # fmt: skip
    return trace, [(s.prefill_tokens, s.decode_tokens) for s in trace.steps]


_, on = schedule_of(16 * 1024, chunked=True)
_, off = schedule_of(16 * 1024, chunked=False)
print(f"budget 16384 (room for 16 whole prompts): identical schedules on/off: {on == off} ({len(on)} steps)")
trace_on, on = schedule_of(1024, chunked=True)
trace_off, off = schedule_of(1024, chunked=False)
k = next(i for i, (a, b) in enumerate(zip(on, off)) if a != b)
print(f"budget 1024: identical: {on == off}; first difference at step {k}")
for req_id in on[k][0].keys() - off[k][0].keys():
    prompt = trace_on.requests[req_id].num_prompt_tokens
    left = 1024 - sum(off[k][0].values()) - sum(off[k][1].values())
    print(f"  chunking on:  {req_id} gets a chunk of {on[k][0][req_id]} of its {prompt} prompt tokens")
    print(f"  chunking off: {req_id} needs {prompt} tokens, only {left} are left, so it waits")
one_path = len(switch) == 1 and not [m for m in methods if "prefill" in m or "chunk" in m]
print(f"Verdict: {'false' if one_path else 'not refuted'} — one schedule() serves both settings; the switch is"
      " one admission rule in the waiting loop (a prompt that does not fit the budget left waits).")  # fmt: skip

# %% [markdown]
# - V1 has no prefill phase and no decode phase to switch between. Each request has
#   `num_computed_tokens` chasing `num_tokens`; chunking is the `min(..., token_budget)` in
#   `_num_new_tokens`. Switching it off only forbids admitting a partial prompt.
#
# ### 11.10.5 "A preempted request loses all its work" · 误解五：被抢占的请求会丢失全部工作
#
# - Experiment (the real model): a library question decodes 16 tokens, greedy. After 8 decode steps we
#   preempt it ourselves (`scheduler.preempt_request`) and let the engine go on. It runs three times: never
#   preempted, preempted with prefix caching on, preempted with it off.

# %%
from minivllm import EngineConfig, LLMEngine
from minivllm.model.loader import load_model
from minivllm.viz.figures.timeline import recovery_events
from minivllm.worker.model_runner import ModelRunner

loaded = load_model("smollm2")
tok = loaded.tokenizer
question = (
    "You are the assistant of the Riverside city library. The library opens at nine in the morning and closes "
    "at eight in the evening, Monday to Saturday; on Sunday it is closed. Members may borrow up to ten books "
    "for three weeks, and may renew them twice online. Late returns cost twenty cents per book per day. "
    "When does the library close on Saturday?"
)
prompt = tok.encode(
    tok.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True, tokenize=False),
    add_special_tokens=False,
)


def run(preempt_after=None, caching=True):
    """Generate 16 greedy tokens; before step ``preempt_after`` preempt the request ourselves."""
    config = EngineConfig.from_kwargs(max_num_batched_tokens=64, max_num_seqs=2, max_model_len=512,
                                      num_gpu_blocks=64, enable_prefix_caching=caching)  # fmt: skip
    engine = LLMEngine(config, model_runner=ModelRunner(config, loaded))
    engine.add_request("r", prompt, SamplingParams(max_tokens=16, temperature=0.0, ignore_eos=True))
    outputs = None
    while engine.has_unfinished_requests():
        if len(engine.trace.steps) == preempt_after:
            r = engine.scheduler.requests["r"]
            engine.scheduler.preempt_request("r")
            outputs = (len(r.output_token_ids), r.num_computed_tokens)  # tokens kept, progress forgotten
        engine.step()
    return engine, outputs


reference, _ = run()
print("prompt tokens:", len(prompt))
for caching in (True, False):
    engine, (kept_outputs, computed_after) = run(preempt_after=10, caching=caching)
    ev = recovery_events(engine.trace)[0]
    same = engine.outputs["r"].token_ids == reference.outputs["r"].token_ids
    print(f"prefix caching {'on' if caching else 'off'}:")
    print(f"  preempted before step {ev.preempt_step} with {ev.computed_before} tokens computed; it keeps its"
          f" {kept_outputs} output tokens, num_computed_tokens drops to {computed_after}")  # fmt: skip
    print(f"  readmitted in step {ev.resume_step}: {ev.cached} tokens back from the cache, {ev.recomputed} computed"
          f" again; same 16 tokens as never preempted: {same}")  # fmt: skip
    if caching:
        saved, kept = ev.cached, same and kept_outputs > 0
print(f"Verdict: {'false' if kept and saved > 0 else 'not refuted'} — the output tokens are kept, and with"
      f" prefix caching {saved} of the computed tokens came back; only the tail block is computed again.")


# %% [markdown]
# - Preemption forgets the *computation* (`num_computed_tokens = 0`), never the *tokens*: the outputs stay
#   in the request, and the resumed request re-prefills prompt + outputs.
# - With the prefix cache, the blocks it had filled keep their hashes in the free queue, so the re-prefill
#   is mostly hits. Without it, everything is recomputed: the result is the same, only the cost differs.
#
# ## Summary
#
# - Evaluate on a seeded, realistic workload with arrivals over time. Report tails (p95, p99), queues,
#   KV usage and preemptions. `summarize(trace)` and `prometheus_text(trace)` give both the exact and the
#   dashboard view.
# - Chunked prefill is a **trade**, not a speed-up: smoother decodes for a slightly later first token and
#   total time. Chunks that are too small hurt everything except ITL.
# - Chunking never reduces the work: same tokens, same attention pairs, more KV reads.
# - V1 has one scheduling path. Chunking off is one admission rule.
# - Preemption keeps the tokens. The prefix cache brings back the full blocks.

# %% [markdown]
# ## Exercises
#
# 1. `ttft_and_tpot(arrival_time, token_times)`: the TTFT and TPOT of one request from its arrival time and
#    the times its output tokens came out (seconds). TPOT is `None` for a request with a single token.
# 2. `kv_tokens_read(prompt_len, chunk)`: a lone prompt is prefilled in chunks of `chunk` tokens (the
#    budget). Over all its prefill steps, how many tokens already in the KV cache does attention read?
# 3. `tokens_back(num_tokens, num_computed, block_size)`: a request with `num_tokens` tokens, of which
#    `num_computed` are computed, is preempted and readmitted at once (nothing was evicted). How many tokens
#    does the prefix cache give back?
#
# The check functions compare your answer with what the engine does. Solutions are in
# `11_9_evaluation_solutions.ipynb`.

# %%
from minivllm.exercises.ch11_9 import check_exercise_1, check_exercise_2, check_exercise_3


def ttft_and_tpot(arrival_time, token_times):
    ...  # your code here


check_exercise_1(ttft_and_tpot)


# %%
def kv_tokens_read(prompt_len, chunk):
    ...  # your code here


check_exercise_2(kv_tokens_read)


# %%
def tokens_back(num_tokens, num_computed, block_size):
    ...  # your code here


check_exercise_3(tokens_back)
