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
# # Chapter 11.1-11.2 · Prefill blocking and chunked prefill · 预填充阻塞与分块预填充
#
# - Four chat users are watching their answers stream in. Then someone pastes a long document.
# - Without chunked prefill, every chat freezes while the document's prompt runs (§11.1).
# - SARATHI's fix: cut the prompt into chunks and let the running decodes ride along with each chunk
#   (§11.2).
# - We measure the freeze on the real model (SmolLM2-135M on this CPU), then replay the same scene at GPU
#   scale in the simulator, where the numbers are deterministic.

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
import torch

from minivllm.lab.cli.demo import build_engine, run_scene
from minivllm.model.loader import load_model

# One thread: a step's time then stays proportional to its work even on a busy machine (several OpenMP
# threads that share a loaded CPU wait on each other and make timings erratic).
torch.set_num_threads(1)
loaded = load_model("smollm2")  # loaded once, shared by every engine below
tok = loaded.tokenizer

LONG_TOKENS = 1536  # the pasted document (a RAG prompt), in tokens
ARRIVE_AFTER = 4  # it lands after the chats have run this many steps
CHAT_TOKENS = 20  # tokens each chat streams
BUDGET = 128  # token budget per step with chunked prefill (max_num_batched_tokens)
MAX_MODEL_LEN = 2048

# %% [markdown]
# ## 11.1 Prefill blocking, in one number · 预填充阻塞问题：用一个数字认识它
#
# ### 11.1.1 A typical complaint · 一个典型投诉
#
# - The book's complaint: "所有正在说话的助手同时停顿，然后又恢复" (every assistant that is talking
#   pauses at the same moment, then carries on). We stage it and measure the pause.
# - `run_scene` (from `minivllm.lab.cli.demo`): 4 chats start; after `ARRIVE_AFTER` steps a long prompt lands
#   (a document cut to `LONG_TOKENS - 16` tokens, then a short instruction; its length is printed below); greedy.
# - Run 1, **no chunking**: `enable_chunked_prefill=False` and a budget of `max_model_len` tokens, so a
#   prompt runs whole, in one step, with the chats' decodes in the same step. (This is V1 with chunking
#   off, not V0: V0's default scheduler ran a prompt in a step of its own, see §11.2.3.)
# - Run 2, **chunked prefill**: a budget of 128 tokens per step; the prompt is cut into chunks. (A small
#   budget because a CPU step is slow; §11.2.2 tries 64-1,024 at GPU scale.)
# - Same model weights, same requests; only the scheduler settings differ.

# %%
runs = {}
for label, chunked in (("no chunking", False), (f"chunked, budget {BUDGET}", True)):
    engine = build_engine(loaded, chunked, BUDGET, MAX_MODEL_LEN)
    result = run_scene(engine, tok, LONG_TOKENS, arrive_after=ARRIVE_AFTER, chat_tokens=CHAT_TOKENS)
    runs[label] = (result, engine.trace)
    del engine  # keep only the trace (the engine holds the KV cache tensor)
(off, trace_off), (on, trace_on) = runs.values()
for label, (r, trace) in runs.items():
    print(f"{label:20} {r['steps']} steps, long prompt {r['long_tokens']} tokens, "
          f"{sum(rec.num_output_tokens for rec in trace.requests.values())} output tokens")

# %% [markdown]
# - What the chat users feel (wall clock on this machine, so the numbers vary from run to run):

# %%
# NBVAL_IGNORE_OUTPUT
print(f"{'':20} {'chat gap p50':>12} {'chat gap p99':>12} {'chat gap max':>12} {'long TTFT':>10}")
for label, (r, _) in runs.items():
    print(f"{label:20} {r['itl_p50'] * 1e3:>9.0f} ms {r['itl_p99'] * 1e3:>9.0f} ms "
          f"{r['itl_max'] * 1e3:>9.0f} ms {r['ttft_long']:>8.2f} s")
print(f"\nwithout chunking every chat froze for {off['itl_max']:.1f} s; with chunking the worst gap was "
      f"{on['itl_max']:.2f} s ({off['itl_max'] / on['itl_max']:.1f}x shorter)")

