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
# - The numbers come from the simulator: the real Scheduler, each step priced by a cost model of Llama-2-7B
#   on an A100 (virtual clock, deterministic). How far those numbers can be trusted, checked against
#   published GPU runs and against the real model on a CPU, is in the instructor appendix
#   `11_instructor_simulator.ipynb`.
# - Each section: the book's claim, one experiment, a small table or figure, and a verdict computed from
#   the data.

# %% [markdown]
# **Words used in these notebooks** (the same in every ch. 11 notebook)
#
# | term | meaning here |
# |---|---|
# | **TTFT** | time to first token: from a request's arrival to its first output token |
# | **TPOT** | time per output token: (last token time − first token time) / (output tokens − 1), one number per request |
# | **ITL** | inter-token latency: each gap between two consecutive output tokens of one request (many per request) |
# | **stall** | an inter-token gap longer than 5× the run's median ITL; in a Gantt, a decode step longer than 5× the median step |
# | **goodput** | output tokens per second counting only the requests whose TPOT meets the SLO (e.g. ≤ 100 ms) |
# | **budget** | the token budget `max_num_batched_tokens`: the most tokens one engine step may schedule, prefill and decode together |

# %%
import statistics

from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.metrics.shape import describe, monotone
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
N = len(workload.requests)
print(f"{N} requests, all at t = 0; prompt mean {stats['prompt_mean']:.0f} tokens, "
      f"output mean {stats['output_mean']:.0f} tokens")  # fmt: skip

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
# **Experiment.** Azure conversation lengths, all requests at once (the engine is saturated), one run per
# budget from 64 to 8192, `max_num_seqs` 64. The same table comes from `python -m minivllm bench --mode sim
# --cost-model llama2_7b_a100 --workload azure_conv --num-prompts 100 --max-num-seqs 64 --max-model-len 4096
# --sweep max-num-batched-tokens=64,...,8192`. **Utilisation** is the share of the A100's peak FLOP/s the
# steps use (useful FLOPs over step time × peak, `minivllm.lab.sim.utilisation`), not tokens per step.
# Every verdict checks each step of the sweep: a change of at most 2% counts as flat.

# %%
BUDGETS = [64, 128, 256, 512, 1024, 2048, 4096, 8192]
traces = {b: sim_run(workload.requests, max_num_batched_tokens=b, max_num_seqs=64) for b in BUDGETS}
metrics = {b: {**summarize(t).to_dict(), "utilisation": trace_utilisation(A100, t.steps)} for b, t in traces.items()}
per_step = {b: statistics.mean(s.num_scheduled_tokens for s in t.steps) for b, t in traces.items()}
print(f"{'budget':>6} {'steps':>5} {'tokens/step':>11} {'TTFT p50 s':>10} {'TPOT p50 ms':>11} {'TPOT p99 ms':>11} "
      f"{'out tok/s':>9} {'util %':>6}")  # fmt: skip
for b, m in metrics.items():
    print(f"{b:>6} {len(traces[b].steps):>5} {per_step[b]:>11.0f} {m['ttft_p50']:>10.1f} {m['tpot_p50'] * 1e3:>11.1f} "
          f"{m['tpot_p99'] * 1e3:>11.1f} {m['output_throughput']:>9.0f} {m['utilisation']:>6.1%}")  # fmt: skip

# %%
from minivllm.lab.viz.figures import chunk_size_curves

chunk_size_curves(metrics, title="Chunk size: Llama-2-7B on an A100 (simulated), 100 Azure conversations")

# %%
from minivllm.lab.metrics.shape import TOL, segments

curve = {k: [metrics[b][k] for b in BUDGETS] for k in ("ttft_p50", "tpot_p50", "tpot_p99", "itl_p99",
                                                        "output_throughput", "utilisation")}  # fmt: skip
