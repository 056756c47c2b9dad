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
# # Chapter 11.7 · The four tuning curves of chunk_size · chunk_size 的四条调优曲线
#
# - The chunk size is the token budget per step, `max_num_batched_tokens`. One number trades the latency of
#   new requests (TTFT) against the smoothness of running ones (TPOT, ITL).
# - GPU-scale numbers come from the simulator: the real Scheduler, with each step priced by a cost model of
#   Llama-2-7B on an A100 (virtual clock, deterministic). One section runs the real model on this CPU.
# - The book's four curves, each measured; then vLLM's defaults (11.7.1), the long-prefill threshold
#   (11.7.2) and the book's diagnosis table (11.7.3), each row an experiment with numbers.

# %%
from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.metrics.summary import summarize
from minivllm.lab.sim.cost_model import CostModel
from minivllm.lab.sim.run import run_workload
from minivllm.lab.sim.sim_runner import SimRunner
from minivllm.lab.sim.utilisation import trace_utilisation
from minivllm.lab.sim.workload import make_workload

A100 = CostModel.from_preset("llama2_7b_a100")


def sim_run(requests, max_model_len=4096, **engine_kwargs):
    """One engine (vLLM-named settings) on the simulator, run to the end; returns its trace."""
    config = EngineConfig.from_kwargs(model="none", max_model_len=max_model_len, **engine_kwargs)
    engine = LLMEngine(config, model_runner=SimRunner(A100, vocab_size=A100.vocab_size, config=config))
    run_workload(engine, requests)
    return engine.trace


workload = make_workload("azure_conv", 100, seed=0, vocab_size=A100.vocab_size, max_model_len=4096)
stats = workload.stats()
print(f"{len(workload.requests)} requests, all at t = 0; prompt mean {stats['prompt_mean']:.0f} tokens, "
      f"output mean {stats['output_mean']:.0f} tokens")
print(f"KV cache: {A100.num_blocks(16, 64, 64):,} blocks of 16 tokens at budget 64, "
      f"{A100.num_blocks(16, 8192, 64):,} at 8192 (vLLM's profiling run); max_num_seqs 64")  # fmt: skip

# %% [markdown]
# ## 11.7 The four tuning curves of chunk_size · chunk_size 的四条调优曲线
#
# The book: "它的取值影响四个指标，呈现四条不同的曲线" (its value moves four metrics, along four different
# curves):
#
# | curve | the book expects | 书中 |
# |---|---|---|
# | TTFT | falls: fewer steps to finish a prompt | 单调下降 |
# | TPOT | rises: each step is longer, decodes jitter more | 单调上升 |
# | throughput | an inverted U: too small pays per-step overhead, too big starves decodes | 倒 U 型 |
# | GPU utilisation | rises, then a plateau: too small cannot fill the GPU | Plateau |
#
# ### The sweep · 扫描
#
# - Azure conversation lengths (prompt ~1.1k tokens, output ~220), 100 requests at once: the engine is
#   saturated, so the budget decides how the work is cut up.
# - One run per budget from 64 to 8192 tokens. The table is the one `python -m minivllm bench --mode sim
#   --cost-model llama2_7b_a100 --workload azure_conv --num-prompts 100 --max-num-seqs 64
#   --max-model-len 4096 --sweep max-num-batched-tokens=64,...,8192` prints.
# - **Utilisation** is the share of the A100's peak compute (312 TFLOP/s bf16) the steps use: useful
#   FLOPs (2 x 6.48e9 per token for the linear layers, 4 x layers x d_model per attention pair) over
#   step time x peak, with the cost model's step times (`minivllm.lab.sim.utilisation`; sources in the
#   preset). Not tokens per step.

# %%
from minivllm.lab.benchmarks.sweep import format_table

BUDGETS = [64, 128, 256, 512, 1024, 2048, 4096, 8192]
traces = {b: sim_run(workload.requests, max_num_batched_tokens=b, max_num_seqs=64) for b in BUDGETS}
metrics = {b: {**summarize(t).to_dict(), "utilisation": trace_utilisation(A100, t.steps)} for b, t in traces.items()}
print(format_table([{"point": {"max_num_batched_tokens": b}, "metrics": m} for b, m in metrics.items()]))
print(f"\n{'budget':>6} {'utilisation (% of peak FLOP/s)':>31}")
for b in BUDGETS:
    print(f"{b:>6} {metrics[b]['utilisation']:>31.1%}")

