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
# # Chapter 11 · Instructor appendix: how far to trust the simulator · 讲师附录：模拟器能信几分
#
# - The student notebooks 11_7 and 11_9 price each engine step with a cost model of a GPU (the real
#   Scheduler, a virtual clock). This appendix is for instructors: it checks that model before its numbers
#   are taught, in six parts, each a claim, one experiment and a verdict computed from the data.
#   1. The simulator against runs other people published on real GPUs.
#   2. Where the model's throughput dips past the knee, and what that does and does not say about vLLM.
#   3. How a step is priced: the floor, the tile edges, and what small chunks pay.
#   4. How far to trust preemption counts and the 3% tie band.
#   5. The same scene on the real model on this CPU, where a piggybacked token is not free.
#   6. The CPU preset's fit to this machine.
# - It ends with what can be taught from the GPU-scale numbers and what cannot.

# %% [markdown]
# ## 1. Against published GPU runs · 对照公开的 GPU 测量
#
# - **Claim**: the GPU presets, built from published profiles (one source per term: Vidur's measured
#   linear-layer times with their tile steps, its attention and CPU-overhead profiles, each model's KV
#   heads, KV capacity from GPU memory at the budget; `python -m minivllm.lab.sim.gpu_presets`), reproduce
#   runs measured elsewhere.
# - **Experiment**: `python -m minivllm.lab.benchmarks.sim_validation` replays vLLM's latency benchmark,
#   Lambda's ShareGPT runs of Llama-3-8B (320 and 10 prompts, A100 and H100, vLLM 0.6), SGLang's reproduction
#   of vLLM 0.6.0 and inference-sim's Llama-2-7B H100 ground truth (vLLM V1, 5-10 req/s), and compares each
#   published metric. It also prints where the
#   simulated busy time went, so that a good ratio cannot hide two errors cancelling.
# - Each run is priced as the engine it ran on (`engine_generation`): vLLM 0.6 adds the host work (schedule,
#   prepare inputs, sampler) to every step (`v0.6-multistep`; its `--num-scheduler-steps N` pays it once per
#   N decode steps); V1 overlaps it with the GPU, so a step costs the larger of the two (`v1`). The presets'
#   host term is vLLM 0.6's. Lambda's files stream tokens in chunks of ~10, SGLang started vLLM with
#   `--num-scheduler-steps 10`: both are replayed with 10-step bursts.
# - What is fitted: one term (the host cost per request, to Lambda's A100 TPOT with every step paying the host
#   cost; the H100 run is held out),
#   and the API server's intake, read off each run's fastest first token. Everything else comes from
#   profiles measured elsewhere. `--ablate` replays each run with one term left out.

# %%
from minivllm.lab.benchmarks import sim_validation
from minivllm.lab.sim.published_runs import PUBLISHED_RUNS

replays = [sim_validation.replay(run) for run in PUBLISHED_RUNS]
print(sim_validation.format_table(replays))
for r in replays:
    print(f"{r['run']}: busy time by term " + ", ".join(f"{k} {v:.0%}" for k, v in r["term_shares"].items()))

# %%
from minivllm.lab.sim.published_runs import get_run

ratios = [(r["run"], row["metric"], row["ratio"]) for r in replays for row in r["rows"] if "not_comparable" not in row]
worst = max(ratios, key=lambda x: abs(x[2] - 1))
held_out = [x for x in ratios if "h100" in x[0]]
worst_held = max(held_out, key=lambda x: abs(x[2] - 1))
own = [r for r in replays if r["engine_generation"] != "v1" and get_run(r["run"]).recorded_lengths]
v1 = [r for r in replays if r["engine_generation"] == "v1"]
multi = [r for r in replays if r["num_scheduler_steps"] > 1]
other = {r["run"]: sim_validation.replay(get_run(r["run"]), engine_generation="v0.6-multistep") for r in v1 + multi}
online = [r for r in multi if get_run(r["run"]).workload.request_rate]  # arrivals spread: bursts delay them


def far(rows):
    return max(rows, key=lambda row: abs(row["ratio"] - 1))


print(f"{'run':43} {'generation':18} {'furthest ratio':>22}   priced as v0.6, single steps")
for r in replays:
    row, alt = far(r["rows"]), other.get(r["run"])
    print(
        f"{r['run']:43} {sim_validation.generation_label(r):18} {row['metric']:>15} {row['ratio']:.3f}   "
        + (f"{far(alt['rows'])['metric']} {far(alt['rows'])['ratio']:.3f}" if alt else "(its own generation)")
    )