thr, util = curve["output_throughput"], curve["utilisation"]
peak = BUDGETS[thr.index(max(thr))]
below_peak = 1 - min(thr[thr.index(max(thr)) :]) / max(thr)
flat_tail = segments(curve["tpot_p50"])[-1]
knee = BUDGETS[flat_tail.start] if flat_tail.way == "flat" else BUDGETS[-1]
u_segs = segments(util)
plateau = len(u_segs) == 2 and u_segs[0].way == "rises" and u_segs[1].way == "flat"


def verdict(holds):
    return "holds" if holds else "does not hold at every step"


def steps(b):
    return len(traces[b].steps)


ttft_holds = monotone(curve["ttft_p50"], "falls")
print(f"TTFT p50 {describe(BUDGETS, curve['ttft_p50'])}. Book (单调下降): {verdict(ttft_holds)}.")
print(f"TPOT p50 {describe(BUDGETS, curve['tpot_p50'])}; TPOT p99 {describe(BUDGETS, curve['tpot_p99'])}. "
      f"Book (单调上升): {verdict(monotone(curve['tpot_p50'], 'rises') and monotone(curve['tpot_p99'], 'rises'))}.")
print(f"Why TPOT stops: from {knee} on the run takes {steps(knee)}-{steps(BUDGETS[-1])} steps (it is decode-bound) "
      f"and the same prefill work lands in fewer, bigger steps. TPOT averages a request's gaps, so it stays; "
      f"the worst gap (ITL p99) still grows, {curve['itl_p99'][flat_tail.start] * 1e3:.0f} -> "
      f"{curve['itl_p99'][-1] * 1e3:.0f} ms.")  # fmt: skip
print(f"Throughput {describe(BUDGETS, thr)}; highest at {peak}, at most {below_peak:.1%} below that past it. "
      f"Book (倒 U 型): {'a falling half' if below_peak > TOL else 'only the rising half'} in this sweep; "
      f"small budgets pay the per-step floor more often ({steps(64)} steps at 64, {steps(knee)} at {knee}).")
print(f"Utilisation {describe(BUDGETS, [u * 100 for u in util])}, ending at {util[-1]:.0%} of peak FLOP/s. "
      f"Book (Plateau): {verdict(plateau)}.")

# %% [markdown]
# - What a reader can conclude about throughput: in the step-time model throughput flattens past the knee
#   and may dip a few % (a tile step of the measured linear-layer profile, preemptions); that is not
#   evidence that real vLLM's throughput falls. vLLM's own tuning guide recommends budgets > 8192 for
#   throughput. What can bend the curve down is a limit on the *useful* work: an SLO (next) or KV memory
#   (after it).
#
# ### Goodput under a TPOT SLO · SLO 下的有效吞吐
#
# - **Claim**: the inverted U is what an operator sees once requests must meet a latency objective.
#   Goodput counts only the output tokens of requests whose TPOT met the SLO (Sarathi-Serve's "capacity
#   under an SLO"). **Experiment**: the same runs, recounted under four SLOs. "Best" is the smallest budget
#   within 1% of the highest goodput: budgets closer than that are not told apart.

# %%
from minivllm.lab.metrics.goodput import goodput, num_within_slo
from minivllm.lab.viz.widgets.goodput import TIE
from minivllm.lab.viz.widgets.goodput import best_budget as goodput_best

SLOS = (25, 50, 100, 200)
good = {slo: {b: goodput(t, slo / 1e3) for b, t in traces.items()} for slo in SLOS}
within = {slo: {b: num_within_slo(t, slo / 1e3) for b, t in traces.items()} for slo in SLOS}
best = {slo: goodput_best(good[slo]) for slo in SLOS}
print(f"{'TPOT SLO':>8} {'best budget':>11} {'goodput':>7} {'@8192':>6}   goodput along the sweep")
for slo in SLOS:
    b = best[slo]
    print(f"{slo:>5} ms {b:>11} {good[slo][b]:>7.0f} {good[slo][8192]:>6.0f}   "
          f"{describe(BUDGETS, [good[slo][x] for x in BUDGETS])}")  # fmt: skip


