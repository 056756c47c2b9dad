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
# # Chapter 11.7 · Choosing the chunk size · 如何选择块大小
#
# - The chunk size is the token budget per step, `max_num_batched_tokens`. One number trades the latency of
#   new requests (TTFT) against the smoothness of running ones (TPOT, ITL).
# - GPU-scale numbers come from the simulator: the real Scheduler, with each step priced by a cost model of
#   Llama-2-7B on an A100 (virtual clock, deterministic). One section runs the real model on this CPU.
# - Then the other knobs (`long_prefill_token_threshold`, KV blocks, `max_num_seqs`), vLLM's defaults, and
#   a symptom → knob table, each row backed by an experiment.

# %%
from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.metrics.summary import summarize
from minivllm.sim.cost_model import CostModel
from minivllm.sim.sim_runner import SimRunner
from minivllm.sim.workload import make_workload

A100 = CostModel.from_preset("llama2_7b_a100")


def sim_run(requests, max_model_len=4096, **engine_kwargs):
    """One engine (vLLM-named settings) on the simulator, run to the end; returns its trace."""
    config = EngineConfig.from_kwargs(model="none", max_model_len=max_model_len, **engine_kwargs)
    engine = LLMEngine(config, model_runner=SimRunner(A100, vocab_size=A100.vocab_size, config=config))
    engine.run(requests)
    return engine.trace


workload = make_workload("azure_conv", 100, seed=0, vocab_size=A100.vocab_size, max_model_len=4096)
stats = workload.stats()
print(f"{len(workload.requests)} requests, all at t = 0; prompt mean {stats['prompt_mean']:.0f} tokens, "
      f"output mean {stats['output_mean']:.0f} tokens")
print(f"KV cache: {A100.num_blocks(16)} blocks of 16 tokens; max_num_seqs 64")

# %% [markdown]
# ## 11.7 Choosing the chunk size · 如何选择块大小
#
# ### 11.7.1 Four curves · 四条曲线
#
# - Azure conversation lengths (prompt ~1.2k tokens, output ~200), 100 requests at once: the engine is
#   saturated, so the budget decides how the work is cut up.
# - One run per budget from 64 to 8192 tokens. The table is the one `python -m minivllm bench --mode sim
#   --cost-model llama2_7b_a100 --workload azure_conv --num-prompts 100 --max-num-seqs 64
#   --max-model-len 4096 --sweep max-num-batched-tokens=64,...,8192` prints.

# %%
from minivllm.benchmarks.sweep import format_table

BUDGETS = [64, 128, 256, 512, 1024, 2048, 4096, 8192]
traces = {b: sim_run(workload.requests, max_num_batched_tokens=b, max_num_seqs=64) for b in BUDGETS}
metrics = {b: summarize(t).to_dict() for b, t in traces.items()}
print(format_table([{"point": {"max_num_batched_tokens": b}, "metrics": m} for b, m in metrics.items()]))

# %% [markdown]
# - Two more columns. **Tokens per step**: how full the steps ran. **Goodput**: output tokens per second
#   counting only requests whose TPOT met a 50 ms SLO (the "capacity under an SLO" of Sarathi-Serve).

# %%
from minivllm.viz.figures.curves import tokens_per_step

SLO = 0.050  # seconds per output token


def goodput(trace, slo=SLO):
    ok = 0
    for r in trace.requests.values():
        tpot = (r.token_times[-1] - r.token_times[0]) / (r.num_output_tokens - 1) if r.num_output_tokens > 1 else 0
        ok += r.num_output_tokens if tpot <= slo else 0
    return ok / summarize(trace).duration


good = {b: goodput(t) for b, t in traces.items()}
print(f"{'budget':>6} {'tokens/step':>11} {'goodput tok/s':>13} {'requests within SLO':>19}")
for b, t in traces.items():
    within = sum(1 for r in t.requests.values() if r.num_output_tokens < 2
                 or (r.token_times[-1] - r.token_times[0]) / (r.num_output_tokens - 1) <= SLO)  # fmt: skip
    print(f"{b:>6} {tokens_per_step(metrics[b]):>11.1f} {good[b]:>13.0f} {within:>15}/{len(t.requests)}")