outside_own = [f"{r['run']} {row['metric']}" for r in own for row in r["rows"] if not row["ok"]]
outside = [f"{r['run']} {row['metric']} {row['ratio']:.2f}" for r in replays for row in sim_validation.counted(r)]
unchecked = [
    f"{r['run']} {row['metric']} {row['ratio']:.2f}" for r in replays for row in r["rows"] if "not_comparable" in row
]
e2e = [
    (row["ratio"], o["ratio"])
    for r in v1
    for row, o in zip(r["rows"], other[r["run"]]["rows"])
    if "e2e" in row["metric"]
]
ttft = [
    (row["ratio"], o["ratio"])
    for r in online
    for row, o in zip(r["rows"], other[r["run"]]["rows"])
    if "ttft" in row["metric"]
]
print(
    f"vLLM 0.6 runs replayed with their own recorded lengths: {sum(len(r['rows']) for r in own)} metrics, every one "
    f"within its target (TTFT ±25%, the rest ±15%): {not outside_own}. V1 runs priced as V1: E2E "
    f"{min(a for a, _ in e2e):.2f}-{max(a for a, _ in e2e):.2f} of the published, as vLLM 0.6 "
    f"{min(b for _, b in e2e):.2f}-{max(b for _, b in e2e):.2f}. {online[0]['run']}'s median TTFT: {ttft[-1][0]:.2f} "
    f"with its bursts, {ttft[-1][1]:.2f} without. Outside the target: {', '.join(outside) or 'none'}; not "
    f"comparable (the run's record says why): {', '.join(unchecked) or 'none'}."
)
print(f"The furthest off: {worst[0]} {worst[1]}, {worst[2] - 1:+.1%}; on the held-out H100 runs: "
      f"{worst_held[1]} {worst_held[2] - 1:+.1%}.")  # fmt: skip

# %% [markdown]
# ## 2. Where the model's throughput dips · 模型里吞吐为何会下降
#
# - **Claim** to check: past the knee, the step-time model's raw throughput can fall a few percent (11_7's
#   workload with 32 seats; 11_9's sweep). Is that the book's inverted U?
# - **Experiment**: 11_7's 100 Azure conversations (all at once) on the Llama-2-7B/A100 preset with
#   `max_num_seqs` 32, one run per budget. Beside throughput: preemptions, the busy time and its
#   linear-layer term, the decode-only steps, and the measured profile's linear cost per token of a full
#   step at the budget.

# %%
import statistics

from minivllm.config import EngineConfig
from minivllm.core.scheduler import Scheduler
from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.metrics.shape import describe
from minivllm.lab.metrics.summary import summarize
from minivllm.lab.sim.cost_model import CostModel
from minivllm.lab.sim.run import run_workload
from minivllm.lab.sim.sim_runner import SimRunner
from minivllm.lab.sim.workload import make_workload

A100 = CostModel.from_preset("llama2_7b_a100")


def sim_engine(requests, max_model_len=4096, scheduler_cls=Scheduler, **engine_kwargs):
    """One engine (vLLM-named settings) on the simulator, run to the end; its trace and its SimRunner."""
    config = EngineConfig.from_kwargs(model="none", max_model_len=max_model_len, **engine_kwargs)
    engine = LLMEngine(config, model_runner=SimRunner(A100, vocab_size=A100.vocab_size, config=config),
                       scheduler_cls=scheduler_cls)  # fmt: skip
    run_workload(engine, requests)
    return engine.trace, engine.model_runner


workload = make_workload("azure_conv", 100, seed=0, vocab_size=A100.vocab_size, max_model_len=4096)
BUDGETS = [64, 128, 256, 512, 1024, 2048, 4096, 8192]
SEATS = 32
dip = {}
for b in BUDGETS:
    t, runner = sim_engine(workload.requests, max_num_batched_tokens=b, max_num_seqs=SEATS)
    dip[b] = {"tok/s": summarize(t).output_throughput, "preemptions": summarize(t).num_preemptions,
              "busy s": runner.busy_time, "linear s": runner.term_time["linear"],
              "decode-only steps": sum(not s.prefill_tokens for s in t.steps),
              "linear µs/token": A100.profiled_linear(b) / b * 1e6}  # fmt: skip