def why_not_bigger(slo):
    """Why no budget above the best one is named: it loses requests to the SLO, or it ties within 1%."""
    b = best[slo]
    bigger = [x for x in BUDGETS if x > b]
    lose = [x for x in bigger if within[slo][x] < N]
    tie = [x for x in bigger if x not in lose and good[slo][x] >= max(good[slo].values()) * (1 - TIE)]
    parts = []
    if lose:
        parts.append(f"{lose} lose requests to the SLO ({lose[-1]}: {within[slo][lose[-1]]}/{N} within)")
    if tie:
        tied = ", ".join(f"{x}: {good[slo][x]:.1f}" for x in tie)
        parts.append(f"{tie} meet it for all {N} requests but tie within {TIE:.0%} ({tied} vs {good[slo][b]:.1f} "
                     "tok/s), and the smallest tied budget is named")  # fmt: skip
    rest = len(bigger) - len(lose) - len(tie)
    if rest:
        parts.append(f"{rest} meet it with less goodput")
    return f"TPOT ≤ {slo} ms: best {b}; bigger budgets " + "; ".join(parts)


for slo in SLOS:
    print(why_not_bigger(slo))
print("the best budget never shrinks as the SLO loosens:", all(best[a] <= best[b] for a, b in zip(SLOS, SLOS[1:])))

# %%
# NBVAL_IGNORE_OUTPUT
from minivllm.lab.viz.widgets.goodput import GoodputExplorer

goodput_app = GoodputExplorer(traces, value=50)
goodput_app.ui  # noqa: B018 (the cell's value is what Jupyter displays)

# %%
for slo_ms in (10, 50):
    goodput_app.slo.value = slo_ms  # what moving the slider does
    print(goodput_app.summary())

# %% [markdown]
# ### Activation memory eats KV blocks · 激活显存挤占 KV 块
#
# - **Claim** (vLLM's code): the KV cache is what a profiling run leaves (0.8.5:
#   `Worker.determine_available_memory` runs `GPUModelRunner.profile_run`, a dummy batch of
#   `max_num_batched_tokens` tokens). Its activation peak is subtracted from `total memory ×
#   gpu_memory_utilization` with the weights, so a bigger budget leaves fewer KV blocks.
# - **Experiment**: `minivllm.lab.sim.memory` estimates that peak from the tensor shapes of one decoder
#   layer's MLP (bf16, plus fp32 logits per dummy request; fragmentation left out). Llama-2-7B on a
#   24 GiB card (A10, L4, RTX 4090) with the A100's step times, so that only the memory changes;
#   `max_num_seqs` 256. The last row runs the biggest budget with the smallest budget's blocks, to
#   separate memory from step length.

# %%
from minivllm.lab.sim.memory import llama2_7b
from minivllm.lab.sim.run import simulate

lost = {gib: 1 - llama2_7b(gib).num_blocks(16384, 256) / llama2_7b(gib).num_blocks(2048, 256) for gib in (80, 24)}
MEM = llama2_7b(24)
MEM_BUDGETS = [512, 2048, 8192, 16384]


def mem_row(budget, kv_blocks, **kw):
    trace = simulate(workload.requests, max_num_batched_tokens=budget, max_num_seqs=256, **kw).trace
    m = summarize(trace)
    return {"budget": budget, "kv_blocks": kv_blocks, "output_throughput": m.output_throughput,
            "num_preemptions": m.num_preemptions,
            "mean_running": statistics.mean(s.num_running for s in trace.steps)}  # fmt: skip


