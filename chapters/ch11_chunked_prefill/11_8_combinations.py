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
# # Chapter 11.8 · Chunked prefill with other optimisations · Chunked Prefill 与其他优化的组合
#
# - In vLLM V1 chunked prefill never runs alone: prefix caching, speculative decoding, preemption and the
#   scheduling policy are on in the same engine.
# - They all draw on the same two resources: the step's **token budget** (`max_num_batched_tokens`) and
#   the **KV block pool**.
# - Each combination below runs through the real `Scheduler`. The real model (SmolLM2-135M on this CPU)
#   serves the prefix-cache and speculative-decoding scenes. The simulator (virtual clock, Llama-2-7B on an
#   A100) serves the preemption, budget and priority scenes; the scheduler's decisions there are the real ones.

# %%
from minivllm import EngineConfig, LLMEngine, SamplingParams
from minivllm.lab.sim.cost_model import CostModel
from minivllm.lab.sim.sim_runner import SimRunner
from minivllm.model.loader import load_model
from minivllm.worker.model_runner import ModelRunner

loaded = load_model("smollm2")  # loaded once; every real engine below shares it
tokenizer = loaded.tokenizer


def real_engine(**settings):
    """An LLMEngine on the real model; settings use vLLM's names."""
    config = EngineConfig.from_kwargs(**settings)
    return LLMEngine(config, model_runner=ModelRunner(config, loaded))


def sim_engine(record_block_pool=False, **settings):
    """An LLMEngine on the simulator: the real Scheduler, a virtual clock priced as Llama-2-7B on an A100."""
    config = EngineConfig.from_kwargs(model="none", **settings)
    model_runner = SimRunner(CostModel.from_preset("llama2_7b_a100"), config=config)
    return LLMEngine(config, model_runner=model_runner, record_block_pool=record_block_pool)


def run_scene(engine, arrivals):
    """Step until idle. ``arrivals[k]``: add_request keyword dicts, added just before step k."""
    pending = {k: list(v) for k, v in arrivals.items()}
    while engine.has_unfinished_requests() or pending:
        for request in pending.pop(len(engine.trace.steps), []):
            engine.add_request(**request)
        engine.step()
    return engine.trace


def cell(s, r):
    """What request r did in step s: hit<n> (prefix-cache hit at admission), P<n> prompt tokens,
    D1 decode, S<k> draft tokens verified, -- preempted."""
    parts = [f"hit{s.prefix_cache_hit_tokens[r]}"] if s.prefix_cache_hit_tokens.get(r) else []
    for tag, tokens in (("P", s.prefill_tokens), ("D", s.decode_tokens), ("S", s.spec_tokens)):
        if tokens.get(r):
            parts.append(f"{tag}{tokens[r]}")
    return ",".join(["--"] * (r in s.preempted) + ["+".join(parts)] * bool(parts))


def step_table(trace, ids):
    """One row per step; consecutive identical rows are merged into one ("5-15")."""
    rows = []
    for s in trace.steps:
        row = [cell(s, r) for r in ids] + [f"{s.num_scheduled_tokens}/{s.token_budget}", str(s.num_waiting)]
        if rows and rows[-1][1:] == row:
            rows[-1][0] = f"{rows[-1][0].split('-')[0]}-{s.step}"
        else:
            rows.append([str(s.step), *row])
    head = ["step", *ids, "used/budget", "waiting"]
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    print("\n".join(" | ".join(x.rjust(w) for x, w in zip(line, widths)) for line in [head, *rows]))


# %% [markdown]
# ## 11.8 Chunked prefill with the other optimisations · Chunked Prefill 与其他优化的组合
#
# The book: 「Chunked Prefill 不是孤立的优化，它和 V1 的其他机制有密切的协同」 ("chunked prefill is not an
# isolated optimisation; it works closely with V1's other mechanisms"). Each sub-section puts one of them next
# to chunking, in the book's order, and 11.8.5 gathers the results in the book's synergy matrix.
#
# ### 11.8.1 + Prefix caching · + 前缀缓存
#
# - The book: the hit blocks get 「ref_cnt++，零计算」 ("ref_cnt++, zero compute"), and 「budget 消费也只扣"真算了"
#   的那部分」 ("the budget is charged only for what is really computed").
#
# - Three questions to a library assistant share one system prompt.
# - The budget is 64 tokens per step. q0 comes first; q1 and q2 arrive at step 4, while q0 decodes.
# - At admission `get_computed_blocks` finds the shared **full** blocks. Those tokens start out as
#   computed, so they cost **no budget**. Only the uncached tail is scheduled (and chunked if needed).