COLS = list(dip[BUDGETS[0]])
print(f"{'budget':>6} " + " ".join(f"{c:>{max(len(c), 7)}}" for c in COLS))
for b, row in dip.items():
    print(f"{b:>6} " + " ".join(f"{row[c]:>{max(len(c), 7)}.{0 if isinstance(row[c], int) else 2}f}" for c in COLS))

# %%
thr = [dip[b]["tok/s"] for b in BUDGETS]
top = thr.index(max(thr))
low = top + thr[top:].index(min(thr[top:]))
hi, lo = dip[BUDGETS[top]], dip[BUDGETS[low]]
busy, linear = lo["busy s"] - hi["busy s"], lo["linear s"] - hi["linear s"]
stretch = BUDGETS[top : low + 1]
tile = max(zip(stretch, stretch[1:]), key=lambda p: dip[p[1]]["linear µs/token"] / dip[p[0]]["linear µs/token"])
print(
    f"Throughput {describe(BUDGETS, thr)}: from its peak at {BUDGETS[top]} to {BUDGETS[low]}, "
    f"{thr[low] / thr[top] - 1:+.1%}; preemptions there: {sorted({dip[b]['preemptions'] for b in stretch})}."
)
print(f"The busy time grows {busy:+.2f} s; the linear layers' term {linear:+.2f} s ({linear / busy:.0%} of it). "
      f"Two parts: decode-only steps, which pay the weight read for at most {SEATS} tokens, "
      f"{hi['decode-only steps']} -> {lo['decode-only steps']}; and the profile's cost per token of a full step, "
      f"{dip[tile[0]]['linear µs/token']:.2f} -> {dip[tile[1]]['linear µs/token']:.2f} µs from {tile[0]} to "
      f"{tile[1]} (a tile step).")  # fmt: skip

# %% [markdown]
# - What can be taught: in the step-time model throughput flattens past the knee and may dip a few %
#   (a tile step of the measured profile, preemptions); that is not evidence that real vLLM's throughput
#   falls. vLLM's tuning guide recommends budgets > 8192 for throughput. The profile is measured per
#   token count in isolation; whether a real mixed step pays the same tile step depends on kernels the
#   model does not simulate.
# - The book's inverted U appears in the notebooks only through a limit on useful work: a TPOT SLO (11_7
#   goodput) and activation memory taking KV blocks on a small card (11_7, a mechanism from vLLM's
#   profiling run, its size an estimate).

# %% [markdown]
# ## 3. How a step is priced · 一步的价格
#
# - **Claim**: on the GPU presets a step costs a floor (the host work and one read of the weights) plus a
#   per-token part that the measured linear-layer profile prices in tiles: flat for the first tens of
#   tokens, then a jump at each tile edge. So prompt tokens riding on a few decodes are nearly free, and a
#   prompt cut into small chunks pays the floor once per chunk.
# - **Experiment**: the cost model's price of steps on both sides of each tile edge up to 512 tokens: the
#   linear-layer term, a prefill-only step, and the extra cost per prompt token when the step also carries
#   8 decodes (~900 tokens of context each, 11_9's misconception 1).

# %%
from minivllm.lab.sim.cost_model import shapes_from_steps
from minivllm.lab.sim.workload import WorkloadRequest
from minivllm.sampling_params import SamplingParams


def step_ms(shape):
    return A100.step_time(shape) * 1e3


profile = [(int(t), s) for t, s in A100.linear_profile]
THIN = max(t for t, s in profile if s <= 1.1 * A100.profiled_linear(1))  # within 10% of a one-token step
EDGES = [(t0, t) for (t0, s0), (t, s) in zip(profile, profile[1:]) if t <= 512 and s > 1.1 * s0]
decodes = [(1, 900)] * 8
ride = {n: (step_ms(decodes + [(n - 8, 0)]) - step_ms(decodes)) / (n - 8) * 1e3 for n in (THIN, 2048)}
print(f"{'tokens':>6} {'linear ms':>9} {'prefill step ms':>15} {'riding µs/token':>15}")
for n in [1, *(t for edge in EDGES for t in edge), 2048]:
    riding = f"{(step_ms(decodes + [(n - 8, 0)]) - step_ms(decodes)) / (n - 8) * 1e3:.0f}" if n > 8 else "-"
    print(f"{n:>6} {A100.profiled_linear(n) * 1e3:>9.2f} {step_ms([(n, 0)]):>15.2f} {riding:>15}")