rows = [mem_row(b, MEM.num_blocks(b, 256), memory=MEM) for b in MEM_BUDGETS]
same = mem_row(MEM_BUDGETS[-1], rows[0]["kv_blocks"], num_gpu_blocks=rows[0]["kv_blocks"])
print(f"{'budget':>6} {'KV blocks':>9} {'output tok/s':>12} {'mean running':>12}")
for r in [*rows, same]:
    note = f"  (blocks of {MEM_BUDGETS[0]})" if r is same else ""
    print(f"{r['budget']:>6} {r['kv_blocks']:>9} {r['output_throughput']:>12.0f} {r['mean_running']:>12.1f}{note}")

# %%
from minivllm.lab.viz.figures.tuning import memory_curves

memory_curves(rows, title="Llama-2-7B on 24 GiB (A100 timing): a bigger budget reserves activations, fewer KV blocks",
              reference=same)  # fmt: skip

# %%
first, last = rows[0], rows[-1]
fall = last["output_throughput"] / first["output_throughput"] - 1
steps_only = same["output_throughput"] / first["output_throughput"] - 1
print(f"A {MEM_BUDGETS[-1]}-token budget reserves {lost[24]:.1%} of the KV pool on 24 GiB, {lost[80]:.1%} on 80 GiB.")
print(f"KV blocks {describe(MEM_BUDGETS, [r['kv_blocks'] for r in rows])}; mean running requests "
      f"{first['mean_running']:.1f} -> {last['mean_running']:.1f}; throughput {fall:+.1%} from {first['budget']} to "
      f"{last['budget']}, of which {steps_only:+.1%} remains with the blocks held (step length) and "
      f"{fall - steps_only:+.1%} is the memory.")  # fmt: skip

# %% [markdown]
# - A mechanism, not a measurement: the block count follows vLLM's arithmetic, and the throughput change is
#   the step-time model's answer to fewer requests running at once. It says a big budget can cost KV room
#   on a small card; it does not say how much real throughput falls.
#
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
# - Any other entry point leaves it unset and `SchedulerConfig` falls back to 2048. From v0.9 the ≥ 70 GiB
#   row excludes the A100 (`"a100" not in device_name`; PR #17885 measured lower throughput there, without
#   giving the cause). minivllm has only the `SchedulerConfig` level (no device probe):

# %%
from minivllm.config import CacheConfig, SchedulerConfig

VLLM_FALLBACK = 2048  # vllm/config.py SchedulerConfig, 0.8.5
sc, cc = SchedulerConfig(), CacheConfig()
for name in ("max_num_batched_tokens", "max_num_seqs", "long_prefill_token_threshold", "enable_chunked_prefill"):
    print(f"{name:<29} {getattr(sc, name)!r}")
print(f"{'block_size':<29} {cc.block_size!r}")
off = SchedulerConfig(enable_chunked_prefill=False)
print(f"the budget is vLLM's SchedulerConfig fallback: {sc.max_num_batched_tokens == VLLM_FALLBACK}; with chunked "
      f"prefill off it is max(max_model_len, 2048) = {off.max_num_batched_tokens}")  # fmt: skip

# %% [markdown]
# ### 11.7.2 The subtlety of the long_prefill_token_threshold patch · long_prefill_token_threshold 补丁的精妙
#
# - The book: "只有当待调度 token 数超过阈值时，才先截到阈值。短请求不会被这个阈值截断" (only a request with
#   more tokens to schedule than the threshold is cut to it; short requests are never cut). The default 0
#   means off. The budget caps a **step**; the threshold caps **one request** in a step.
# - **Experiment** on the Scheduler alone: two chats decode; at step 1 a 6000-token prompt arrives, then
#   four 400-token prompts. Budget 2048, thresholds from off to the budget. (`python -m minivllm steps
#   --long-prefill-token-threshold N` prints §11.3's scene step by step.)

# %%
from minivllm.core.scheduler import Scheduler
from minivllm.lab.cli.steps import run_step_table
from minivllm.request import Request
from minivllm.sampling_params import SamplingParams

SCENE = [("chat0", 16, 10), ("chat1", 16, 10), ("long", 6000, 2), ("s0", 400, 4), ("s1", 400, 4), ("s2", 400, 4),
         ("s3", 400, 4)]  # fmt: skip