# %%
ttft = [metrics[b]["ttft_p50"] for b in BUDGETS]
tpot = [metrics[b]["tpot_p99"] for b in BUDGETS]
thr = [metrics[b]["output_throughput"] for b in BUDGETS]
tps = [tokens_per_step(metrics[b]) for b in BUDGETS]
peak = max(BUDGETS, key=good.get)
print("TTFT p50 falls at every step of the sweep:", all(a > b for a, b in zip(ttft, ttft[1:])))
print(f"TPOT p99 at budget 8192 is {tpot[-1] / tpot[0]:.1f}x the one at 64")
print(f"throughput rises {thr[BUDGETS.index(1024)] / thr[0] - 1:.0%} from 64 to 1024, then moves "
      f"{max(thr[4:]) / min(thr[4:]) - 1:.1%} at most")  # fmt: skip
print(f"goodput peaks at budget {peak} ({good[peak]:.0f} tok/s), "
      f"{good[peak] / good[64] - 1:.0%} above 64 and {good[peak] / good[8192] - 1:.0%} above 8192")
print(f"tokens per step: {tps[0]:.0f} at 64, {tps[4]:.0f} at 1024, {tps[-1]:.0f} at 8192 (plateau)")

# %%
import plotly.graph_objects as go

from minivllm.viz.figures import chunk_size_curves

fig = chunk_size_curves(metrics, title="Chunk size: Llama-2-7B on an A100 (simulated), 100 Azure conversations")
fig.add_trace(go.Scatter(x=BUDGETS, y=[good[b] for b in BUDGETS], mode="lines+markers", name="goodput (TPOT ≤ 50 ms)",
                         line=dict(dash="dot", width=2)), row=2, col=1)  # fmt: skip
fig

# %% [markdown]
# - **TTFT falls.** A prompt of 1,200 tokens needs at least 19 steps at budget 64, one at 2048. The queue
#   also drains faster, because fewer steps pay the fixed per-step cost.
# - **TPOT rises.** Every decoding request waits for the whole step, chunk included. Below ~64 tokens the
#   step costs the same (the weights are read once per step: memory bound). Above that, each extra chunk
#   token adds to every decode's latency.
# - **Throughput: up, then flat.** Small budgets pay the ~5.5 ms step overhead again and again. Once steps
#   hold a few hundred tokens, the GPU is compute bound and bigger chunks only reorder the same work. In
#   this cost model a big chunk costs exactly its tokens, so raw throughput flattens rather than falls.
#   Counted as **goodput** (requests that meet the 50 ms TPOT SLO), it is the book's inverted U: big
#   chunks push decodes past the SLO. On real GPUs big chunks also lose throughput to preemptions (more
#   prompts admitted at once), tile quantization and activation memory taken from the KV cache. The cost
#   model leaves the last two out.
# - **Utilisation plateaus.** Tokens per step grows with the budget until the workload cannot fill the
#   steps (64 running requests, finite prompts): beyond ~1024 the budget is mostly unused.
# - The sweet spot is where TTFT has come down and TPOT still meets the SLO: 256-512 here. vLLM's default
#   of 2048 (8192 or 16384 on big GPUs) leans towards throughput and TTFT.
#
# ### 11.7.2 On this CPU · 在本机 CPU 上
#
# - The same experiment on the real SmolLM2-135M: three chats decode, a 256-token prompt lands at step 2.
#   Budgets 16, 64, 256. Times are wall clock on this machine, so they change from run to run.

# %%
import statistics

from minivllm.model.loader import load_model
from minivllm.sampling_params import SamplingParams
from minivllm.worker.model_runner import ModelRunner

loaded = load_model("smollm2")
cpu_runs = {}
for budget in (16, 64, 256):
    config = EngineConfig.from_kwargs(model="smollm2", max_num_batched_tokens=budget, max_num_seqs=8,
                                      max_model_len=512, num_gpu_blocks=128)  # fmt: skip
    engine = LLMEngine(config, model_runner=ModelRunner(config, loaded))
    for i in range(3):
        engine.add_request(f"chat{i}", list(range(100 + 50 * i, 116 + 50 * i)),
                           SamplingParams(max_tokens=20, temperature=0.0, ignore_eos=True))  # fmt: skip
    step = 0
    while engine.has_unfinished_requests():
        if step == 2:
            engine.add_request("long", list(range(2000, 2256)), SamplingParams(max_tokens=4, temperature=0.0,
                                                                               ignore_eos=True))  # fmt: skip
        engine.step()
        step += 1
    cpu_runs[budget] = engine.trace