# %%
ttft = [metrics[b]["ttft_p50"] for b in BUDGETS]
tpot = [metrics[b]["tpot_p99"] for b in BUDGETS]
thr = [metrics[b]["output_throughput"] for b in BUDGETS]
util = [metrics[b]["utilisation"] for b in BUDGETS]
print("TTFT p50 falls at every step of the sweep:", all(a > b for a, b in zip(ttft, ttft[1:])))
print(f"TPOT p99 at budget 8192 is {tpot[-1] / tpot[0]:.1f}x the one at 64")
print(f"throughput rises {thr[BUDGETS.index(1024)] / thr[0] - 1:.0%} from 64 to 1024, then moves "
      f"{max(thr[4:]) / min(thr[4:]) - 1:.1%} at most: it does not fall")  # fmt: skip
print(f"utilisation: {util[0]:.1%} at 64, {util[3]:.1%} at 512, {util[-1]:.1%} at 8192; from 512 on within "
      f"{max(util[3:]) / min(util[3:]) - 1:.1%} (a plateau)")  # fmt: skip

# %%
from minivllm.lab.viz.figures import chunk_size_curves

chunk_size_curves(metrics, title="Chunk size: Llama-2-7B on an A100 (simulated), 100 Azure conversations")

# %% [markdown]
# - **TTFT falls** (book: 单调下降, yes). A prompt of 1,100 tokens needs at least 18 steps at budget 64, one
#   at 2048, and the queue drains faster because fewer steps pay the fixed per-step cost.
# - **TPOT rises** (book: 单调上升, yes). Every decoding request waits for the whole step, chunk included.
#   Below ~64 tokens the step costs the same (the weights are read once per step: memory bound).
# - **Throughput: up, then flat** (book: 倒 U 型, only the rising half). Small budgets pay the ~10.7 ms step
#   floor (reading the weights, 9.3 ms, plus 1.1 ms of host work) again and again. Once steps hold a few
#   hundred tokens, bigger chunks only reorder the same work: past the profile's tile steps a chunk costs
#   about its tokens, so raw throughput barely moves. The two
#   places where a falling half does come from follow: KV memory taken by a bigger budget (next), and
#   the SLO (goodput, after it).
# - **Utilisation rises, then a plateau** (book: Plateau, yes), at about 21% of peak: 64 requests decoding
#   at 1-2k tokens of context are memory bound (the KV read), so even full steps leave most of the compute
#   idle. A prefill-only step of 2048 tokens would reach ~59%: Vidur's measured linear layers run at ~64% of
#   peak there, and prefill attention at ~23% (its profile) pulls the step lower.
#
# ### Throughput's falling half: activation memory eats KV blocks · 吞吐的下降段：激活显存挤占 KV 块
#
# - vLLM sizes the KV cache after a profiling run (0.8.5: `vllm/v1/worker/gpu_worker.py`
#   `Worker.determine_available_memory` calls `vllm/v1/worker/gpu_model_runner.py`
#   `GPUModelRunner.profile_run`). The profiling run executes a dummy batch of `max_num_batched_tokens`
#   tokens. Its peak memory is subtracted from `total memory x gpu_memory_utilization`, together with the
#   weights, and what is left becomes KV blocks. So a bigger budget leaves fewer blocks.
# - `minivllm.lab.sim.memory` models that: KV blocks = (GPU memory x 0.9 - weights - activation peak(budget)) /
#   bytes per block. The activation peak is 82,432 bytes per budget token: the tensors alive at the top of
#   one decoder layer's MLP (`gate_up_proj` out 2 x 11008, `SiluAndMul` out 11008, residual and hidden
#   2 x 4096, bf16). On top of that come fp32 logits and probabilities for each dummy request. This is an
#   estimate from the tensor shapes; the allocator's fragmentation and non-torch memory are left out.
# - vLLM later took the A100 out of its ≥ 70 GiB defaults row (`vllm/engine/arg_utils.py`, v0.9+: the big
#   row now requires `"a100" not in device_name`). The comment there says a large `max_num_batched_tokens`
#   lowered throughput on the A100 (PR #17885). It gives the measurement, not the cause. The memory below
#   is one mechanism that produces that shape; it is not a claim about what PR #17885 measured.
# - First, how much of the pool a 16384-token budget takes, for the 7B model on three memory sizes:

# %%
from minivllm.lab.sim.memory import llama2_7b