floor = step_ms([(1, 0)])
print(f"A one-token step costs {floor:.2f} ms = " + " + ".join(f"{k} {v * 1e3:.2f}" for k, v in
      A100.terms([(1, 0)]).items()) + f" ms. Steps up to {THIN} tokens keep the linear term within 10% of it; "
      "the tile edges add " + ", ".join(f"{(A100.profiled_linear(t) - A100.profiled_linear(t0)) * 1e3:.1f} ms "
      f"at {t0} -> {t}" for t0, t in EDGES) + f". A prompt token riding on 8 decodes costs {ride[THIN]:.0f} µs "
      f"in a {THIN}-token step and {ride[2048]:.0f} µs in a 2048-token one ({ride[2048] / ride[THIN]:.1f}x).")  # fmt: skip

# %% [markdown]
# - **Experiment**: one 2,048-token prompt alone, prefilled in chunks of 2048 down to 32 tokens. Each chunk
#   re-reads the KV of the chunks before it; each step pays the floor.

# %%
doc = [WorkloadRequest("doc", 0.0, list(range(3, 2051)), SamplingParams(max_tokens=1, ignore_eos=True))]
lone = {}
for chunk in (2048, 1024, 512, 128, 32):
    t, _ = sim_engine(doc, max_num_batched_tokens=chunk, max_num_seqs=1)
    shapes = shapes_from_steps(t.steps)
    terms = {k: sum(A100.terms(s)[k] for s in shapes) * 1e3 for k in A100.terms(shapes[0])}
    lone[chunk] = {"steps": len(shapes), "KV re-read": sum(k for s in shapes for _, k in s), **terms,
                   "total ms": (t.steps[-1].end - t.steps[0].start) * 1e3}  # fmt: skip
COLS = list(lone[2048])
print(f"{'chunk':>5} " + " ".join(f"{c:>10}" for c in COLS) + f" {'µs/token':>8}")
for chunk, row in lone.items():
    print(f"{chunk:>5} " + " ".join(f"{row[c]:>10.{0 if isinstance(row[c], int) else 1}f}" for c in COLS)
          + f" {row['total ms'] / 2048 * 1e3:>8.0f}")  # fmt: skip
small, big = lone[32], lone[2048]
per_step = (small["host"] + small["linear"]) / small["total ms"]
reread = (small["attention"] + small["kv_read"] - big["attention"] - big["kv_read"]) / small["total ms"]
print(f"From chunk 2048 to 32 the same prefill takes {small['total ms'] / big['total ms']:.1f}x as long. At 32, "
      f"host work and the linear layers ({small['steps']} steps, each near the {floor:.1f} ms floor) are "
      f"{per_step:.0%} of the time; re-reading {small['KV re-read']} tokens of KV adds {reread:.0%}: "
      f"{'the floor per step' if per_step > reread else 'the KV re-reads'} is what small chunks pay for.")  # fmt: skip

# %% [markdown]
# ## 4. How far to trust preemption counts and the 3% tie band · 抢占次数与 3% 平局带能信几分
#
# - **Claim**: at GPU scale, a run's KV blocks come from vLLM's profiling run, which subtracts the activation
#   peak of a full budget, so every budget gets a slightly different KV cache. A preemption count therefore
#   can hang on a few dozen blocks, not only on the scheduling.
# - **Experiment**: 11_9's ShareGPT traffic (80 requests at 2.5 req/s, 128 seats) with budgets 512, 2048 and
#   chunking off, each with its own KV blocks; then budget 2048 given the unchunked run's blocks.

# %%
from minivllm.lab.baselines import PrefillFirstScheduler

sharegpt = make_workload("sharegpt", 80, rate=2.5, arrival="poisson", seed=0, vocab_size=A100.vocab_size,
                         max_model_len=4096).requests  # fmt: skip
SETTINGS = {"budget 512": dict(max_num_batched_tokens=512), "budget 2048": dict(max_num_batched_tokens=2048),
            "unchunked": dict(max_num_batched_tokens=4096, enable_chunked_prefill=False)}  # fmt: skip
