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
# # Chapter 11.8 · Combinations with other features · 组合使用
#
# - In vLLM V1 chunked prefill never runs alone: prefix caching, speculative decoding, preemption and the
#   priority policy are on in the same engine.
# - They all draw on the same two resources: the step's **token budget** (`max_num_batched_tokens`) and
#   the **KV block pool**.
# - Each combination below runs through the real `Scheduler`. The real model (SmolLM2-135M on this CPU)
#   serves the prefix-cache and speculative-decoding scenes. The simulator (virtual clock, Llama-2-7B on an
#   A100) serves the preemption and priority scenes.

# %%
from minivllm import EngineConfig, LLMEngine, SamplingParams
from minivllm.model.loader import load_model
from minivllm.sim.cost_model import CostModel
from minivllm.sim.sim_runner import SimRunner
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
# ## 11.8 Combinations · 组合使用
#
# ### 11.8.1 Prefix caching + chunked prefill · 前缀缓存与分块预填充
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
for name, engine in (("prefix caching on ", cached), ("prefix caching off", uncached)):
    steps = engine.trace.steps
    prompt_tokens = sum(sum(s.prefill_tokens.values()) for s in steps)
    first = {r: engine.trace.requests[r].first_token_time for r in ("q1", "q2")}
    first_step = {r: next(s.step for s in steps if s.end == t) for r, t in first.items()}
    print(f"{name}: {len(steps)} steps, {prompt_tokens} prompt tokens computed, first token of q1/q2 in step",
          first_step["q1"], "/", first_step["q2"])  # fmt: skip
same = all(cached.outputs[r].token_ids == uncached.outputs[r].token_ids for r in prompts)
print("same greedy tokens with and without the cache:", same)
for r in prompts:
    print(f"  {r}: {cached.outputs[r].text!r}")

# %% [markdown]
# - A hit is free twice over: no compute, and no budget. The budget it would have used goes to other
#   requests in the same step.
# - Only full blocks are shared, and never the last prompt token (its logits are needed to sample).
#   So the hit is rounded down to a multiple of the block size.

# %% [markdown]
# ### 11.8.2 Speculative decoding in the token budget · 推测解码占用令牌预算
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
from minivllm.benchmarks.spec_decode import PASSAGE

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
for name, engine in (("without drafts", plain), ("with drafts   ", spec)):
    chunks = {s.step: s.prefill_tokens["report"] for s in engine.trace.steps if "report" in s.prefill_tokens}
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
print("greedy output identical:", all(spec.outputs[r].token_ids == plain.outputs[r].token_ids for r in spec.outputs))
print(repr(spec.outputs["quote"].text))
print(repr(spec.outputs["report"].text))

# %% [markdown]
# - Greedy verification keeps the output **identical**; only the number of steps changes.
# - The chunk schedule below shows the drafts (purple) sitting on the decode token (blue), under the same
#   dashed budget line as the report's prefill chunks (orange).

# %%
from minivllm.viz.figures import chunk_schedule

chunk_schedule(spec.trace, title="Drafts share the budget with a prefill chunk (budget 48)", height=360)

# %% [markdown]
# ### 11.8.3 Preemption under chunking · 分块下的抢占
#
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
from minivllm.viz.figures.timeline import recovery_events

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
from minivllm.viz.widgets import StepPlayer

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
from minivllm.viz.figures import recovery_timeline

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
# ### 11.8.4 The priority policy · 优先级调度
#
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
from minivllm.viz.figures import gantt_compare

gantt_compare(runs, title="Who is preempted: FCFS (left) vs priority (right)")

# %% [markdown]
# ## Summary
#
# - **Prefix hits are free**: cached tokens start as computed, cost no budget and no compute. Only full
#   blocks are shared, and never the last prompt token.
# - **Drafts are tokens**: speculative decoding spends budget (1 + k per step) that prefill chunks would
#   otherwise get. Greedy output stays identical, and the decode needs fewer steps.
# - **Preemption can hit mid-prefill**. Chunking admits a prompt with few blocks, so it may be evicted
#   later. The prefix cache returns whatever full blocks survived, and the rest is recomputed.
# - **Priority changes the victim**: the largest `(priority, arrival_time)` is preempted, not the newest.
#   Modules: `core/scheduler.py` (`_num_new_tokens`, `_preempt`), `core/kv_cache_manager.py`
#   (`get_computed_blocks`), `spec_decode/ngram_proposer.py`.

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
from minivllm.exercises.ch11_8 import check_exercise_1, check_exercise_2, check_exercise_3


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