print(f"{'GPU memory':>10} {'KV blocks @2048':>15} {'KV blocks @16384':>16} {'pool lost':>9}")
for gib in (80, 40, 24):
    mem = llama2_7b(gib)
    a, b = mem.num_blocks(2048, 256), mem.num_blocks(16384, 256)
    print(f"{gib:>7} GiB {a:>15} {b:>16} {1 - b / a:>9.1%}")

# %% [markdown]
# - On 80 GiB the reserve is 2% of the pool, on 40 GiB 5%. A 24 GiB card leaves 9.7 GB for the cache,
#   about 18k tokens, and a 16384-token budget takes 12% of it. So the experiment uses **24 GiB**, the
#   memory of an A10, L4 or RTX 4090. The timing stays the A100 cost model's, so that only the memory
#   changes. The same 100 conversations, `max_num_seqs` 256 (vLLM's default below 70 GiB). The last row
#   runs budget 16384 with the KV blocks of budget 512, to separate the memory effect from the scheduling:

# %%
import statistics

from minivllm.lab.sim.run import simulate

MEM = llama2_7b(24)
MEM_BUDGETS = [512, 2048, 8192, 16384]


def mem_row(budget, kv_blocks, **kw):
    trace = simulate(workload.requests, max_num_batched_tokens=budget, max_num_seqs=256, **kw).trace
    m = summarize(trace)
    return {"budget": budget, "kv_blocks": kv_blocks, "output_throughput": m.output_throughput,
            "num_preemptions": m.num_preemptions,
            "mean_running": statistics.mean(s.num_running for s in trace.steps)}  # fmt: skip


rows = [mem_row(b, MEM.num_blocks(b, 256), memory=MEM) for b in MEM_BUDGETS]
same = mem_row(16384, rows[0]["kv_blocks"], num_gpu_blocks=rows[0]["kv_blocks"])
print(f"{'budget':>6} {'KV blocks':>9} {'output tok/s':>12} {'preemptions':>11} {'mean running':>12}")
for r in [*rows, same]:
    note = "  (budget 16384, blocks of 512)" if r is same else ""
    print(f"{r['budget']:>6} {r['kv_blocks']:>9} {r['output_throughput']:>12.0f} {r['num_preemptions']:>11} "
          f"{r['mean_running']:>12.1f}{note}")  # fmt: skip

# %%
by = {r["budget"]: r for r in rows}
print("throughput from 2048 to 16384 on 24 GiB: "
      f"{by[16384]['output_throughput'] / by[2048]['output_throughput'] - 1:+.1%}")
fall = by[16384]["output_throughput"] / by[512]["output_throughput"] - 1
steps_only = same["output_throughput"] / by[512]["output_throughput"] - 1
print(f"budget 512 -> 16384: {fall:+.1%}; with the blocks of 512 kept: {steps_only:+.1%} (longer steps); "
      f"the memory's part: {fall - steps_only:+.1%}")
print("most of the fall is the memory:", abs(fall - steps_only) > abs(steps_only))
print("KV blocks fall at every step of the sweep:",
      all(a["kv_blocks"] > b["kv_blocks"] for a, b in zip(rows, rows[1:])))
print("preemptions rise with the budget:", rows[-1]["num_preemptions"] > rows[0]["num_preemptions"])

# %%
from minivllm.lab.viz.figures.tuning import memory_curves

memory_curves(rows, title="Llama-2-7B on 24 GiB (A100 timing): a bigger budget reserves activations, fewer KV blocks",
              reference=same)  # fmt: skip

# %% [markdown]
# - The falling half is real here, and small: throughput drops ~6% from 2048 to 16384. With the KV blocks
#   held at budget 512's, budget 16384 loses ~2.5% against 512 (longer steps: the measured tile steps and
#   more prefill attention per step); the rest of the fall is the memory.
# - It is not more preemption. Small budgets preempt more: many prompts sit half-prefilled, each holding
#   blocks. The loss is a smaller running batch: fewer blocks, fewer requests decoding at once, and decode
#   throughput is proportional to the batch when the KV read dominates.
# - On an 80 GiB A100 the same reserve costs 2% of the pool. Memory alone does not explain a large loss
#   there; host overheads, CUDA graphs and the allocator, which the cost model leaves out or only
#   estimates, are other candidates.
#
# ### Goodput under a TPOT SLO · SLO 下的有效吞吐
#
# - Goodput counts only the output tokens of requests whose TPOT met an SLO, per second
#   (`minivllm.lab.metrics.goodput`, "capacity under an SLO" in Sarathi-Serve). Same runs as the sweep, recounted
#   for four SLOs. "Best" is the smallest budget within 1% of the highest goodput; budgets closer than that
#   are not told apart.