kv_blocks = {k: A100.num_blocks(16, s["max_num_batched_tokens"], 128) for k, s in SETTINGS.items()}
edge_runs = {k: (s, kv_blocks[k]) for k, s in SETTINGS.items()}
edge_runs["budget 2048, unchunked's blocks"] = (SETTINGS["budget 2048"], kv_blocks["unchunked"])
edge = {}
print(f"{'setting':>30} {'KV blocks':>9} {'max KV usage':>12} {'preemptions':>11}")
for label, (settings, blocks) in edge_runs.items():
    t, _ = sim_engine(sharegpt, max_num_seqs=128, num_gpu_blocks=blocks, **settings)
    edge[label] = summarize(t)
    print(f"{label:>30} {blocks:>9} {edge[label].max_kv_usage:>12.1%} {edge[label].num_preemptions:>11}")
fewer = kv_blocks["budget 2048"] - kv_blocks["unchunked"]
own, moved = edge["budget 2048"].num_preemptions, edge["budget 2048, unchunked's blocks"].num_preemptions
print(f"Budget 2048 with {fewer} fewer blocks ({fewer / kv_blocks['budget 2048']:.2%} of its KV cache) preempts "
      f"{moved} time(s) instead of {own}: "
      + (f"{fewer} blocks decide whether this run preempts. Read a small preemption count as 'this traffic is "
         "near the KV edge', not as one budget preempting more than another; the activation estimate behind the "
         "block counts is itself only an estimate." if moved != own else
         "here the count does not move with the blocks; it still says only how close the run is to the KV edge."))  # fmt: skip

# %% [markdown]
# - **Claim**: 11_9 calls throughput differences within 3% a tie. On traffic where chunking has nothing to
#   gain, sensible settings should land inside that band and a real cost far outside it.
# - **Experiment**: 32 Azure code requests (long prompts, short answers) all at once, 32 seats: V0's
#   prefill-only scheduler, V1 unchunked, and V1 with budgets 2048 down to 32; throughput counts prompt and
#   output tokens, against the better of the two unchunked ways.

# %%
code = make_workload("azure_code", 32, seed=0, vocab_size=A100.vocab_size, max_model_len=4096).requests
t, _ = sim_engine(code, max_num_seqs=32, max_num_batched_tokens=4096, enable_chunked_prefill=False,
                  scheduler_cls=PrefillFirstScheduler)  # fmt: skip
tput = {"V0 prefill-only": summarize(t).total_throughput}
for b in (4096, 2048, 512, 128, 32):
    t, _ = sim_engine(code, max_num_seqs=32, max_num_batched_tokens=b, enable_chunked_prefill=b != 4096)
    tput["V1 unchunked" if b == 4096 else f"budget {b}"] = summarize(t).total_throughput
ref_tput = max(tput["V0 prefill-only"], tput["V1 unchunked"])
vs = {way: v / ref_tput - 1 for way, v in tput.items()}
print(f"{'way':>16} {'tokens/s':>8} {'vs better unchunked':>19}")
for way, v in tput.items():
    print(f"{way:>16} {v:>8.0f} {vs[way]:>+19.1%}")
sensible = [w for w in vs if w not in ("budget 128", "budget 32") and tput[w] != ref_tput]
spread, cost_small = max(abs(vs[w]) for w in sensible), min(-vs["budget 128"], -vs["budget 32"])
print(f"{', '.join(sensible)} land within {spread:.1%} of the better unchunked way; budgets 128 and 32 lose "
      f"{-vs['budget 128']:.0%} and {-vs['budget 32']:.0%}. A 3% band "
      + ("holds the first and is far below the second: differences under it come from where step boundaries and "
         "tile edges fall, and are a tie, not a ranking." if spread < 0.03 < cost_small / 3 else
         "does not separate them on this traffic; widen or narrow it before teaching a ranking."))  # fmt: skip

# %% [markdown]
# ## 5. The same scene on this CPU · 在本机 CPU 上
#
# - **Claim**: on a GPU a decode step leaves the compute units idle, so the first tens of prompt tokens
#   ride along almost free; on a CPU the matrix multiplies become compute bound after a few tokens, so
#   every piggybacked token costs.
# - **Experiment**: the real SmolLM2-135M, one torch thread (as the CPU preset's fit). Three chats decode;
#   a 128-token prompt lands at step 2. Budgets 16 and 128. Steps are checked; wall times change from run to
#   run on a shared machine and are not.

# %%
import torch

from minivllm.model.loader import load_model
from minivllm.sampling_params import SamplingParams
from minivllm.worker.model_runner import ModelRunner