IDS = [r for r, _, _ in SCENE]
SHORTS = IDS[3:]


def threshold_rows(threshold, budget=2048):
    scheduler = Scheduler(
        SchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=16, max_model_len=8192,
                        long_prefill_token_threshold=threshold),
        CacheConfig(block_size=16, num_gpu_blocks=1000),
    )  # fmt: skip
    requests = [Request(r, list(range(10_000 * i, 10_000 * i + p)), SamplingParams(max_tokens=m, ignore_eos=True))
                for i, (r, p, m) in enumerate(SCENE)]  # fmt: skip
    return run_step_table(scheduler, requests, arrival_steps={r: 1 for r in IDS[2:]})


def first_token_step(rows, req_id):
    """The step of the last prompt chunk: the one that samples the first token."""
    return max(r.step for r in rows if r.cells.get(req_id, "").startswith("P"))


THRESHOLDS = (0, 256, 512, 1024, 2048)
table = {}
for threshold in THRESHOLDS:
    rows_t = threshold_rows(threshold)
    done = first_token_step(rows_t, "long")
    table[threshold] = (done, [first_token_step(rows_t, s) for s in SHORTS],
                        sum(r.used for r in rows_t[1 : done + 1]) / (2048 * done), rows_t)  # fmt: skip
print(f"{'threshold':>9} {'long: first token':>17} {'shorts: first tokens':>20} {'budget used':>11}")
for threshold, (done, shorts, used, _) in table.items():
    print(f"{threshold:>9} {'step ' + str(done):>17} {str(shorts):>20} {used:>11.0%}")

# %%
off_long, off_shorts, _, _ = table[0]
mid_long, mid_shorts, _, _ = table[1024]
low = THRESHOLDS[1]
low_long, _, low_used, _ = table[low]
print(f"Threshold 1024: the short prompts' last first token comes at step {max(mid_shorts)} instead of "
      f"{max(off_shorts)}; the long prompt's at step {mid_long} instead of {off_long}. Too low ({low}): the long "
      f"prompt needs until step {low_long} and the steps use {low_used:.0%} of the budget.")  # fmt: skip
rows_512 = table[512][3]
long_max = max(int(r.cells["long"][1:]) for r in rows_512 if r.cells.get("long", "").startswith("P"))
first = next(r for r in rows_512 if r.cells.get("s0", "").startswith("P"))
whole = [s for s in SHORTS if first.cells.get(s) == "P400"]
rest = {s: first.cells[s] for s in SHORTS if s not in whole and first.cells.get(s, "").startswith("P")}
budget_cut = f"; {rest} only because the step is full ({first.used}/2048)" if rest and first.used == 2048 else ""
print(f"Threshold 512: the long prompt's chunks are at most {long_max} tokens; in step {first.step} "
      f"{', '.join(whole)} get all 400 tokens{budget_cut}. "
      f"Book (short requests are not cut): {verdict(long_max <= 512 and len(whole) > 0)}.")

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
# Each row is one experiment: the symptom, the knob turned, the numbers after, a verdict. Rows 1-2 use
# §11.1's scene: chats decoding, then three long prompts landing among them.
#
# #### 11.7.3.1 Spiky decodes: lower the budget · TPOT 尖峰：减小 max_num_batched_tokens
#
# - vLLM's `/metrics` histogram `vllm:time_per_output_token_seconds` records every decode interval
#   (`vllm/v1/metrics/stats.py`), so its p99 against p50 is the ITL's. A request's mean TPOT averages its
#   gaps and hides one spike among many tokens, so both are shown.

# %%
from minivllm.lab.sim.run import demo_workload