# %%
from minivllm.lab.metrics.goodput import goodput, num_within_slo
from minivllm.lab.viz.figures.curves import trend
from minivllm.lab.viz.widgets.goodput import best_budget

print(f"{'TPOT SLO':>8} {'best budget':>11} {'goodput tok/s':>13} {'within SLO':>10} {'goodput @8192':>13}   shape")
best = {}
for slo_ms in (25, 50, 100, 200):
    curve = {b: goodput(t, slo_ms / 1e3) for b, t in traces.items()}
    best[slo_ms] = best_budget(curve)
    b = best[slo_ms]
    print(f"{slo_ms:>5} ms {b:>11} {curve[b]:>13.0f} {num_within_slo(traces[b], slo_ms / 1e3):>7}/100 "
          f"{curve[8192]:>13.0f}   {trend(BUDGETS, [curve[x] for x in BUDGETS])}")  # fmt: skip
print("\nthe best budget never shrinks as the SLO loosens:",
      all(best[a] <= best[b] for a, b in zip(best, list(best)[1:])))
print(f"raw throughput: {trend(BUDGETS, thr)}")

# %%
# NBVAL_IGNORE_OUTPUT
from minivllm.lab.viz.widgets.goodput import GoodputExplorer

goodput_app = GoodputExplorer(traces, value=50)
goodput_app.ui  # noqa: B018 (the cell's value is what Jupyter displays)

# %%
for slo_ms in (25, 50, 100, 200):
    goodput_app.slo.value = slo_ms  # what moving the slider does
    print(goodput_app.summary())

# %% [markdown]
# - The peak moves right as the SLO loosens: 128 at 25 ms, 256 at 50 ms, 512 at 100 ms and at 200 ms (there
#   every budget from 512 up is within 1%).
#   A tight SLO turns "rises, then flat" into the book's inverted U: big chunks push the decodes past the
#   SLO. So part of the "inverted U" is the SLO's doing, not the GPU's.
# - Raw throughput in this cost model only rises, then stays flat (within 0.6% from 1024 on). The falling
#   half of raw throughput needs a cause outside the step-time model, such as the KV memory above.
#
# ### The same sweep on this CPU · 在本机 CPU 上
#
# - The real SmolLM2-135M: three chats decode, a 128-token prompt lands at step 2. Budgets 16 and 128.
#   Times are wall clock on this machine, so they change from run to run (those cells are not checked).

# %%
from minivllm.model.loader import load_model
from minivllm.sampling_params import SamplingParams
from minivllm.worker.model_runner import ModelRunner