torch.set_num_threads(1)
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
    print(
        f"budget {budget:>3}: {len(t.steps)} steps; long's prompt in {len(chunks)} chunks "
        f"{[n for _, n in chunks] if len(chunks) < 6 else [n for _, n in chunks[:3]] + ['...']}, "
        f"first token in step {chunks[-1][0]} (arrived in step 2)"
    )

# %%
# NBVAL_IGNORE_OUTPUT
print(f"{'budget':>6} {'long TTFT s':>11} {'chat TPOT ms':>12} {'chat ITL max ms':>15} {'total s':>8}")
for budget, t in cpu_runs.items():
    chats = [t.requests[f"chat{i}"] for i in range(3)]
    chat_tpot = statistics.mean((r.token_times[-1] - r.token_times[0]) / (r.num_output_tokens - 1) for r in chats)
    itl_max = max(g for r in chats for g in r.itls)
    print(
        f"{budget:>6} {t.requests['long'].ttft:>11.2f} {chat_tpot * 1e3:>12.0f} {itl_max * 1e3:>15.0f} "
        f"{t.steps[-1].end - t.steps[0].start:>8.2f}"
    )

# %%
first_token = {b: max(s.step for s in t.steps if "long" in s.prefill_tokens) for b, t in cpu_runs.items()}
print(f"Steps (checked): the long prompt's first token comes {first_token[16] - 2} steps after it arrives at budget "
      f"16, {first_token[128] - 2} at 128: the same direction as on the GPU model. The wall times above are not "
      "checked (a shared machine).")  # fmt: skip

# %% [markdown]
# - Step cost relative to a decode-only step (3 decodes), for steps with the same total tokens, first on the
#   A100 cost model, then measured here:


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
# ## 6. The CPU fit · CPU 拟合
#
# - The CPU preset is a measurement of one machine. Its fit records the CPU, torch threads and clock; on
#   another machine the simulator warns and names the command that fits this one
#   (`python -m minivllm.lab.sim.calibrate --local`, minutes on a quiet 2-core machine; the fit is cached).

# %%
# NBVAL_IGNORE_OUTPUT
from minivllm.lab.sim.local_fit import fit_status

print(fit_status())

# %% [markdown]
# ## 7. How far to trust the GPU-scale numbers · GPU 规模数字能信几分

# %%
print(f"- Magnitudes: on the {len(replays)} published runs every metric is within "
      f"{max(abs(x[2] - 1) for x in ratios):.0%} (the held-out H100 runs within {abs(worst_held[2] - 1):.0%}); the "
      f"furthest are V1's end-to-end latencies, where the host term's share of the busy time is "
      f"{max(r['term_shares']['host'] for r in v1):.0%}: the GPU terms at V1's batches, not the host work. Price "
      "a V1 engine as v1 (a vLLM 0.6 preset adds ~1 ms a step it does not pay). Teach the numbers as 'about', not "
      "to the last digit.")  # fmt: skip
print(
    "- Scheduling: exact. The engine under the simulator is minivllm's Scheduler, whose decisions match vLLM V1's "
    "golden tests; which request gets which tokens in which step is not modelled, it is run."
)
print(f"- Differences of a few %: not resolvable. The dip in part 2 is {thr[low] / thr[top] - 1:+.1%}, inside "
      f"the {sim_validation.TOLERANCE['other']:.0%} band the model is checked to; do not read a falling half of "
      "throughput from it.")  # fmt: skip
print(
    f"- Preemption counts: {fewer} KV blocks move budget 2048 from {own} to {moved} preemption(s) (part 4); a "
    "small count says how near the traffic runs to the KV edge, not which budget preempts less."
)
print(f"- Rankings: throughput within 3% is a tie. Where chunking has nothing to gain, sensible settings spread "
      f"{spread:.1%} and budget 32 loses {-vs['budget 32']:.0%} (part 4); a step's floor of {floor:.1f} ms is "
      "what small budgets pay for (part 3).")  # fmt: skip
print(f"- CPU: the GPU model prices a 64-token step at {gpu_ratio[64]:.2f}x a decode-only step; on a CPU the cost "
      "grows with every token (part 5's measured ratios, wall clock, so not checked here). The real-model runs on a "
      "laptop show the scheduling, not the GPU's chunk-size trade-off.")  # fmt: skip