scene = demo_workload()
runs = {b: sim_run(scene, max_num_batched_tokens=b, max_num_seqs=16, num_gpu_blocks=600) for b in (64, 512, 4096)}
diag = {b: summarize(t) for b, t in runs.items()}
print(f"{'budget':>6} {'ITL p50':>7} {'ITL p99':>7} {'TPOT p99':>8}  (ms)")
for b, m in diag.items():
    print(f"{b:>6} {m.itl.p50 * 1e3:>7.1f} {m.itl.p99 * 1e3:>7.1f} {m.tpot.p99 * 1e3:>8.1f}")
ratio = {b: m.itl.p99 / m.itl.p50 for b, m in diag.items()}
tpot_moved = diag[4096].tpot.p99 / diag[512].tpot.p99 - 1
print(f"Symptom at 4096: ITL p99 = {ratio[4096]:.1f}x p50 -> budget 512: {ratio[512]:.1f}x; TPOT p99 moves only "
      f"{tpot_moved:+.0%}. Verdict: lowering the budget removes the spikes: {ratio[512] < ratio[4096] / 3}")

# %% [markdown]
# #### 11.7.3.2 Slow first tokens: raise the budget · TTFT 过长：增大 max_num_batched_tokens
#
# - "正常单次 prefill 时间" (one normal prefill) is read as the cost model's time for the whole prompt in
#   one step, alone.

# %%
def ttft_over_single(t):
    longs = [r for r in t.requests.values() if r.request_id.startswith("long")]
    return statistics.median(r.ttft / A100.step_time([(r.num_prompt_tokens, 0)]) for r in longs)


slow = {b: ttft_over_single(t) for b, t in runs.items()}
print(f"Symptom at 64: the long prompts' median TTFT is {slow[64]:.1f}x one prefill -> budget 512: {slow[512]:.1f}x, "
      f"4096: {slow[4096]:.1f}x. Verdict: raising the budget brings TTFT back near one prefill: "
      f"{slow[4096] < slow[64] / 2}. The two knobs pull against each other: budget 512 has ITL p99 "
      f"{diag[512].itl.p99 * 1e3:.0f} ms and {slow[512]:.1f}x.")  # fmt: skip

# %% [markdown]
# #### 11.7.3.3 Low utilisation, small chunks: raise the budget or mix more decodes · 没吃饱：增大预算或混更多 decode
#
# - "GPU SM 利用率" is read as the share of peak FLOP/s (nvidia-smi's "GPU-Util" counts the time any kernel
#   runs and reads near 100% for a memory-bound decode too). 48 requests at once, 256-1024-token prompts;
#   start at budget 32 with 8 seats, then turn each knob.

# %%
small = make_workload("uniform", 48, seed=0, vocab_size=A100.vocab_size, max_model_len=4096,
                      prompt_len=(256, 1024), output_len=(32, 128))  # fmt: skip
feed = {}
for name, kw in (("budget 32, 8 seqs", dict(max_num_batched_tokens=32, max_num_seqs=8)),
                 ("budget 512, 8 seqs", dict(max_num_batched_tokens=512, max_num_seqs=8)),
                 ("budget 512, 64 seqs", dict(max_num_batched_tokens=512, max_num_seqs=64))):  # fmt: skip
    t = sim_run(small.requests, **kw)
    feed[name] = (trace_utilisation(A100, t.steps), summarize(t).output_throughput)
print(f"{'':<20} {'utilisation':>11} {'output tok/s':>12}")
for name, (u, tp) in feed.items():
    print(f"{name:<20} {u:>11.1%} {tp:>12.0f}")
(u0, _), (u1, _), (u2, _) = feed.values()
print(f"Verdict: both knobs feed the GPU: {u0 < u1 < u2}")

# %% [markdown]
# #### 11.7.3.4 Steady TPOT, low throughput: look at the waiting queue · TPOT 稳定但吞吐低：查 waiting 队列长度
#
# - The 100 conversations arriving at 8 per second, budget 2048, 4 seats against 64. The queue is
#   `SchedulerStats.num_waiting_reqs` (`vllm:num_requests_waiting` in `/metrics`), in every step of the trace.