loaded = load_model("smollm2")
cpu_runs = {}
for budget in (16, 128):
    config = EngineConfig.from_kwargs(model="smollm2", max_num_batched_tokens=budget, max_num_seqs=8,
                                      max_model_len=512, num_gpu_blocks=128)  # fmt: skip
    engine = LLMEngine(config, model_runner=ModelRunner(config, loaded))
    for i in range(3):
        engine.add_request(f"chat{i}", list(range(100 + 50 * i, 116 + 50 * i)),
                           SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True))  # fmt: skip
    step = 0
    while engine.has_unfinished_requests():
        if step == 2:
            engine.add_request("long", list(range(2000, 2128)), SamplingParams(max_tokens=2, temperature=0.0,
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
# - Same direction as on the GPU. In steps (checked): the long prompt's first token comes 10 steps after it
#   arrives at budget 16, one step after at 128. In seconds (not checked: this machine is shared, and
#   the times move with its load) the bigger chunk stretches the chats' gaps.
# - The difference is the price of a piggybacked token. On the GPU a decode step leaves the compute units
#   idle, so the first ~64 prompt tokens ride along almost free. On a CPU the matrix multiplies become
#   compute bound after a few tokens; past that, a step's cost grows roughly **linearly** with its tokens.
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
gpu_ratio = {n: A100.step_time([(1, 40)] * 3 + [(n - 3, 0)]) * 1e3 / gpu_decode for n in (16, 64, 128)}
cpu_ratio = {n: median_ms(cpu_runs[n], n, True) / cpu_decode for n in (16, 128)}
print(f"A100 cost model, decode-only step (3 requests): {gpu_decode:.2f} ms")
for tokens, ratio in gpu_ratio.items():
    print(f"  a {tokens:>3}-token step costs {ratio:.2f}x a decode-only step")
print("on the A100 model a 64-token step costs less than 1.1x a decode-only step:", gpu_ratio[64] < 1.1)

# %%
# NBVAL_IGNORE_OUTPUT
print(f"this CPU, decode-only step (3 requests): {cpu_decode:.0f} ms (median)")
for tokens, ratio in cpu_ratio.items():
    print(f"  a {tokens:>3}-token step costs {ratio:.2f}x a decode-only step")
print("on this CPU a 128-token step costs more than 2x a decode-only step:", cpu_ratio[128] > 2)

# %% [markdown]
# - So on a CPU the chunk size is a straight trade: every token in the chunk costs decodes the same as it
#   would alone. On a GPU, chunks up to the ridge point are nearly free, which is why chunked prefill
#   pays off so well there.
#
# ### How far the simulated numbers hold · 模拟数字能信几分
#
# - The GPU curves above are only as good as the cost model. Its presets are built from published
#   profiles, one source line per term (`python -m minivllm.lab.sim.gpu_presets`; the sources are in each
#   preset's `meta["terms"]`): Vidur's measured linear-layer times (with their tile steps), its attention
#   and CPU-overhead profiles, each model's own KV heads, and KV capacity from GPU memory at the budget.
# - `python -m minivllm.lab.benchmarks.sim_validation` replays runs someone else made on real GPUs (vLLM's
#   latency benchmark, Lambda's ShareGPT runs of Llama-3-8B) and compares. Below: published vs simulated,
#   and where the simulated busy time went, so that a good ratio cannot hide two errors cancelling.

# %%
from minivllm.lab.benchmarks import sim_validation
from minivllm.lab.sim.published_runs import PUBLISHED_RUNS

replays = [sim_validation.replay(run) for run in PUBLISHED_RUNS]
print(sim_validation.format_table(replays))
for r in replays:
    print(f"{r['run']}: busy time by term " + ", ".join(f"{k} {v:.0%}" for k, v in r["term_shares"].items()))
print("every metric within its target (TTFT 25%, the rest 15%):", all(row["ok"] for r in replays for row in r["rows"]))

# %% [markdown]
# - One term is fitted to a published run (the host cost per request, to Lambda's A100 TPOT; the H100
#   run is held out), and the API server's intake is read off each run's fastest first token. Everything
#   else comes from profiles measured elsewhere. `--ablate` replays each run with one term left out.
# - The CPU preset is a measurement of one machine. Its fit records the CPU, torch threads and clock;
#   on another machine the simulator warns and names the command that fits this one
#   (`python -m minivllm.lab.sim.calibrate --local`, about 6 minutes on a quiet 2-core machine; the fit is
#   cached):

# %%
# NBVAL_IGNORE_OUTPUT
from minivllm.lab.sim.local_fit import fit_status

print(fit_status())

# %% [markdown]
# ### 11.7.1 The defaults in the source · 源码里的默认值
#
# - The book: "不要把某个固定 chunk size 当成通用推荐" (do not take any fixed chunk size as a universal
#   recommendation). vLLM V1 (0.8.5) sets the budget from the device memory and the entry point
#   (`EngineArgs`, `engine/arg_utils.py:1596-1609`):
#
# | device memory | `max_num_batched_tokens`, `LLM` class | `max_num_batched_tokens`, OpenAI server | `max_num_seqs` |
# |---|---|---|---|
# | ≥ 70 GiB | 16384 | 8192 | 1024 |
# | otherwise | 8192 | 2048 | 256 |
#
# - Any other entry point leaves it unset, and `SchedulerConfig` falls back to 2048. From v0.9 the ≥ 70 GiB
#   row excludes the A100 (see the falling half above); newer releases add rows (≥ 160 GiB; CPU).
# - minivllm has only the `SchedulerConfig` level (no device probe). Its defaults, read from
#   `minivllm.config`:

# %%
import dataclasses

from minivllm.config import CacheConfig, SchedulerConfig

sc, cc = SchedulerConfig(), CacheConfig()
for name in ("max_num_batched_tokens", "max_num_seqs", "max_model_len", "long_prefill_token_threshold",
             "enable_chunked_prefill", "policy"):  # fmt: skip
    print(f"{name:<29} {getattr(sc, name)!r}")
for name in ("block_size", "enable_prefix_caching", "gpu_memory_utilization"):
    print(f"{name:<29} {getattr(cc, name)!r}")
off = SchedulerConfig(enable_chunked_prefill=False)
print(f"with chunked prefill off, max_num_batched_tokens = max(max_model_len, 2048) = {off.max_num_batched_tokens}")
print("SchedulerConfig fields:", [f.name for f in dataclasses.fields(SchedulerConfig)])

# %% [markdown]
# - `long_prefill_token_threshold = 0` means off; block size 16 is the CUDA default.
#
# ### 11.7.2 The subtlety of the long_prefill_token_threshold patch · long_prefill_token_threshold 补丁的精妙
#
# - The book: "只有当待调度 token 数超过阈值时，才先截到阈值。短请求不会被这个阈值截断" (only a request with
#   more tokens to schedule than the threshold is cut to it; short requests are never cut). The default is 0,
#   which is off.
# - The budget caps a **step**; the threshold caps **one request** in a step. Without it, the first long
#   prompt in the queue takes the whole budget and the prompts behind it wait.
# - Scene on the Scheduler: two chats decode; at step 1 a 6000-token prompt arrives, followed by four
#   400-token prompts. Budget 2048.

# %%
from minivllm.core.scheduler import Scheduler
from minivllm.lab.cli.steps import format_step_table, run_step_table
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

# %%
rows_512 = threshold_rows(512)
first = next(r for r in rows_512 if r.cells.get("s0", "").startswith("P"))
print(f"threshold 512, step {first.step}: long {first.cells['long']}, s0 {first.cells['s0']}, "
      f"s1 {first.cells['s1']} (the 400-token prompts are not cut)")

# %% [markdown]
# ### 11.7.3 Diagnosing the tuning · 调参的诊断方法
#
# The book's table ("用三个指标反推", read the knob back from the metrics):
#
# | 观察 observation | 可能问题 likely problem | 调整方向 knob |
# |---|---|---|
# | TPOT p99 远大于 p50（尖峰明显）: p99 far above p50 | chunk 太大: too big | 减小 max_num_batched_tokens |
# | TTFT 远大于正常单次 prefill 时间: TTFT ≫ a prefill | chunk 太小，分太多次: small | 增大 max_num_batched_tokens |
# | GPU SM 利用率偏低且 chunk 小: low utilisation, small chunks | 没吃饱: not fed | 增大预算或混更多 decode |
# | TPOT 稳定但总吞吐低: TPOT steady, throughput low | 可能 decode 饿死: starvation? | 查 waiting 队列长度 |
#
# - Each row below as an experiment on the simulator (Llama-2-7B, A100): symptom numbers, the knob turned,
#   numbers after, verdict. Scene for the first two: §11.1's nine chats decoding, then three long prompts
#   (1-2.6k tokens) landing among them.
#
# #### 11.7.3.1 Spiky decodes: lower the budget · TPOT 尖峰：减小 max_num_batched_tokens
#
# - vLLM 0.8.5's `/metrics` histogram `vllm:time_per_output_token_seconds` records every decode interval
#   (one per token, `vllm/v1/metrics/stats.py`), so its p99 against p50 is the per-token gap, the ITL here.
#   A request's mean TPOT averages its gaps and hides one spike among many tokens; both are printed.

# %%
from minivllm.lab.sim.run import demo_workload

scene = demo_workload()
COMMON = dict(max_num_seqs=16, num_gpu_blocks=600)
runs = {b: sim_run(scene, max_num_batched_tokens=b, **COMMON) for b in (64, 512, 2048, 4096)}
print(f"{'budget':>6} {'ITL p50':>7} {'ITL p99':>7} {'p99/p50':>7} {'TPOT p50':>8} {'TPOT p99':>8}  (ms)")
for b, t in runs.items():
    m = summarize(t)
    print(f"{b:>6} {m.itl.p50 * 1e3:>7.1f} {m.itl.p99 * 1e3:>7.1f} {m.itl.p99 / m.itl.p50:>7.1f} "
          f"{m.tpot.p50 * 1e3:>8.1f} {m.tpot.p99 * 1e3:>8.1f}")  # fmt: skip


def itl_ratio(b):
    m = summarize(runs[b])
    return m.itl.p99 / m.itl.p50


print(f"\nsymptom at 4096: ITL p99 = {itl_ratio(4096):.1f}x p50 -> budget 512: {itl_ratio(512):.1f}x. "
      f"Verdict: lowering the budget removes the spikes: {itl_ratio(512) < itl_ratio(4096) / 3}")  # fmt: skip

# %% [markdown]
# #### 11.7.3.2 Slow first tokens: raise the budget · TTFT 过长：增大 max_num_batched_tokens
#
# - "正常单次 prefill 时间" (one normal prefill): the cost model's time for the whole prompt in one step,
#   alone. Each long prompt's TTFT over that time:

# %%
def ttft_over_single(t):
    longs = [r for r in t.requests.values() if r.request_id.startswith("long")]
    return [r.ttft / A100.step_time([(r.num_prompt_tokens, 0)]) for r in longs]


print(f"{'budget':>6}  long prompts' TTFT / one-step prefill time")
for b, t in runs.items():
    print(f"{b:>6}  {[round(x, 1) for x in ttft_over_single(t)]}")
before, after = statistics.median(ttft_over_single(runs[64])), statistics.median(ttft_over_single(runs[2048]))
print(f"\nsymptom at 64: median {before:.1f}x one prefill -> budget 2048: {after:.1f}x. "
      f"Verdict: raising the budget brings TTFT back near one prefill: {after < before / 2}")  # fmt: skip

# %% [markdown]
# - The two knobs pull against each other: 512 keeps the worst gap near 40 ms for a small TTFT cost, 64
#   gives smooth decodes but slow long prompts. (The third long prompt stays above 3x even at 4096: it
#   queues behind the other two.)
#
# #### 11.7.3.3 Low utilisation, small chunks: raise the budget or mix more decodes · 没吃饱：增大预算或混更多 decode
#
# - "GPU SM 利用率" is read here as the share of peak FLOP/s (section 11.7). nvidia-smi's "GPU-Util" counts
#   the time any kernel runs, and it reads near 100% for a memory-bound decode too.
# - Scene: 48 requests at once, 256-1024-token prompts, 32-128 output tokens. Start at budget 32 with
#   8 sequences, then turn each knob:

# %%
small = make_workload("uniform", 48, seed=0, vocab_size=A100.vocab_size, max_model_len=4096,
                      prompt_len=(256, 1024), output_len=(32, 128))  # fmt: skip
feed = {}
for name, kw in (("budget 32, 8 seqs", dict(max_num_batched_tokens=32, max_num_seqs=8)),
                 ("budget 512, 8 seqs", dict(max_num_batched_tokens=512, max_num_seqs=8)),
                 ("budget 512, 64 seqs", dict(max_num_batched_tokens=512, max_num_seqs=64))):  # fmt: skip
    t = sim_run(small.requests, **kw)
    m = summarize(t)
    feed[name] = (trace_utilisation(A100, t.steps), m.output_throughput, m.tpot.p50)
print(f"{'':<20} {'utilisation':>11} {'output tok/s':>12} {'TPOT p50 ms':>11}")
for name, (u, tp, tpot50) in feed.items():
    print(f"{name:<20} {u:>11.1%} {tp:>12.0f} {tpot50 * 1e3:>11.1f}")
(u0, t0, _), (u1, t1, _), (u2, t2, _) = feed.values()
print(f"\nsymptom: {u0:.1%} of peak at budget 32 -> budget 512: {u1:.1%}, then 64 seqs (more decodes per step): "
      f"{u2:.1%}. Verdict: both knobs feed the GPU: {u0 < u1 < u2}")  # fmt: skip

# %% [markdown]
# #### 11.7.3.4 Steady TPOT, low throughput: look at the waiting queue · TPOT 稳定但吞吐低：查 waiting 队列长度
#
# - Scene: the 100 conversations arriving at 8 per second, budget 2048, but only 4 seats
#   (`max_num_seqs`). The waiting queue is `SchedulerStats.num_waiting_reqs` (`vllm:num_requests_waiting`
#   in `/metrics`), recorded in every step of the trace.

# %%
arriving = make_workload("azure_conv", 100, rate=8.0, seed=0, vocab_size=A100.vocab_size, max_model_len=4096)
queue = {}
for seqs in (4, 64):
    t = sim_run(arriving.requests, max_num_batched_tokens=2048, max_num_seqs=seqs)
    m = summarize(t)
    queue[seqs] = (m.tpot.p50, m.tpot.p99, m.output_throughput, m.max_num_waiting,
                   statistics.mean(s.num_waiting for s in t.steps), m.ttft.p50)  # fmt: skip
print(f"{'max_num_seqs':>12} {'TPOT p50/p99 ms':>15} {'output tok/s':>12} {'waiting max/mean':>16} {'TTFT p50 s':>10}")
for seqs, (p50, p99, tp, wmax, wmean, ttft50) in queue.items():
    print(f"{seqs:>12} {p50 * 1e3:>7.1f}/{p99 * 1e3:<7.1f} {tp:>12.0f} {wmax:>8}/{wmean:<7.1f} {ttft50:>10.2f}")
(p50a, p99a, tpa, wa, _, _), (_, _, tpb, wb, _, _) = queue.values()
print(f"\nsymptom at 4 seats: TPOT p99/p50 {p99a / p50a:.2f} (steady), {tpa:.0f} tok/s, up to {wa} requests waiting "
      f"-> 64 seats: {tpb:.0f} tok/s, {wb} waiting. Verdict: the queue gives it away: {wa > 10 * wb}")  # fmt: skip

# %% [markdown]
# - What starved here is admission, not the decodes. The running requests decode fast (TPOT steady and low)
#   while most of the load waits for a seat. The same picture comes from a KV cache too small to admit
#   more requests. The fix is seats or blocks, and the queue length is the metric that shows it.
#
# #### 11.7.3.5 Beyond the book's table: preemptions · 表外一行：抢占
#
# - 100 uniform requests (32-512-token prompts) at once, budget 2048, on a pool of 800 blocks (12.8k tokens):

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
#   higher `gpu_memory_utilization`; a smaller budget frees activation memory, see 11.7), and lower
#   `max_num_seqs` only when that is exhausted.
#
# #### 11.7.3.6 Explore the knobs · 交互探索
#
# - The config explorer reruns §11.1's scene on the simulator for every change and redraws the latency
#   Gantt with the headline metrics. Its sliders offer only values the engine accepts (budgets from
#   `max_num_seqs` = 16 up, KV pools that hold a 4096-token request).

# %%
# NBVAL_IGNORE_OUTPUT
from minivllm.lab.viz.widgets import ConfigExplorer

app = ConfigExplorer()
app.ui  # noqa: B018 (the cell's value is what Jupyter displays)

# %%
print("budgets offered:", list(app.budget.options))
print("KV blocks offered:", list(app.num_blocks.options))
print(app.summary())
for control, value in ((app.budget, 2048), (app.threshold, 512), (app.chunked, False), (app.chunked, True),
                       (app.threshold, 0), (app.budget, 128), (app.num_blocks, 300)):  # fmt: skip
    control.value = value  # what moving the slider does
    print(f"{control.description} = {value}: {app.summary()}")

# %% [markdown]
# **Try this:** set the budget to 16 and then 8192 and watch the long prompts' bars in the Gantt: many thin
# prefill slices vs one thick one that stalls every chat. Then shrink the KV blocks until preemptions
# appear, and switch the policy to priority. In the goodput explorer above, slide the SLO from 10 to 300 ms
# and watch the peak move right.

# %% [markdown]
# ## Summary
#
# - The book's four curves on the simulator: TTFT falls and TPOT rises, as it says. Utilisation (share of
#   peak FLOP/s) rises and then plateaus, here at ~21% because decodes are memory bound. Raw throughput
#   rises and then stays flat in the step-time model.
# - The inverted U needs a cause. Under a TPOT SLO, goodput peaks at a budget that grows with the SLO
#   (128 at 25 ms, 256 at 50 ms, 512 at 100-200 ms). On a small GPU, a bigger budget's activation
#   reserve takes KV blocks, and throughput falls a few percent (24 GiB: 2048 → 16384 costs ~6%).
# - What the cost model rebuilt from published profiles changed (issue 19; before, a fitted closed form with
#   no host time, attention at 72% of peak and a fixed 6,797 blocks): the curve shapes held. Throughput now
#   rises 39% from 64 to 1024 (was 32%: 1 ms of host work and the weight read per step make small budgets
#   dearer), the utilisation plateau is lower (~21%, was 22%: prefill attention at 23% of peak), and the
#   goodput peak at a 100 ms SLO moved from 1024 to 512 (budget 1024's TPOT p99 is now 104 ms, was 91 ms;
#   at 200 ms every budget from 512 up is within 1%, as before from 1024 up). On 24 GiB,
#   a bigger budget now also loses ~2.5% with its blocks held fixed: the measured tile steps.
# - vLLM's budget defaults lean large (2048 to 16384, the A100 kept out of the biggest row since v0.9);
#   `long_prefill_token_threshold` is off (0) and only cuts requests longer than itself.
# - Diagnosis: spikes → lower the budget; slow TTFT → raise it; low utilisation with small chunks → raise the
#   budget or admit more decodes; steady TPOT but low throughput → the waiting queue shows requests starved
#   of seats or blocks.

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
from minivllm.lab.exercises.ch11_7 import check_exercise_1, check_exercise_2, check_exercise_3


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