# %%
print("worst chat gap without chunking is at least 3x the chunked one:", off["itl_max"] >= 3 * on["itl_max"])

# %% [markdown]
# - The complaint lives in the tail: without chunking, p99 and max are one step, the step that ran the
#   whole prompt.
# - With chunking the chats' gaps during the prefill are longer than a pure decode step (each step also
#   carries a chunk), but no single gap holds the whole prompt.

# %% [markdown]
# ### 11.1.2 Why prefill "owns" the GPU · 为什么预填充会”独占” GPU
#
# - The book: "GPU 的一次 step 只有一个 wall-clock 时间" (a step has one wall-clock time, shared by every
#   request in it).
# - An engine step is one forward pass over every scheduled token; each running chat gets its next token
#   only when the step ends.
# - Without chunking the whole long prompt and the 4 chats' decode tokens share one step, so the chats wait
#   for the whole prompt.
# - With chunking the decodes go first and the prompt fills what is left of the budget.

# %%
def step_rows(trace, first, last):
    """Steps first..last-1: tokens in the step, prefill chunks (P) by request, number of decodes."""
    for s in trace.steps[first:last]:
        parts = [f"{req_id} P{n}" for req_id, n in s.prefill_tokens.items()]
        parts += [f"{len(s.decode_tokens)} decodes"] if s.decode_tokens else []
        print(f"  step {s.step:>2}: {s.num_scheduled_tokens:>4} tokens  [{', '.join(parts)}]")


for label, (_, trace) in runs.items():
    print(label)
    step_rows(trace, ARRIVE_AFTER - 1, ARRIVE_AFTER + 3)
long_chunks = [s.prefill_tokens["long"] for s in trace_on.steps if "long" in s.prefill_tokens]
print(f"chunks of the long prompt with budget {BUDGET}: {long_chunks} ({len(long_chunks)} steps)")

# %% [markdown]
# - Step durations in the same window (wall clock): the step with the whole prompt is the freeze.

# %%
# NBVAL_IGNORE_OUTPUT
for label, (_, trace) in runs.items():
    window = trace.steps[ARRIVE_AFTER - 1 : ARRIVE_AFTER + 3]
    print(f"{label:20}", "  ".join(f"step {s.step}: {s.duration * 1e3:.0f} ms" for s in window))

# %% [markdown]
# ### 11.1.3 A latency spike · 一个延迟尖峰示意
#
# - One row per request, both runs on one time axis (ms): orange = prefill chunk, blue = decode step,
#   purple = a stall (glossary: a decode step longer than 5× the run's median step).
# - Left: the wide column in which all four chats stall together. Right: many narrow columns; the
#   chats keep streaming while the prompt is prefilled.

# %%
from minivllm.lab.viz.figures import gantt_compare

real_traces = {label: trace for label, (_, trace) in runs.items()}
fig = gantt_compare(real_traces, title="§11.1's scene on the real model (SmolLM2-135M, CPU)")
fig

# %%
# NBVAL_IGNORE_OUTPUT
from minivllm.lab.metrics.summary import STALL_FACTOR
from minivllm.lab.viz.figures.gantt import median_step

for label, trace in real_traces.items():
    med = median_step(trace)
    stalled = [s.step for s in trace.steps if s.decode_tokens and s.duration > STALL_FACTOR * med]
    widest = max(trace.steps, key=lambda s: s.duration)
    print(f"{label:20} median step {med * 1e3:.0f} ms; widest step {widest.step} ({widest.num_scheduled_tokens} "
          f"tokens, {widest.duration * 1e3:.0f} ms); decode steps drawn as stalls: {stalled}")

# %% [markdown]
# ### 11.1.4 The intuition of chunked prefill · 分块预填充的直觉
#
# - The book: cut the long prefill into pieces, "每一 step 只处理一段 prefill，再和 decode 混在一起" (each
#   step runs one piece of the prefill, mixed with the decodes). That is run 2.
# - The book's table, filled in with the two runs of §11.1.1 (wall clock on this machine, so the numbers
#   move from run to run; §11.2.2 and §11.2.4 give the deterministic GPU-scale version):