# %%
arriving = make_workload("azure_conv", 100, rate=8.0, seed=0, vocab_size=A100.vocab_size, max_model_len=4096)
queue = {n: summarize(sim_run(arriving.requests, max_num_batched_tokens=2048, max_num_seqs=n)) for n in (4, 64)}
print(f"{'max_num_seqs':>12} {'TPOT p99/p50':>12} {'output tok/s':>12} {'most waiting':>12}")
for seqs, m in queue.items():
    print(f"{seqs:>12} {m.tpot.p99 / m.tpot.p50:>12.2f} {m.output_throughput:>12.0f} {m.max_num_waiting:>12}")
few, many = queue[4], queue[64]
print(f"Verdict: at 4 seats TPOT is steady (p99/p50 {few.tpot.p99 / few.tpot.p50:.2f}) and throughput "
      f"{few.output_throughput / many.output_throughput:.0%} of 64 seats', with up to {few.max_num_waiting} requests "
      f"waiting: the queue gives it away: {few.max_num_waiting > 10 * many.max_num_waiting}. What starved is "
      "admission (seats or KV blocks), not the decodes.")  # fmt: skip

# %% [markdown]
# #### 11.7.3.5 Explore the knobs · 交互探索
#
# - The config explorer reruns §11.1's scene on the simulator for every change and redraws the latency
#   Gantt with the headline metrics. Its sliders offer only values the engine accepts.

# %%
# NBVAL_IGNORE_OUTPUT
from minivllm.lab.viz.widgets import ConfigExplorer

app = ConfigExplorer()
app.ui  # noqa: B018 (the cell's value is what Jupyter displays)

# %%
for value in (128, 2048):
    app.budget.value = value  # what moving the slider does
    print(app.summary())

# %% [markdown]
# **Try this:** set the budget to 16 and then 8192 and watch the long prompts' bars in the Gantt: many thin
# prefill slices vs one thick one that stalls every chat. Then shrink the KV blocks until preemptions
# appear. In the goodput explorer, slide the SLO from 10 to 300 ms and watch the peak move right.

# %% [markdown]
# ## Summary

# %%
print(f"- TTFT {describe(BUDGETS, curve['ttft_p50'])} (单调下降 {verdict(monotone(curve['ttft_p50'], 'falls'))}). "
      f"TPOT p50 {describe(BUDGETS, curve['tpot_p50'])}; 单调上升 {verdict(monotone(curve['tpot_p50'], 'rises'))}, "
      f"the worst gap keeps growing.")  # fmt: skip
print(f"- Utilisation plateaus at {util[-1]:.0%} of peak. Raw throughput {describe(BUDGETS, thr)}: the step-time "
      "model shows no evidence for or against a falling half in real vLLM.")
print("- Under a TPOT SLO the peak grows with the SLO: "
      + ", ".join(f"{best[slo]} at {slo} ms" for slo in SLOS) + ". "
      + why_not_bigger(100) + ".")
print(f"- On 24 GiB a bigger budget's activation reserve takes KV blocks ({rows[0]['kv_blocks']} -> "
      f"{rows[-1]['kv_blocks']}), and fewer requests run at once.")
print(f"- Defaults: budget {sc.max_num_batched_tokens}, threshold {sc.long_prefill_token_threshold} (off); the "
      f"threshold cuts only requests longer than itself.")
print(f"- Diagnosis, each row tested: spikes -> lower the budget (ITL p99/p50 {ratio[4096]:.0f}x -> {ratio[512]:.1f}x);"
      " "
      f"slow TTFT -> raise it ({slow[64]:.1f}x -> {slow[4096]:.1f}x one prefill); low utilisation -> raise the budget "
      f"or admit more decodes ({u0:.0%} -> {u2:.0%}); steady TPOT, low throughput -> the waiting queue "
      f"(up to {few.max_num_waiting} waiting).")  # fmt: skip

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