for budget, t in cpu_runs.items():
    chunks = [(s.step, s.prefill_tokens["long"]) for s in t.steps if "long" in s.prefill_tokens]
    print(f"budget {budget:>3}: {len(t.steps)} steps; long's prompt in {len(chunks)} chunks "
          f"{[n for _, n in chunks] if len(chunks) < 6 else [n for _, n in chunks[:3]] + ['...']}, "
          f"first token in step {chunks[-1][0]} (arrived in step 2)")

# %%
# NBVAL_IGNORE_OUTPUT
print(f"{'budget':>6} {'long TTFT s':>11} {'chat TPOT ms':>12} {'chat ITL max ms':>15} {'total s':>8}")
for budget, t in cpu_runs.items():
    chats = [t.requests[f"chat{i}"] for i in range(3)]
    chat_tpot = statistics.mean((r.token_times[-1] - r.token_times[0]) / (r.num_output_tokens - 1) for r in chats)
    itl_max = max(g for r in chats for g in r.itls)
    print(f"{budget:>6} {t.requests['long'].ttft:>11.2f} {chat_tpot * 1e3:>12.0f} {itl_max * 1e3:>15.0f} "
          f"{t.steps[-1].end - t.steps[0].start:>8.2f}")

# %% [markdown]
# - Same direction as on the GPU: bigger budgets cut the long prompt's TTFT and stretch the chats' ITL
#   (the worst gap grows with the chunk).
# - The difference is the price of a piggybacked token. On the GPU a decode step leaves the compute units
#   idle, so the first ~64 prompt tokens ride along almost free. On a CPU the matrix multiplies become
#   compute bound after a few tokens; past that, a step's cost grows roughly **linearly** with its tokens.
#   There is no free compute to fill, and every chunk token is paid for by every decoding request.
# - Step cost relative to a decode-only step (3 decodes), for steps with the same total tokens, first on
#   the A100 cost model, then measured here:

# %%
def median_ms(trace, tokens, with_prefill):
    xs = [s.duration for s in trace.steps
          if s.num_scheduled_tokens == tokens and bool(s.prefill_tokens) == with_prefill]  # fmt: skip
    return statistics.median(xs) * 1e3


cpu_decode = statistics.median(s.duration for t in cpu_runs.values() for s in t.steps
                               if s.num_scheduled_tokens == 3 and not s.prefill_tokens) * 1e3  # fmt: skip
gpu_decode = A100.step_time([(1, 40)] * 3) * 1e3
ratios = {}
for tokens in (16, 64, 256):
    gpu = A100.step_time([(1, 40)] * 3 + [(tokens - 3, 0)]) * 1e3
    ratios[tokens] = (gpu / gpu_decode, median_ms(cpu_runs[tokens], tokens, True) / cpu_decode)

# %%
print(f"A100 cost model, decode-only step (3 requests): {gpu_decode:.2f} ms")
for tokens, (gpu, _) in ratios.items():
    print(f"  a {tokens:>3}-token step costs {gpu:.2f}x a decode-only step")

# %%
# NBVAL_IGNORE_OUTPUT
print(f"this CPU, decode-only step (3 requests): {cpu_decode:.0f} ms (median)")
for tokens, (_, cpu) in ratios.items():
    print(f"  a {tokens:>3}-token step costs {cpu:.2f}x a decode-only step")

# %%
print("on this CPU a 256-token step costs more than 2x a decode-only step:", ratios[256][1] > 2)
print("on the A100 model a 64-token step costs less than 1.1x a decode-only step:", ratios[64][0] < 1.1)

# %% [markdown]
# - So on a CPU the chunk size is a straight trade: every token in the chunk costs decodes the same as it
#   would alone. The GPU picture (chunks up to the ridge point are nearly free) is why chunked prefill
#   pays off so well there.
#
# ### 11.7.3 vLLM's defaults · vLLM 的默认值
#
# - vLLM V1 (0.8.5) sets the budget from the device memory and the entry point (`EngineArgs`):
#
# | device memory | `max_num_batched_tokens`, `LLM` class | `max_num_batched_tokens`, OpenAI server | `max_num_seqs` |
# |---|---|---|---|
# | ≥ 70 GiB | 16384 | 8192 | 1024 |
# | otherwise | 8192 | 2048 | 256 |
#
# - Any other entry point leaves it unset, and `SchedulerConfig` falls back to 2048. Newer releases add
#   rows (≥ 160 GiB; CPU: 4096 / 2048 per worker).
# - minivllm has only the `SchedulerConfig` level (no device probe). Its defaults, read from
#   `minivllm.config`:

# %%
import dataclasses

from minivllm.config import CacheConfig, SchedulerConfig

sc, cc = SchedulerConfig(), CacheConfig()
for name in ("max_num_batched_tokens", "max_num_seqs", "max_model_len", "long_prefill_token_threshold",
             "enable_chunked_prefill", "policy"):  # fmt: skip
    print(f"{name:<29} {getattr(sc, name)!r}")
for name in ("block_size", "enable_prefix_caching"):
    print(f"{name:<29} {getattr(cc, name)!r}")
off = SchedulerConfig(enable_chunked_prefill=False)
print(f"with chunked prefill off, max_num_batched_tokens = max(max_model_len, 2048) = {off.max_num_batched_tokens}")
print("SchedulerConfig fields:", [f.name for f in dataclasses.fields(SchedulerConfig)])

# %% [markdown]
# - `long_prefill_token_threshold = 0` means off; block size 16 is the CUDA default.
#
# ### 11.7.4 long_prefill_token_threshold · 长预填充阈值
#
# - The budget caps a **step**; the threshold caps **one request** in a step. Without it, the first long
#   prompt in the queue takes the whole budget and the prompts behind it wait.
# - Scene on the Scheduler: two chats decode; at step 1 a 6000-token prompt arrives, followed by four
#   400-token prompts. Budget 2048.

# %%
from minivllm.cli.steps import format_step_table, run_step_table
from minivllm.core.scheduler import Scheduler
from minivllm.request import Request

SCENE = [("chat0", 16, 10), ("chat1", 16, 10), ("long", 6000, 2), ("s0", 400, 4), ("s1", 400, 4), ("s2", 400, 4),
         ("s3", 400, 4)]  # fmt: skip
IDS = [r for r, _, _ in SCENE]


def threshold_rows(threshold, budget=2048):
    scheduler = Scheduler(
        SchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=16, max_model_len=8192,
                        long_prefill_token_threshold=threshold),
        CacheConfig(block_size=16, num_gpu_blocks=1000),
    )  # fmt: skip
    requests = [Request(r, list(range(10_000 * i, 10_000 * i + p)), SamplingParams(max_tokens=m, ignore_eos=True))
                for i, (r, p, m) in enumerate(SCENE)]  # fmt: skip
    return run_step_table(scheduler, requests, arrival_steps={r: 1 for r in IDS[2:]})


print("threshold 0 (off):")
print(format_step_table(threshold_rows(0)[:8], IDS))
print("\nthreshold 1024:")
print(format_step_table(threshold_rows(1024)[:8], IDS))

# %% [markdown]
# - Off: `long` takes all the budget the chats leave for three steps; the short prompts start at steps 3-4.
# - 1024: `long` takes at most 1024 per step and the short prompts fill the rest. All four start within two
#   steps, and `long` finishes three steps later. Several prompts progress together instead of one at a
#   time.
# - Too low a threshold wastes the budget once the short prompts are done: v0.8.5 applies it even when
#   nobody else wants the tokens. (Newer vLLM lifts it when only one request is eligible.)

# %%
def first_token_step(rows, req_id):
    """The step of the last prompt chunk: the one that samples the first token."""
    return max(r.step for r in rows if r.cells.get(req_id, "").startswith("P"))


print(f"{'threshold':>9} {'long: first token':>17} {'shorts: first tokens':>20} {'mean budget use':>15}")
for threshold in (0, 256, 512, 1024, 2048):
    rows = threshold_rows(threshold)
    done = first_token_step(rows, "long")
    used = sum(r.used for r in rows[1 : done + 1]) / (2048 * done)
    shorts = [first_token_step(rows, s) for s in ("s0", "s1", "s2", "s3")]
    print(f"{threshold:>9} {'step ' + str(done):>17} {str(shorts):>20} {used:>15.0%}")

# %% [markdown]
# ### 11.7.5 Diagnosis: symptom → knob · 诊断：症状与调节旋钮
#
# | symptom | knob |
# |---|---|
# | spiky ITL: decodes stall when long prompts arrive | enable chunked prefill / lower `max_num_batched_tokens` |
# | high TTFT for long prompts | raise `max_num_batched_tokens` |
# | one long prompt hogs the budget, short prompts wait behind it | set `long_prefill_token_threshold` |
# | preemptions | more KV blocks (memory, smaller model/dtype) or lower `max_num_seqs` |
#
# - Each row as a small experiment on the simulator (Llama-2-7B, A100). Scene for the first two: §11.1's
#   nine chats decoding, then three long prompts (1-2.6k tokens) landing among them.