# %%
# NBVAL_IGNORE_OUTPUT
def book_table(off, trace_off, on, trace_on):
    rows = [("Decode 单步最大延迟 (worst chat gap)", f"{off['itl_max'] * 1e3:.0f} ms", f"{on['itl_max'] * 1e3:.0f} ms"),
            ("Decode p99 抖动 (chat gap p99)", f"{off['itl_p99'] * 1e3:.0f} ms", f"{on['itl_p99'] * 1e3:.0f} ms"),
            ("新请求 TTFT (long prompt)", f"{off['ttft_long']:.2f} s", f"{on['ttft_long']:.2f} s"),
            ("总吞吐 (output tok/s)", f"{summarize(trace_off).output_throughput:.1f}",
             f"{summarize(trace_on).output_throughput:.1f}")]  # fmt: skip
    print(f"{'指标 metric':40} {'不分块 no chunking':>20} {'分块 chunked':>14}")
    for name, a, b in rows:
        print(f"{name:40} {a:>20} {b:>14}")


from minivllm.lab.metrics.summary import summarize

book_table(off, trace_off, on, trace_on)
print("with chunking: worst gap lower", on["itl_max"] < off["itl_max"], "| p99 lower", on["itl_p99"] < off["itl_p99"],
      "| long TTFT higher", on["ttft_long"] > off["ttft_long"])

# %%
biggest = {label: max(s.num_scheduled_tokens for s in trace.steps) for label, (_, trace) in runs.items()}
print("largest step, in tokens:", biggest)
print(f"with chunking no step holds more than the budget of {BUDGET} tokens:",
      biggest[f"chunked, budget {BUDGET}"] <= BUDGET)

# %% [markdown]
# - The book's rows, checked on this run (wall clock): the worst gap is "被 chunk 上限限制" (bounded by the
#   chunk), the p99 is smoother, the new request's TTFT rises. By how much it rises is §11.2.4.
# - The book's conclusion: "目标不是让每个请求都更快，而是把长尾延迟平滑化" (the goal is not to make every
#   request faster but to flatten the tail).
#
# ### 11.1.5 The trade-off as users feel it · 心理学层面的权衡
#
# - The book's three points, each as a number from the same two runs: stable latency (the spread of the
#   chats' gaps), a spike (worst gap against the median one) and the crowd effect: the most chats that
#   stall (glossary: a gap over 5× the run's median ITL) at the same moment.

# %%
from collections import Counter

from minivllm.lab.metrics.summary import generation_stalls