# %%
SYSTEM = (
    "You are the assistant of the Riverside city library. The library opens at nine in the morning and closes "
    "at eight in the evening, Monday to Saturday; on Sunday it is closed. Members may borrow up to ten books "
    "for three weeks, and may renew them twice online. Late returns cost twenty cents per book per day. The "
    "reading room on the second floor has forty desks and free wifi. Children under twelve must come with an "
    "adult. Answer in one short sentence."
)
QUESTIONS = ["When does the library open?", "How many books can I borrow?", "Is it open on Sunday?"]


def chat_prompt(question, system=None):
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": question}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer.encode(text, add_special_tokens=False)


prompts = {f"q{i}": chat_prompt(q, SYSTEM) for i, q in enumerate(QUESTIONS)}
shared = next(i for i, toks in enumerate(zip(*prompts.values())) if len(set(toks)) > 1)
print("prompt tokens:", {r: len(p) for r, p in prompts.items()}, "| shared prefix:", shared, "tokens")
print("full 16-token blocks in the shared prefix:", shared // 16, "=", shared // 16 * 16, "tokens")

# %%
params = SamplingParams(max_tokens=6, temperature=0.0)
arrivals = {0: [dict(request_id="q0", prompt=prompts["q0"], params=params)],
            4: [dict(request_id=r, prompt=prompts[r], params=params) for r in ("q1", "q2")]}  # fmt: skip
settings = dict(max_num_batched_tokens=64, max_num_seqs=4, max_model_len=512, num_gpu_blocks=64)
cached = real_engine(enable_prefix_caching=True, **settings)
step_table(run_scene(cached, arrivals), list(prompts))

# %% [markdown]
# - q0 pays for its whole prompt, in 64-token chunks (steps 0-1).
# - At step 4, q1 and q2 are admitted together with `hit` tokens already computed. Each is billed only
#   for its uncached tail, and both tails fit in one step next to q0's decode.
# - The same scene with prefix caching off:

# %%
uncached = real_engine(enable_prefix_caching=False, **settings)
step_table(run_scene(uncached, arrivals), list(prompts))

# %%
prompt_tokens_computed = {}
for name, engine in (("prefix caching on ", cached), ("prefix caching off", uncached)):
    steps = engine.trace.steps
    prompt_tokens = prompt_tokens_computed[name.strip()] = sum(sum(s.prefill_tokens.values()) for s in steps)
    first = {r: engine.trace.requests[r].first_token_time for r in ("q1", "q2")}
    first_step = {r: next(s.step for s in steps if s.end == t) for r, t in first.items()}
    print(f"{name}: {len(steps)} steps, {prompt_tokens} prompt tokens computed, first token of q1/q2 in step",
          first_step["q1"], "/", first_step["q2"])  # fmt: skip
same = all(cached.outputs[r].outputs[0].token_ids == uncached.outputs[r].outputs[0].token_ids for r in prompts)
print("same greedy tokens with and without the cache:", same)
for r in prompts:
    print(f"  {r}: {cached.outputs[r].outputs[0].text!r}")

# %% [markdown]
# - A hit is free twice over: no compute, and no budget. The budget it would have used goes to other
#   requests in the same step.
# - Only full blocks are shared, and never the last prompt token (its logits are needed to sample).
#   So the hit is rounded down to a multiple of the block size.

# %% [markdown]
# ### 11.8.2 + Speculative decoding (spec decode) · + 投机解码（Spec Decode）
#
# - The book: 「这些 token 挤占的 budget 也是实实在在的」 ("the budget these tokens take is real"), and
#   「Chunked Prefill 和 Spec Decode 因此共用同一个预算模型」 ("so chunked prefill and spec decode share one
#   budget model").
#
# - The n-gram (prompt-lookup) proposer needs no draft model. It finds the request's last `n` tokens earlier
#   in its own context (`n` from `prompt_lookup_max` down to `prompt_lookup_min`) and proposes the
#   `num_speculative_tokens` tokens that followed.
# - Drafts are tokens like any others: the scheduler chases `num_tokens_with_spec` = tokens + drafts. A step
#   that verifies 4 drafts costs that request 5 tokens of the budget, and the target model checks them in
#   the same forward pass as everything else.
# - A "copy the passage" prompt suits prompt lookup well: the answer repeats the prompt. A long report
#   arrives at step 3 and is chunked next to it (budget 48).

# %%
from minivllm.lab.benchmarks.spec_decode import PASSAGE

quote = chat_prompt(f"Here is a passage:\n{PASSAGE}\nCopy the passage exactly, word for word.")
REPORT = (
    "The city council met on Tuesday to discuss the new library. " + PASSAGE + " Several residents asked "
    "about parking, and the mayor promised an answer before the summer. The council will vote next month. "
) * 2
report = chat_prompt(f"Read this report. Did the council approve the plan? Answer in three words.\n{REPORT}")
print("prompt tokens: quote", len(quote), "| report", len(report))
spec_arrivals = {0: [dict(request_id="quote", prompt=quote, params=SamplingParams(max_tokens=48, temperature=0.0))],
                 3: [dict(request_id="report", prompt=report, params=SamplingParams(max_tokens=3, temperature=0.0))]}
spec_settings = dict(max_num_batched_tokens=48, max_num_seqs=4, max_model_len=1024, num_gpu_blocks=128)  # fmt: skip

# %%
plain = real_engine(num_speculative_tokens=0, **spec_settings)
step_table(run_scene(plain, spec_arrivals), ["quote", "report"])

# %%
spec = real_engine(num_speculative_tokens=4, prompt_lookup_max=4, prompt_lookup_min=2, **spec_settings)
step_table(run_scene(spec, spec_arrivals), ["quote", "report"])

# %% [markdown]
# - `D1+S4`: the quote's last sampled token plus 4 drafts, 5 tokens of the budget.
# - In a step where the quote carries drafts, the report's chunk is 4 tokens smaller: the drafts took
#   that part of the budget. The report's chunks in both runs:

# %%
report_chunks = {}
for name, engine in (("without drafts", plain), ("with drafts   ", spec)):
    chunks = {s.step: s.prefill_tokens["report"] for s in engine.trace.steps if "report" in s.prefill_tokens}
    report_chunks[name.strip()] = chunks
    print(f"report's prefill chunks {name}: {chunks}")

# %% [markdown]
# - Per step, how many drafts the quote had verified and accepted, and how many tokens it got:

# %%
rec = spec.trace.requests["quote"]
print(f"{'step':>4} {'drafted':>8} {'accepted':>9} {'new tokens':>11}")
for s in spec.trace.steps:
    if "quote" in s.decode_tokens:
        drafted, accepted = s.spec_tokens.get("quote", 0), s.spec_accepted.get("quote", 0)
        print(f"{s.step:>4} {drafted:>8} {accepted:>9} {rec.token_times.count(s.end):>11}")
drafted = sum(s.spec_tokens.get("quote", 0) for s in spec.trace.steps)
accepted = sum(s.spec_accepted.get("quote", 0) for s in spec.trace.steps)
print(f"quote: {drafted} drafted, {accepted} accepted ({accepted / drafted:.0%}), {rec.num_output_tokens} tokens")
print("steps: without drafts", len(plain.trace.steps), "| with drafts", len(spec.trace.steps))
same = all(spec.outputs[r].outputs[0].token_ids == plain.outputs[r].outputs[0].token_ids for r in spec.outputs)
print("greedy output identical:", same)
print(repr(spec.outputs["quote"].outputs[0].text))
print(repr(spec.outputs["report"].outputs[0].text))

# %% [markdown]
# - Greedy verification keeps the output **identical**; only the number of steps changes.
# - The chunk schedule below shows the drafts (purple) sitting on the decode token (blue), under the same
#   dashed budget line as the report's prefill chunks (orange).

# %%
from minivllm.lab.viz.figures import chunk_schedule

chunk_schedule(spec.trace, title="Drafts share the budget with a prefill chunk (budget 48)", height=360)

# %% [markdown]
# ### 11.8.3 + Preemption · + 抢占
#
# - The book asks: 「Chunked Prefill 正在"分片 prefill 中"的请求，会不会被抢占？」 ("can a request that is in the
#   middle of its chunked prefill be preempted?"). Yes: it sits in RUNNING like any other, and when
#   `allocate_slots` fails the scheduler takes the last running request, frees its KV, sets it PREEMPTED and
#   `num_computed_tokens = 0`, and puts it back at the head of `waiting`. 「如果是 WAITING 新请求分配失败，则本轮直接
#   停止继续拉新请求」 ("if a WAITING request's allocation fails, the step stops admitting").
# - Chunking admits a long prompt with the blocks of its **first chunk** only. Its later chunks and the
#   decodes keep asking for blocks, so the pool can run dry in the middle of its prefill.
# - The FCFS victim is the last running request: usually the newest one, here the long prompt mid-prefill.
# - Preemption forgets: `num_computed_tokens = 0`. The blocks go back to the pool tail-first, with their
#   hashes. On resumption the prefix cache returns the full blocks that nobody reused in the meantime.
# - Scene (simulator): a 12-block pool (11 usable, 176 tokens), two chats decoding, and a 120-token prompt
#   at step 2. Budget 32.

# %%
def preemption_scene(chat_tokens=16, chunked=True, record_block_pool=False):
    engine = sim_engine(record_block_pool, block_size=16, num_gpu_blocks=12, max_num_seqs=4, max_model_len=160,
                        max_num_batched_tokens=32 if chunked else 160, enable_chunked_prefill=chunked)  # fmt: skip
    chat = SamplingParams(max_tokens=chat_tokens, ignore_eos=True)
    arrivals = {0: [dict(request_id="chat0", prompt=list(range(100, 124)), params=chat),
                    dict(request_id="chat1", prompt=list(range(200, 230)), params=chat)],
                2: [dict(request_id="long", prompt=list(range(1000, 1120)),
                         params=SamplingParams(max_tokens=4, ignore_eos=True))]}  # fmt: skip
    run_scene(engine, arrivals)
    return engine.trace


trace = preemption_scene(record_block_pool=True)
step_table(trace, ["chat0", "chat1", "long"])

# %%
from minivllm.lab.viz.figures.timeline import recovery_events

for ev in recovery_events(trace):
    print(f"{ev.request_id}: preempted at step {ev.preempt_step} with {ev.computed_before} tokens computed;"
          f" resumed at step {ev.resume_step}: {ev.cached} back from the prefix cache, {ev.recomputed} recomputed")

# %% [markdown]
# - At step 5 a chat needs a new block and none is free. The victim is `long`, 90 tokens into its prompt.
#   (In a step with a preemption the waiting loop is skipped: nobody is admitted.)
# - At step 16 chat0 has finished, and `long` comes back. The hit covers its 5 full blocks (80 tokens); only
#   10 tokens are computed again.
# - Step through it: the top chart is the chunk schedule, the bottom right is the KV block map after the step.

# %%
# NBVAL_IGNORE_OUTPUT
from minivllm.lab.viz.widgets import StepPlayer

player = StepPlayer(trace)
player.ui  # noqa: B018 (the cell's value is what Jupyter displays)

# %%
for k in (4, 5, 16):
    player.slider.value = k
    print(player.summary(), "| blocks:", player.state()["blocks"])

# %% [markdown]
# **Try this:** press Play and watch `long`'s blocks at steps 4 → 5 → 16. They turn from "in use" to
# "cached, free" when it is preempted, and back to "in use" when the prefix cache finds them again.
#
# - How much comes back depends on how long the victim waits. The chats allocate new blocks from the
#   free queue, oldest first, and `long`'s blocks sit there tail-first. The longer the chats run, the
#   more of its blocks they reuse.

# %%
print(f"{'chat output tokens':>18} {'preempted at':>12} {'resumed at':>10} {'computed':>8} {'from cache':>10} "
      f"{'recomputed':>10}")  # fmt: skip
for n in (12, 16, 24, 32, 40):
    for ev in recovery_events(preemption_scene(chat_tokens=n)):
        print(f"{n:>18} {ev.preempt_step:>12} {ev.resume_step:>10} {ev.computed_before:>8} {ev.cached:>10} "
              f"{ev.recomputed:>10}")  # fmt: skip

# %%
from minivllm.lab.viz.figures import recovery_timeline

recovery_timeline(trace, title="long: 90 tokens dropped at step 5, 80 back from the cache at step 16")

# %% [markdown]
# - With chunking off there is no mid-prefill victim. The prompt needs blocks for all 120 tokens before it
#   is admitted, so it waits in the queue instead:

# %%
step_table(preemption_scene(chunked=False), ["chat0", "chat1", "long"])

# %% [markdown]
# - Same pool, no preemption: `long` waits whole until step 16 and runs its prompt in one step.
#   Chunking trades that wait for an earlier start that may be undone. The prefix cache limits the loss.

# %% [markdown]
# #### 11.8.3.1 Admit, then preempt: the thrash, and later vLLM's guard · 先接纳后抢占的抖动
#
# - vLLM 0.8.5 (and minivllm by default) admits a waiting request as soon as the blocks of its **first chunk**
#   fit. Under KV pressure that can go round in circles: the request is admitted, its next chunks fill the
#   pool, a running request needs a block, the newcomer is preempted and forgets its prompt, and next step it
#   is admitted again.
# - Later vLLM added `scheduler_reserve_full_isl` (PR #37307; True by default there): a waiting request is
#   admitted only if the free blocks can hold its **whole** current sequence (prompt + outputs so far, less
#   prefix-cache hits). The PR reports four 100k-token requests holding ~90% of the KV cache, a fifth admitted
#   and preempted at ~50k tokens over and over, and generation falling from ~100 to ~1.5 tok/s per GPU; its test
#   ran with `--no-enable-prefix-caching`.
# - minivllm has the same switch, `SchedulerConfig.scheduler_reserve_full_isl` (CLI
#   `--scheduler-reserve-full-isl`), off by default so that the scheduler keeps making 0.8.5's decisions. Only
#   the blocks check changes; the tokens scheduled are still one chunk.
# - Scene (simulator, the real scheduler): six 800-token prompts arrive together, each generates 64 tokens.
#   The pool has 200 usable blocks (3,200 tokens); the budget is 512. Prefix caching off, as in the PR.

# %%
from collections import Counter
from types import SimpleNamespace

from minivllm.lab.metrics.summary import summarize

THRASH_IDS = [f"r{i}" for i in range(6)]


def thrash_scene(reserve, caching=False):
    engine = sim_engine(block_size=16, num_gpu_blocks=201, max_num_seqs=8, max_model_len=3200,
                        max_num_batched_tokens=512, enable_prefix_caching=caching,
                        scheduler_reserve_full_isl=reserve)  # fmt: skip
    params = SamplingParams(max_tokens=64, ignore_eos=True)
    prompts = {r: list(range(1000 * i, 1000 * i + 800)) for i, r in enumerate(THRASH_IDS)}
    return run_scene(engine, {0: [dict(request_id=r, prompt=p, params=params) for r, p in prompts.items()]})


thrash = {"reserve off (0.8.5)": thrash_scene(False), "reserve on (later vLLM)": thrash_scene(True)}
for name, trace in thrash.items():
    print(name, "- the first 10 steps:")
    step_table(SimpleNamespace(steps=trace.steps[:10]), THRASH_IDS)
    preempted = Counter(r for s in trace.steps for r in s.preempted)
    r3_chunks = sum("r3" in s.prefill_tokens for s in trace.steps)
    print(f"whole run: preempted {dict(preempted)}; r3 got a prefill chunk in {r3_chunks} steps\n")

# %% [markdown]
# - Off: at step 4, 48 blocks are free. r3's prompt needs 50, but its first chunk (156 tokens, 10 blocks) fits,
#   so it is admitted. At step 5 it gets 509 more tokens (42 blocks, 5 left free). At step 6 its last 135 tokens
#   need 8 more blocks; there are none, and r3, the last running request, is the victim: it frees its 42 blocks
#   and forgets its prompt. At step 7 it is admitted again with a 509-token chunk, at step 8 it is preempted
#   again, and so on until r0 finishes (step 64): every second step computes 509 tokens that are thrown away.
# - On: at step 4 r3's whole prompt (50 blocks) does not fit the 48 free blocks, so it is not admitted and
#   admission stops there. r3 waits until r0 finishes, while 47 blocks stay free.
# - The whole run, with prefix caching off (as in the PR) and on (V1's default):

# %%
def recomputed_tokens(trace):
    """Prefill tokens computed beyond what each prompt needed once (its first-admission hits excepted)."""
    computed = sum(sum(s.prefill_tokens.values()) for s in trace.steps)
    return computed - sum(r.num_prompt_tokens - r.num_cached_tokens for r in trace.requests.values())


def thrash_row(trace):
    m = summarize(trace)
    return dict(preemptions=m.num_preemptions, recomputed=recomputed_tokens(trace), steps=m.num_steps,
                tok_s=m.output_throughput, ttft_mean=m.ttft.mean * 1e3, ttft_max=m.ttft.max * 1e3,
                itl_mean=m.itl.mean * 1e3)  # fmt: skip


thrash_runs = {("off", "off"): thrash["reserve off (0.8.5)"], ("off", "on"): thrash["reserve on (later vLLM)"]}
thrash_runs.update({("on", reserve): thrash_scene(reserve == "on", caching=True) for reserve in ("off", "on")})
thrash_rows = {key: thrash_row(trace) for key, trace in thrash_runs.items()}
print(f"{'prefix cache':>12} {'reserve':>7} {'preemptions':>11} {'recomputed':>10} {'steps':>5} {'output tok/s':>12} "
      f"{'TTFT mean ms':>12} {'TTFT max ms':>11} {'ITL mean ms':>11}")  # fmt: skip
for (cache, reserve), m in thrash_rows.items():
    print(f"{cache:>12} {reserve:>7} {m['preemptions']:>11} {m['recomputed']:>10} {m['steps']:>5} {m['tok_s']:>12.1f} "
          f"{m['ttft_mean']:>12.1f} {m['ttft_max']:>11.1f} {m['itl_mean']:>11.2f}")  # fmt: skip

# %%
off, on = thrash_rows[("off", "off")], thrash_rows[("off", "on")]
assert on["preemptions"] < off["preemptions"] and on["recomputed"] < off["recomputed"]
print(f"prefix cache off: reserving cuts preemptions {off['preemptions']} -> {on['preemptions']} and recomputed "
      f"tokens {off['recomputed']:,} -> {on['recomputed']:,}; output throughput x{on['tok_s'] / off['tok_s']:.2f}, "
      f"mean TTFT x{on['ttft_mean'] / off['ttft_mean']:.2f}, in {on['steps']} steps instead of "
      f"{off['steps']}")  # fmt: skip
c_off, c_on = thrash_rows[("on", "off")], thrash_rows[("on", "on")]
print(f"prefix cache on:  {c_off['preemptions']} preemptions and {c_off['recomputed']} recomputed tokens without "
      f"reserving, {c_on['preemptions']} and {c_on['recomputed']} with it: the cache gives back the preempted "
      "chunks")  # fmt: skip

# %%
from minivllm.lab.viz.figures import gantt_compare

gantt_compare(
    {"reserve off (0.8.5)": thrash_runs[("off", "off")], "reserve on (later vLLM)": thrash_runs[("off", "on")]},
    title=f"Six 800-token prompts, 200 blocks, no prefix cache: {off['preemptions']} preemptions (left), "
    f"{on['preemptions']} (right); mean ITL {off['itl_mean']:.1f} vs {on['itl_mean']:.1f} ms",
)

# %% [markdown]
# **Verdict.** With prefix caching off, the 0.8.5 rule thrashes here: one request is admitted and preempted
# again and again, and its thrown-away chunks make every other step long, so the decodes of r0-r2 slow down
# (the ITL column), and output throughput and TTFT get worse. Reserving the whole prompt removes all of it for
# one step more in all. With prefix caching on
# (V1's default) the same thrash costs little in this scene, because the preempted chunk's blocks are still
# in the cache when r3 comes back; the guard matters most where the cache cannot help (caching off, or blocks
# evicted before the request returns). The price of the guard is idle blocks: r3 waits while 47 blocks are
# free.
#
# - A corner later vLLM never meets: with the guard on, a sequence longer than the whole pool could never be
#   admitted and would wait forever. vLLM refuses such a `max_model_len` at start-up; minivllm's `LLMEngine`
#   does too, and the bare `Scheduler` refuses it when the guard is on:

# %%
from minivllm.config import CacheConfig, SchedulerConfig
from minivllm.core.scheduler import Scheduler

try:
    Scheduler(SchedulerConfig(max_num_batched_tokens=64, max_num_seqs=4, max_model_len=200,
                              scheduler_reserve_full_isl=True),
              CacheConfig(block_size=16, num_gpu_blocks=12))  # fmt: skip
except ValueError as err:
    print("ValueError:", err)

# %% [markdown]
# ### 11.8.4 + The token budget's distribution under chunked prefill · + Chunked Prefill 的 token budget 分布
#
# - The book's order: 「先续 RUNNING」 (RUNNING first, from the head of `self.running`, while `token_budget > 0`),
#   「再拉 WAITING」 (then WAITING, from the head of the queue, only if nobody was preempted this step), and
#   「每个请求都受同一套截断：先看剩余 token，再看 long_prefill_token_threshold，再看 token_budget」 ("every request
#   goes through the same cuts: its remaining tokens, then `long_prefill_token_threshold`, then what is left of
#   the budget").
# - Scene (the real scheduler, fake runner): budget 64, `long_prefill_token_threshold=32`. `chat` decodes and
#   `doc` (160 tokens) is mid-prefill; `new0` (40 tokens) and `new1` (30 tokens) arrive at step 2. The table
#   walks the book's rule by hand from the scheduler's state, and the last column is what `schedule()` decided.

# %%
from minivllm.lab.testbench import make_request, make_scheduler
from minivllm.worker.fake_runner import FakeModelRunner


def budget_walk(s):
    """The book's order, by hand: RUNNING then WAITING; each request: remaining -> threshold -> budget."""
    budget, threshold, rows = s.max_num_scheduled_tokens, s.long_prefill_token_threshold, []
    for queue, reqs in (("RUNNING", list(s.running)), ("WAITING", list(s.waiting))):
        for r in reqs:
            if budget == 0:
                rows.append((r.request_id, queue, r.num_tokens - r.num_computed_tokens, "-", 0, 0))
                continue
            left = r.num_tokens - r.num_computed_tokens
            capped = min(left, threshold) if threshold else left
            n = min(capped, budget)
            budget -= n
            rows.append((r.request_id, queue, left, capped, n, budget))
    return rows


sched = make_scheduler(max_num_batched_tokens=64, long_prefill_token_threshold=32, max_num_seqs=8)
fake = FakeModelRunner()
sched.add_request(make_request("chat", 8, max_tokens=20))
sched.add_request(make_request("doc", 160, max_tokens=4))
for k in range(4):
    if k == 2:
        sched.add_request(make_request("new0", list(range(500, 540)), max_tokens=4))
        sched.add_request(make_request("new1", list(range(600, 630)), max_tokens=4))
    rows = budget_walk(sched)
    out = sched.schedule()
    sched.update_from_output(out, fake.execute_model(out))
    if k >= 2:
        lines = [f"step {k}: {'request':>7} {'queue':>7} {'left':>4} {'after threshold':>15} {'after budget':>12} "
                 f"{'budget left':>11} {'schedule()':>10}"]  # fmt: skip
        for req_id, queue, left, capped, n, rest in rows:
            lines.append(f"{'':7} {req_id:>7} {queue:>7} {left:>4} {capped:>15} {n:>12} {rest:>11} "
                         f"{out.num_scheduled_tokens.get(req_id, 0):>10}")  # fmt: skip
        order = [r[0] for r in rows if r[4]]
        same = order == list(out.num_scheduled_tokens)
        same = same and all(out.num_scheduled_tokens.get(r[0], 0) == r[4] for r in rows)
        lines.append(f"{'':7} the hand walk gives the scheduler's tokens, in its order: {same}")
        print("\n".join(lines), end="\n\n")

# %% [markdown]
# - Step 2: `chat` gets its decode token first and `doc` its capped 32. `new0` is admitted with the 31 tokens
#   that are left (the threshold would have allowed 32), and `new1` is not reached: the budget is spent.
# - Step 3: `new0` is RUNNING now and is served before `new1`, which gets the remaining 22 tokens.
# - So decodes and requests already running keep flowing, and a new request only gets what they leave.
# - The "only if nobody was preempted" rule shows in 11.8.3: step 5 of the first scene preempts `long` and
#   admits nobody.
#
# #### 11.8.4.1 fcfs and priority · fcfs 与 priority 两种语义
#
# - The book: 「SchedulerConfig.policy 支持 fcfs 和 priority 两种语义…priority 用更小的 priority 值优先，同 priority
#   再按到达时间排序」 ("policy supports fcfs and priority; under priority a smaller value goes first, equal
#   priorities by arrival time").
# - `policy="priority"` (vLLM 0.9+): `waiting` is ordered by `(priority, arrival_time)`, lower first.
# - The preemption victim is the running request with the **largest** `(priority, arrival_time)`, not
#   the last one admitted.
# - Scene: a low-priority request (priority 1, a 100-token prompt) arrives first. A high-priority chat
#   (priority 0) arrives at step 2. Both decode until the 11-block pool runs dry.

# %%
def priority_scene(policy):
    engine = sim_engine(block_size=16, num_gpu_blocks=12, max_num_seqs=4, max_model_len=176,
                        max_num_batched_tokens=32, policy=policy)  # fmt: skip
    arrivals = {0: [dict(request_id="low", prompt=list(range(1000, 1100)), priority=1,
                         params=SamplingParams(max_tokens=40, ignore_eos=True))],
                2: [dict(request_id="high", prompt=list(range(100, 140)), priority=0,
                         params=SamplingParams(max_tokens=24, ignore_eos=True))]}  # fmt: skip
    return run_scene(engine, arrivals)


runs = {policy: priority_scene(policy) for policy in ("fcfs", "priority")}
for policy, trace in runs.items():
    print(f"policy={policy!r}")
    step_table(trace, ["low", "high"])
    for r in ("low", "high"):
        rec = trace.requests[r]
        done_ms = (rec.finish_time - rec.arrival_time) * 1e3
        print(f"  {r:>4}: preempted {rec.num_preemptions}x, finished {done_ms:.1f} ms after arrival")
    print()

# %% [markdown]
# - FCFS: at step 16 `low` needs a block. The victim is the **last** running request, `high`. The
#   important chat waits until `low` is done.
# - Priority: the victim is `low`. `high` finishes in about half the time, and `low` comes back with 112
#   tokens from the prefix cache (only its last sampled token is fed again).
# - Step 16 under priority is empty. `low` was being scheduled, it was itself the victim, and the running
#   loop stops there (as in vLLM 0.9.2; newer vLLM goes on to the next request).

# %%
gantt_compare(runs, title="Who is preempted: FCFS (left) vs priority (right)")

# %% [markdown]
# ### 11.8.5 The synergy matrix · 协同矩阵
#
# - The book's table, row by row (组合 combination, 相互关系 how they interact, 生产建议 production advice), with
#   the cell of this notebook that shows the row and what its data says. minivllm runs on one device and has no
#   LoRA, so the last two rows are not in minivllm.

# %%
recovered = recovery_events(preemption_scene())[0]
q_on, q_off = prompt_tokens_computed["prefix caching on"], prompt_tokens_computed["prefix caching off"]
MATRIX = [
    ("Chunked + 前缀缓存", "减少实际计算的新 token", "RAG 场景优先验证", "11.8.1",
     f"prompt tokens computed {q_on} with the cache, {q_off} without; the hits cost no budget"),
    ("Chunked + Spec Decode", "共享 token budget", "看 draft 接受率和 TPOT", "11.8.2",
     f"{accepted}/{drafted} drafts accepted ({accepted / drafted:.0%}); {len(spec.trace.steps)} steps instead of "
     f"{len(plain.trace.steps)}; the report's chunks shrink by the drafts"),
    ("Chunked + 抢占", "抢占后清零，再靠 cache 恢复", "关注 preemption 指标", "11.8.3, 11.8.3.1",
     f"long: {recovered.computed_before} tokens dropped, {recovered.cached} back from the cache, "
     f"{recovered.recomputed} recomputed; thrash without the cache: {off['preemptions']} preemptions, "
     f"{on['preemptions']} with scheduler_reserve_full_isl"),
    ("Chunked + TP", "每个 step 仍要跨 rank 同步", "关注通信尾延迟", "-",
     "not in minivllm (one device, no tensor parallelism)"),
    ("Chunked + Multi-LoRA", "LoRA 影响缓存复用边界", "结合第 16 章的 KV/LoRA 约束", "-", "not in minivllm (no LoRA)"),
]  # fmt: skip
for combo, relation, advice, where, shown in MATRIX:
    print(f"{combo} | {relation} | {advice}\n    minivllm: {where}: {shown}")

# %% [markdown]
# ## Summary
#
# - **Prefix hits are free**: cached tokens start as computed, cost no budget and no compute. Only full
#   blocks are shared, and never the last prompt token.
# - **Drafts are tokens**: speculative decoding spends budget (1 + k per step) that prefill chunks would
#   otherwise get. Greedy output stays identical, and the decode needs fewer steps.
# - **Preemption can hit mid-prefill**. Chunking admits a prompt with few blocks, so it may be evicted
#   later. The prefix cache returns whatever full blocks survived, and the rest is recomputed.
# - **Admit-then-preempt can thrash** under KV pressure (0.8.5's first-chunk rule). Later vLLM's
#   `scheduler_reserve_full_isl` admits a request only when its whole sequence fits: in 11.8.3.1 it removes
#   every preemption of the scene; with the prefix cache on, the cache had already absorbed most of the loss.
# - **The budget goes to RUNNING first**, then to WAITING (only without a preemption), each request cut by its
#   remaining tokens, `long_prefill_token_threshold` and what is left of the budget.
# - **Priority changes the victim**: the largest `(priority, arrival_time)` is preempted, not the newest.
#   Modules: `core/scheduler.py` (`_num_new_tokens`, `_preempt`, the waiting loop), `core/kv_cache_manager.py`
#   (`get_computed_blocks`, `allocate_slots(full_sequence_must_fit=...)`), `spec_decode/ngram_proposer.py`.

# %% [markdown]
# ## Exercises
#
# 1. `tokens_billed(prompt_len, shared_len, block_size)`: a first request (the shared prefix plus one
#    token) has finished. A second request of `prompt_len` tokens starts with the same `shared_len`
#    tokens. How many tokens of the budget does its admission cost (budget large enough)?
# 2. `chunk_beside_drafts(budget, num_decodes, num_drafts)`: `num_decodes` requests decode, each with
#    `num_drafts` drafts; a long prompt arrives. How many of its prompt tokens are scheduled in that step?
# 3. `priority_victim(running)`: `running` is a list of `(request_id, priority, arrival_time)`, all running
#    under `policy="priority"`. The pool is full and the first in line needs a block: who is preempted?
#
# The check functions compare your answer with what the engine does. Solutions are in
# `11_8_combinations_solutions.ipynb`.

# %%
from minivllm.lab.exercises.ch11_8 import check_exercise_1, check_exercise_2, check_exercise_3


def tokens_billed(prompt_len, shared_len, block_size):
    ...  # your code here


check_exercise_1(tokens_billed)


# %%
def chunk_beside_drafts(budget, num_decodes, num_drafts):
    ...  # your code here


check_exercise_2(chunk_beside_drafts)


# %%
def priority_victim(running):
    ...  # your code here


check_exercise_3(priority_victim)