# %%
from minivllm.sim.run import demo_workload
from minivllm.sim.workload import WorkloadRequest

scene = demo_workload()
COMMON = dict(max_num_seqs=16, num_gpu_blocks=600)
runs = {
    "chunking off": sim_run(scene, max_num_batched_tokens=4096, enable_chunked_prefill=False, **COMMON),
    "budget 2048": sim_run(scene, max_num_batched_tokens=2048, **COMMON),
    "budget 512": sim_run(scene, max_num_batched_tokens=512, **COMMON),
    "budget 128": sim_run(scene, max_num_batched_tokens=128, **COMMON),
}
print(f"{'':<13} {'ITL max (ms)':>12} {'ITL p99 (ms)':>12} {'long prompts TTFT (ms)':>24}")
for name, t in runs.items():
    m = summarize(t)
    longs = [round(r.ttft * 1e3) for r in t.requests.values() if r.request_id.startswith("long")]
    print(f"{name:<13} {m.itl.max * 1e3:>12.1f} {m.itl.p99 * 1e3:>12.1f} {str(longs):>24}")


def itl_max(name):
    return summarize(runs[name]).itl.max


def long_ttft(name):
    return max(r.ttft for r in runs[name].requests.values() if r.request_id.startswith("long"))


print(f"\nspiky ITL -> chunking on, budget 512: worst gap {itl_max('chunking off') / itl_max('budget 512'):.1f}x "
      f"smaller than with chunking off: {itl_max('budget 512') < itl_max('chunking off') / 3}")  # fmt: skip
faster = long_ttft("budget 128") / long_ttft("budget 2048")
print(f"high TTFT for long prompts -> raise the budget 128 -> 2048: slowest long prompt {faster:.1f}x faster: "
      f"{faster > 1}")

# %% [markdown]
# - The two knobs pull against each other: 512 keeps the worst gap near 40 ms for a small TTFT cost;
#   128 gives smooth decodes but slow long prompts.
# - Hogging: one 8000-token prompt, then six 300-token prompts 2 ms apart. Budget 2048.

# %%
def hog_scene():
    params = SamplingParams(max_tokens=32, ignore_eos=True)
    reqs = [WorkloadRequest("long", 0.0, list(range(100, 8100)), SamplingParams(max_tokens=4, ignore_eos=True))]
    reqs += [WorkloadRequest(f"short{i}", 0.002 * (i + 1), list(range(20_000 + 500 * i, 20_300 + 500 * i)), params)
             for i in range(6)]  # fmt: skip
    return reqs


print(f"{'threshold':>9} {'short prompts TTFT p50 (ms)':>27} {'long TTFT (ms)':>14}")
hog = {}
for threshold in (0, 512, 1024):
    t = sim_run(hog_scene(), max_model_len=8192, max_num_batched_tokens=2048, long_prefill_token_threshold=threshold,
                max_num_seqs=16)  # fmt: skip
    shorts = [r.ttft for r in t.requests.values() if r.request_id.startswith("short")]
    hog[threshold] = (statistics.median(shorts), t.requests["long"].ttft)
    print(f"{threshold:>9} {hog[threshold][0] * 1e3:>27.1f} {hog[threshold][1] * 1e3:>14.1f}")
print(f"\nhogging -> threshold 1024: short prompts {hog[0][0] / hog[1024][0]:.1f}x faster to their first token "
      f"(long prompt {hog[1024][1] / hog[0][1]:.2f}x slower): {hog[1024][0] < hog[0][0] / 2}")

# %% [markdown]
# - Preemptions: 100 uniform requests (32-512-token prompts) at once, budget 2048, on a pool of 800 blocks
#   (12.8k tokens).