def feel(trace):
    """Spread and spike of the chats' gaps; the crowd: the most chats whose stalls end at one moment."""
    chats = [trace.requests[f"chat{i}"] for i in range(4)]
    gaps = sorted(g for r in chats for g in r.itls)
    mean = sum(gaps) / len(gaps)
    spread = (sum((g - mean) ** 2 for g in gaps) / len(gaps)) ** 0.5 / mean
    threshold = generation_stalls(trace).threshold  # STALL_FACTOR x the run's median ITL
    ends = Counter(r.token_times[i + 1] for r in chats for i, gap in enumerate(r.itls) if gap > threshold)
    return spread, gaps[-1] / gaps[len(gaps) // 2], max(ends.values(), default=0), len(ends)


# %%
# NBVAL_IGNORE_OUTPUT
for label, (_, trace) in runs.items():
    spread, spike, crowd, moments = feel(trace)
    print(f"{label:20} gap spread (std/mean) {spread:.2f}; worst gap = {spike:.1f}x the median gap; "
          f"stalls at {moments} moment(s), at most {crowd} of the 4 chats at once")

# %%
crowd = {label: feel(trace)[2] for label, (_, trace) in runs.items()}
print("most chats stalled at one moment:", crowd)
print("the crowd effect is there without chunking and gone with it:",
      crowd["no chunking"] == 4 and crowd[f"chunked, budget {BUDGET}"] == 0)

# %% [markdown]
# - "稳定的延迟——用户会适应" (a steady latency, users adapt to): the chunked run's gaps are longer than a
#   pure decode step but even (the spread). "尖峰感知" (spikes are what people notice): the spike column.
#   "群体效应" (the crowd effect): a stall that hits every chat at one moment makes the whole service seem
#   to hiccup at once, the complaint of §11.1.1; the check above says in which run it happens.

# %% [markdown]
# ## 11.2 Background: SARATHI-Serve's key contribution · 学术背景：SARATHI-Serve 的关键贡献
#
# - The book lists the papers' four observations: online serving mixes prefill and decode; prefill-only
#   batches pause the decodes; a whole prefill inside the decode batch blows up TPOT; chunked prefill
#   mixed into the decode batch is the best compromise. §11.2.3 runs the last three side by side.
#
# - SARATHI (Agrawal et al., 2023) builds **decode-maximal batches**: one prefill chunk plus as many
#   decodes as fit (arXiv:2308.16369).
# - The chunk and the decodes share the linear layers' matrix multiplies: the weights read once for the
#   chunk also serve the decodes, so the decodes' linear work is nearly free. Attention is not shared.
# - Their measurement (LLaMA-13B on an A6000, 1,024-token sequences, §4.3.1 Table 2): decode time per token
#   **12.49 ms** in a batch of 4 decodes, **1.2 ms** for 3 decodes piggybacked on a 1,021-token chunk; up to
#   10x decode throughput overall.
# - vLLM V1 does this with no special code: decodes are served first, a chunk takes what is left of the
#   token budget (§11.3), and both run in the same forward pass.
# - The book: V1 "直接把 enable_chunked_prefill 设为 True" (turns chunked prefill on by default). So does
#   minivllm:

# %%
from minivllm.config import EngineConfig

default = EngineConfig.from_kwargs()
print("enable_chunked_prefill:", default.scheduler_config.enable_chunked_prefill,
      "| max_num_batched_tokens:", default.scheduler_config.max_num_batched_tokens)

# %% [markdown]
# ### 11.2.1 Piggybacking in one step · 一步之内的捎带
#
# - At GPU scale we price steps with the simulator's cost model, preset `llama2_7b_a100` (Llama-2-7B on an
#   A100; `minivllm.lab.sim.cost_model`). Deterministic, so these numbers are checked.
# - The step shapes are `(query tokens, tokens already in the KV cache)` per request.

# %%
from minivllm.lab.sim.cost_model import CostModel

a100 = CostModel.from_preset("llama2_7b_a100")
decodes = [(1, 40)] * 4  # 4 chats, 40 tokens of context each
chunk = [(BUDGET - 4, 0)]  # the first chunk of the long prompt
shapes = {"4 decodes alone": decodes, f"{BUDGET - 4}-token chunk alone": chunk,
          f"{BUDGET - 4}-token chunk + 4 decodes": chunk + decodes}
ms = {name: 1e3 * a100.step_time(shape) for name, shape in shapes.items()}
for name, shape in shapes.items():  # CostModel.terms: the simulator's price of a step, term by term
    split = " + ".join(f"{term} {sec * 1e3:.2f}" for term, sec in a100.terms(shape).items())
    print(f"{name:28} {ms[name]:6.2f} ms = {split} ms")
alone = ms["4 decodes alone"] / 4
riding = (ms[f"{BUDGET - 4}-token chunk + 4 decodes"] - ms[f"{BUDGET - 4}-token chunk alone"]) / 4
print(f"one decode token: {alone:.2f} ms in its own step, {riding:.3f} ms extra when it rides on the chunk "
      f"({alone / riding:.0f}x cheaper)")

# %% [markdown]
# - Why, from the terms: the linear layers read the 7B weights once per step, and on this GPU that read
#   costs the same for 1 token as for a few (a memory-bound step; the measured table
#   `CostModel.profiled_linear`). The chunk pays the read anyway, so the riding decodes add only their
#   share of host work, attention and KV reads:

# %%
base_terms, both_terms = a100.terms(chunk), a100.terms(chunk + decodes)
linear = {n: a100.profiled_linear(n) * 1e3 for n in (1, 4, BUDGET - 4, BUDGET)}
alone_terms = a100.terms(decodes)
print(f"4 decodes alone: the linear layers are {alone_terms['linear'] / sum(alone_terms.values()):.0%} of the step;"
      f" linear layers for 1 token {linear[1]:.2f} ms, for 4 tokens {linear[4]:.2f} ms")
print(f"linear layers for {BUDGET - 4} tokens {linear[BUDGET - 4]:.2f} ms, for {BUDGET} {linear[BUDGET]:.2f} ms")
print("the 4 decodes add to the chunk's step: " + ", ".join(
    f"{term} {(both_terms[term] - base_terms[term]) * 1e3:+.3f} ms" for term in base_terms))

# %% [markdown]
# ### 11.2.2 The same scene at GPU scale · GPU 规模下的同一场景
#
# - Same requests, same `run_scene`, but the engine's model runner is `SimRunner` (virtual clock priced by the
#   A100 preset). The Scheduler is the real one; only the forward pass is simulated.

# %%
from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.sim.sim_runner import SimRunner


def sim_engine(budget):
    """An engine on the simulator: chunked prefill with ``budget`` tokens per step, or off for None."""
    chunked = budget is not None
    config = EngineConfig.from_kwargs(max_num_seqs=16, max_model_len=MAX_MODEL_LEN, enable_chunked_prefill=chunked,
                                      max_num_batched_tokens=budget if chunked else MAX_MODEL_LEN)
    return LLMEngine(config, model_runner=SimRunner(a100, config=config))


sim = {}
for budget in (None, 64, 128, 256, 512, 1024):
    engine = sim_engine(budget)
    sim[budget] = (run_scene(engine, tok, LONG_TOKENS, arrive_after=ARRIVE_AFTER, chat_tokens=CHAT_TOKENS),
                   engine.trace)
print(f"{'budget':>12} {'steps':>6} {'chat gap p50':>13} {'chat gap max':>13} {'long TTFT':>10}")
for budget, (r, _) in sim.items():
    print(f"{budget or 'no chunking':>12} {r['steps']:>6} {r['itl_p50'] * 1e3:>10.2f} ms "
          f"{r['itl_max'] * 1e3:>10.2f} ms {r['ttft_long'] * 1e3:>7.1f} ms")

# %%
fig = gantt_compare({"no chunking": sim[None][1], f"chunked, budget {BUDGET}": sim[BUDGET][1]},
                    title="§11.1's scene at GPU scale (simulated Llama-2-7B on an A100)")
fig

# %%
r_off, r_on = sim[None][0], sim[BUDGET][0]
print(f"no chunking: the chats' worst gap is {r_off['itl_max'] * 1e3:.1f} ms = one step with the whole prompt")
print(f"budget {BUDGET}: worst gap {r_on['itl_max'] * 1e3:.1f} ms, "
      f"{r_off['itl_max'] / r_on['itl_max']:.1f}x shorter")

# %% [markdown]
# ### 11.2.3 Three ways to mix prefill and decode · 三种混合方式
#
# - The book's list (§11.2, SARATHI-Serve's observations): "把 prefill 独立批处理（prefill-only batch）会让
#   decode 流暂停"; "把 prefill 全量塞到 decode batch 里会让 decode TPOT 爆炸"; "把 prefill 切块后再混入
#   decode batch 是最佳折中".
# - Three schedulers on the same scene:
#   1. **prefill-only steps**: `minivllm.lab.baselines.PrefillFirstScheduler`, vLLM V0's default scheduler (and
#      what nano-vllm and mini-sglang do today). A waiting prompt runs first, whole, in a step of its own;
#      the chats decode only in steps with no prompt.
#   2. **whole prompt in the decode batch**: V1 with `enable_chunked_prefill=False` (run 1 of §11.1).
#   3. **chunked and mixed**: V1 with a budget of 128 tokens (run 2 of §11.1).
# - First at GPU scale (simulated, so checked), then on the real model.

# %%
from minivllm.lab.baselines import PrefillFirstScheduler


def sim_prefill_first():
    """The simulator with vLLM V0's default scheduler (whole prompts, prefill-only steps)."""
    config = EngineConfig.from_kwargs(max_num_seqs=16, max_model_len=MAX_MODEL_LEN, enable_chunked_prefill=False,
                                      max_num_batched_tokens=MAX_MODEL_LEN)
    return LLMEngine(config, model_runner=SimRunner(a100, config=config), scheduler_cls=PrefillFirstScheduler)


engine = sim_prefill_first()
v0 = (run_scene(engine, tok, LONG_TOKENS, arrive_after=ARRIVE_AFTER, chat_tokens=CHAT_TOKENS), engine.trace)
WAYS = ["prefill-only steps (V0)", "whole prompt mixed (V1, no chunking)", f"chunked + mixed (V1, budget {BUDGET})"]
three = dict(zip(WAYS, (v0, sim[None], sim[BUDGET])))


def mixed_steps(trace):
    """Steps that carry prompt tokens and decodes together."""
    return sum(bool(s.prefill_tokens and s.decode_tokens) for s in trace.steps)


print(f"{'':38} {'gap p50':>8} {'gap p99':>8} {'gap max':>8} {'long TTFT':>10} {'out tok/s':>9} {'mixed steps':>11}")
for way, (r, trace) in three.items():
    print(f"{way:38} {r['itl_p50'] * 1e3:>5.1f} ms {r['itl_p99'] * 1e3:>5.1f} ms {r['itl_max'] * 1e3:>5.1f} ms "
          f"{r['ttft_long'] * 1e3:>7.1f} ms {summarize(trace).output_throughput:>9.0f} {mixed_steps(trace):>11}")

# %%
fig = gantt_compare({way: trace for way, (_, trace) in three.items()},
                    title="§11.1's scene under the three schedulers (simulated Llama-2-7B on an A100)")
fig

# %% [markdown]
# - Prefill-only steps: the prompt's step carries no decode, so every chat misses it and waits for the
#   decode step after it too. Whole prompt mixed: the chats ride in the prompt's step, but it lasts as long
#   as the whole prompt: the book's "TPOT 爆炸". Chunked + mixed: no step is longer than the budget
#   allows; the long prompt's TTFT pays for it. Each claim, computed:

# %%
(r_v0, _), (r_whole, _), (r_chunk, _) = three.values()
decode_step = r_whole["itl_p50"]
print(f"prefill-only: worst gap {r_v0['itl_max'] * 1e3:.1f} ms = the mixed run's {r_whole['itl_max'] * 1e3:.1f} ms + "
      f"{(r_v0['itl_max'] - r_whole['itl_max']) * 1e3:.1f} ms (one decode step is {decode_step * 1e3:.1f} ms)")
print(f"whole prompt mixed: worst gap {r_whole['itl_max'] / decode_step:.0f}x a decode step")
print(f"chunked: worst gap {r_chunk['itl_max'] * 1e3:.1f} ms, "
      f"long TTFT {r_chunk['ttft_long'] / r_whole['ttft_long']:.2f}x")
tput = {way: summarize(trace).output_throughput for way, (_, trace) in three.items()}
print(f"output throughput: highest/lowest {max(tput.values()) / min(tput.values()):.3f}, "
      f"highest: {max(tput, key=tput.get)}")
print(f"lowest long TTFT: {min(three, key=lambda way: three[way][0]['ttft_long'])}")

# %% [markdown]
# - The three ways move the same work around, so output throughput barely differs (the chunked one shares
#   weight reads in its mixed steps).
# - The most-asked question about small engines, "why do decodes stall when a new prompt arrives?", is
#   row 1: a prefill-first scheduler stops every decode for the length of every new prompt.
# - The same three on the real model (wall clock; the two V1 runs are §11.1's):

# %%
engine = build_engine(loaded, False, BUDGET, MAX_MODEL_LEN, scheduler_cls=PrefillFirstScheduler)
real_v0 = (run_scene(engine, tok, LONG_TOKENS, arrive_after=ARRIVE_AFTER, chat_tokens=CHAT_TOKENS), engine.trace)
del engine
real_three = dict(zip(WAYS, (real_v0, *runs.values())))
for way, (r, trace) in real_three.items():
    print(f"{way:38} {r['steps']} steps, {mixed_steps(trace)} of them mixed")

# %%
# NBVAL_IGNORE_OUTPUT
print(f"{'':38} {'gap p50':>8} {'gap p99':>8} {'gap max':>8} {'long TTFT':>10} {'out tok/s':>9}")
for way, (r, trace) in real_three.items():
    print(f"{way:38} {r['itl_p50'] * 1e3:>5.0f} ms {r['itl_p99'] * 1e3:>5.0f} ms {r['itl_max'] * 1e3:>5.0f} ms "
          f"{r['ttft_long']:>8.2f} s {summarize(trace).output_throughput:>9.1f}")

# %% [markdown]
# ### 11.2.4 The price: TTFT against the budget · 代价：TTFT 与预算
#
# - Chunking is not free for the long request: its time to first token grows as the budget shrinks.
#   - every chunk pays the host work and the read of the weights (the linear layers' floor) again;
#   - every chunk re-reads the KV cache of the chunks before it (attention over the earlier chunks).
# - The budget trades the chats' worst gap (small budget is better) against the long prompt's TTFT
#   (large budget is better). §11.7 sweeps it.

# %%
base = sim[None][0]["ttft_long"]
rise = {budget: r["ttft_long"] / base for budget, (r, _) in sim.items() if budget}
for budget, (r, _) in sim.items():
    if budget:
        print(f"budget {budget:>4}: long TTFT {r['ttft_long'] * 1e3:6.1f} ms ({rise[budget]:.2f}x the "
              f"unchunked {base * 1e3:.1f} ms), chat worst gap {r['itl_max'] * 1e3:5.1f} ms")
print(f"budgets whose TTFT rise is under 10% ('slightly'): {[b for b, x in rise.items() if x < 1.1]}; "
      f"at budget {min(rise)} it is {rise[min(rise)]:.1f}x")

# %% [markdown]
# - §11.1.4's table says the new request's TTFT "可能因为分多步略增" (may rise slightly, because it takes
#   several steps). The line above says for which budgets "slightly" holds: those near the prompt's length,
#   not the small ones. The rise is the price, and the budget sets it.
# - The same comparison for the real CPU run of §11.1.1 (wall clock):

# %%
# NBVAL_IGNORE_OUTPUT
print(f"real model, long TTFT: {off['ttft_long']:.2f} s without chunking, {on['ttft_long']:.2f} s with budget "
      f"{BUDGET} ({on['ttft_long'] / off['ttft_long']:.2f}x)")

# %% [markdown]
# ## Summary
#
# - **Prefill blocking:** a step runs every scheduled token at once, so a long prompt in one step freezes
#   every decoding request for the whole prefill. It shows in the tail (p99, max gap), not the median.
# - **Chunked prefill:** a token budget per step cuts the prompt into chunks; decodes are served first,
#   the chunk takes the rest of the budget.
# - **Piggybacking (SARATHI):** decodes that ride on a chunk share its matrix multiplies and cost almost
#   nothing extra on a GPU.
# - **The price:** the long prompt's TTFT grows as the budget shrinks; the budget is the knob between the
#   chats' inter-token latency and the newcomer's TTFT.
# - Code: `minivllm.lab.cli.demo` (the scene), `minivllm.lab.viz.figures.gantt_compare`, `minivllm.lab.sim.sim_runner`
#   and `minivllm.lab.sim.cost_model`.

# %% [markdown]
# ## Exercises
#
# 1. `num_decoding` chats are decoding when a `prompt_len`-token prompt arrives (chunked prefill, token
#    budget `budget`). Write `prefill_steps(prompt_len, budget, num_decoding)`: in how many steps does the
#    prompt get tokens?
# 2. A service promises a worst inter-token gap of `slo_ms` for the chats. Write
#    `largest_budget_within(slo_ms, budgets)`: the largest budget in `budgets` whose worst chat gap in §11.1's
#    scene at GPU scale is at most `slo_ms` (None if none is). `gpu_scene(budget)` from
#    `minivllm.lab.exercises.ch11_1` runs the scene in the simulator and returns the finished engine.
#
# The check functions compare your answer with what the engine itself does. Solutions are in
# `11_1_prefill_blocking_solutions.ipynb`.

# %%
from minivllm.lab.exercises.ch11_1 import check_exercise_1, check_exercise_2, gpu_scene  # noqa: F401


def prefill_steps(prompt_len, budget, num_decoding):
    ...  # your code here


check_exercise_1(prefill_steps)


# %%
def largest_budget_within(slo_ms, budgets):
    ...  # your code here


check_exercise_2(largest_budget_within)