# %%
uniform = make_workload("uniform", 100, seed=0, vocab_size=A100.vocab_size, max_model_len=4096)
print(f"{'':<26} {'preemptions':>11} {'output tok/s':>12}")
pre = {}
for name, kw in (("800 blocks, 64 seqs", dict(num_gpu_blocks=800, max_num_seqs=64)),
                 ("1600 blocks, 64 seqs", dict(num_gpu_blocks=1600, max_num_seqs=64)),
                 ("800 blocks, 16 seqs", dict(num_gpu_blocks=800, max_num_seqs=16))):  # fmt: skip
    m = summarize(sim_run(uniform.requests, max_num_batched_tokens=2048, **kw))
    pre[name] = (m.num_preemptions, m.output_throughput)
    print(f"{name:<26} {m.num_preemptions:>11} {m.output_throughput:>12.0f}")
base, more, fewer = pre.values()
print(f"\npreemptions -> more KV blocks: {base[0]} -> {more[0]}, throughput {more[1] / base[1] - 1:+.0%}")
print(f"preemptions -> lower max_num_seqs: {base[0]} -> {fewer[0]}, throughput {fewer[1] / base[1] - 1:+.0%}")

# %% [markdown]
# - More blocks cure preemption and raise throughput. Fewer seats also stop preemption, but by running
#   fewer requests at once, so throughput drops. Reach for memory first (a smaller dtype or model, a
#   higher `gpu_memory_utilization`), and lower `max_num_seqs` only when that is exhausted.
#
# ### 11.7.6 Explore the knobs · 交互探索
#
# - The config explorer reruns §11.1's scene on the simulator for every change and redraws the latency
#   Gantt with the headline metrics.

# %%
# NBVAL_IGNORE_OUTPUT
from minivllm.viz.widgets import ConfigExplorer

app = ConfigExplorer()
app.ui  # noqa: B018 (the cell's value is what Jupyter displays)

# %%
print(app.summary())
for control, value in ((app.budget, 2048), (app.threshold, 512), (app.chunked, False), (app.chunked, True),
                       (app.threshold, 0), (app.budget, 128), (app.num_blocks, 300)):  # fmt: skip
    control.value = value  # what moving the slider does
    print(f"{control.description} = {value}: {app.summary()}")

# %% [markdown]
# **Try this:** set the budget to 64 and then 8192 and watch the long prompts' bars in the Gantt: many thin
# prefill slices vs one thick one that stalls every chat. Then shrink the KV blocks until preemptions
# appear, and switch the policy to priority.

# %% [markdown]
# ## Summary
#
# - Raising `max_num_batched_tokens` lowers TTFT and raises TPOT. Raw throughput rises until steps are
#   compute bound and then stays flat; goodput under a TPOT SLO is an inverted U.
# - On a GPU the first tokens of a chunk ride along nearly free. On a CPU every token costs, so the trade
#   is linear.
# - vLLM's budget defaults lean large (2048 to 16384); `long_prefill_token_threshold` is off (0); blocks
#   are 16 tokens.
# - The threshold lets several prompts share a step instead of one hogging it. Preemptions want more KV
#   blocks first and fewer seats second.

# %% [markdown]
# ## Exercises
#
# 1. Write `steps_to_first_token(prompt_len, num_decodes, budget)`: `num_decodes` requests are decoding
#    when a prompt of `prompt_len` tokens arrives (no threshold). In which step, counting the arrival step
#    as 1, does it get its first token?
# 2. Write `first_step_chunks(prompt_lens, budget, threshold)`: prompts arriving together, in this order,
#    into an idle engine. How many tokens does each get in the first step? (`threshold` 0 means off.)
# 3. Write `best_budget(budgets, itl_p99_slo_ms)`: on the simulator (`llama2_7b_a100`), run
#    `make_workload("azure_conv", 40, seed=1, vocab_size=32000, max_model_len=4096)` (all at once) with
#    `max_num_seqs=32`, `max_model_len=4096` and each budget. Return the budget with the highest output
#    throughput among those whose ITL p99 (ms) meets the SLO, or `None`.
#
# The check functions compare your answer with what the engine itself does. Solutions are in
# `11_7_chunk_size_solutions.ipynb`.

# %%
from minivllm.exercises.ch11_7 import check_exercise_1, check_exercise_2, check_exercise_3


def steps_to_first_token(prompt_len, num_decodes, budget):
    ...  # your code here


check_exercise_1(steps_to_first_token)


# %%
def first_step_chunks(prompt_lens, budget, threshold):
    ...  # your code here


check_exercise_2(first_step_chunks)


# %%
def best_budget(budgets, itl_p99_slo_ms):
    ...  # your code here


check_exercise_3(best_budget)
