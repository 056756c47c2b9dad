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
# # Chapter 11.5 · Preemption and recovery · 抢占与恢复
#
# - Chunked prefill admits a request with the blocks of its **first chunk** only. Later chunks and every
#   decode keep asking for blocks, so the KV pool can run dry while everybody is running.
# - vLLM V1 then **preempts**: it takes all blocks from one running request and sends it back to the queue.
# - Preemption *forgets* (`num_computed_tokens = 0`), but the freed blocks keep their hashes. At resumption
#   the prefix cache may find them again (path A) or they were reused meanwhile and the tokens are
#   recomputed (path B).
# - The scenes use the real Scheduler with a deterministic stand-in for the model; the last section runs
#   the real SmolLM2 model.

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
from minivllm.config import CacheConfig, SchedulerConfig
from minivllm.core.scheduler import Scheduler
from minivllm.lab.cli.steps import format_step_table, run_step_table
from minivllm.request import Request
from minivllm.sampling_params import SamplingParams
from minivllm.worker.fake_runner import FakeModelRunner

PROMPT_LEN = {"A": 30, "B": 20, "C": 20, "D": 20}  # tokens
ARRIVAL_STEP = {"A": 0, "B": 0, "C": 0, "D": 2}


def scene_requests(out_a=40, out_b=40):
    """A, B, C start together; D arrives at step 2 and waits for a seat (max_num_seqs = 3)."""
    max_tokens = {"A": out_a, "B": out_b, "C": 30, "D": 8}
    return [Request(r, list(range(1000 * i, 1000 * i + n)), SamplingParams(max_tokens=max_tokens[r], ignore_eos=True))
            for i, (r, n) in enumerate(PROMPT_LEN.items(), start=1)]  # fmt: skip


def make_scheduler(num_gpu_blocks=10):
    """A 10-block pool: block 0 is the null block, so 9 x 16 = 144 tokens of KV for everybody."""
    return Scheduler(
        SchedulerConfig(max_num_batched_tokens=128, max_num_seqs=3, max_model_len=128),
        CacheConfig(block_size=16, num_gpu_blocks=num_gpu_blocks),  # prefix caching on: the V1 default
    )


# %% [markdown]
# ## 11.5 Recovery after preemption: reset, then the prefix cache · 被抢占后的恢复：清零，再靠 prefix cache 找回
#
# ### 11.5.1 A pool too small for everyone · KV 池装不下所有人
#
# - A (30-token prompt), B and C (20 each) run together and decode; D arrives at step 2 and waits for a
#   seat. Each needs a new 16-token block whenever its length crosses a multiple of 16.
# - 9 usable blocks: A, B, C need 3 each at 33-48 tokens, and A is the first to need a 4th.
# - Step table (`P<n>` = n prompt tokens, `D1` = a decode, `--` = preempted in this step), around the
#   moment the pool runs dry:

# %%
rows = run_step_table(make_scheduler(), scene_requests(), arrival_steps=ARRIVAL_STEP)
first = next(r.step for r in rows if "--" in r.cells.values())
print(f"{len(rows)} steps in all; first preemption at step {first}\n")
print(format_step_table(rows[first - 3 : first + 3], list(PROMPT_LEN)))

# %% [markdown]
# - Zoom in on that step with the Scheduler itself: who asked for a block, who was evicted, what the
#   victim kept and what it lost.

# %%
scheduler, runner = make_scheduler(), FakeModelRunner()
requests = {r.request_id: r for r in scene_requests()}
step = 0
while True:
    for req_id, k in ARRIVAL_STEP.items():
        if k == step:
            scheduler.add_request(requests[req_id])
    running_before = [r.request_id for r in scheduler.running]
    computed_before = {r: requests[r].num_computed_tokens for r in running_before}
    free_before = scheduler.kv_cache_manager.block_pool.get_num_free_blocks()
    blocks_before = {r: scheduler.kv_cache_manager.get_block_ids(r) for r in running_before}
    out = scheduler.schedule()
    scheduler.update_from_output(out, runner.execute_model(out))
    if out.preempted_req_ids:
        break
    step += 1

(victim,) = out.preempted_req_ids
c = requests[victim]
print(f"step {step}: running {running_before}, free blocks {free_before}, tokens computed {computed_before}")
print(f"  A's next token is number {computed_before['A'] + 1}: it needs a 4th block, none is free")
print(f"  victim: {victim} = the LAST running request: {victim == running_before[-1]}")
print(f"  {victim}: status {c.status.name}, num_computed_tokens {computed_before[victim]} -> {c.num_computed_tokens}, "
      f"tokens kept {c.num_tokens} (prompt {c.num_prompt_tokens} + {c.num_output_tokens} outputs)")
print(f"  {victim}'s blocks {blocks_before[victim]} -> {scheduler.kv_cache_manager.get_block_ids(victim)}; A now holds "
      f"{scheduler.kv_cache_manager.get_block_ids('A')}")
print(f"  scheduled this step: {out.num_scheduled_tokens}")
print(f"  waiting queue now {[r.request_id for r in scheduler.waiting]}: {victim} was put in FRONT of D")

# %% [markdown]
# - The victim is not the request that asked (A) but the **last** in the running list (the newest).
#   Requests already scheduled in this step are never victims.
# - Its outputs stay; its K/V is gone. `num_computed_tokens = 0`: to the scheduler it is a new prompt of
#   `prompt + outputs` tokens.
# - **No admission in a step that preempted.** D has been waiting since step 2. A seat is free now and so
#   is KV room, yet the waiting loop is skipped in this step:

# %%
budget_left = 128 - out.total_num_scheduled_tokens
free_now = scheduler.kv_cache_manager.block_pool.get_num_free_blocks()
print(f"running {len(scheduler.running)} of max_num_seqs 3, {free_now} free blocks, {budget_left} budget tokens left")
print("D needs 2 blocks for its 20-token prompt; D admitted in the preemption step:", "D" in out.num_scheduled_tokens)

# %% [markdown]
# - Next step the waiting loop runs again, and C (now at the head) is tried first. Its two full blocks
#   are still in the prefix cache, but it also needs a block for the rest, and those free blocks are its
#   own cached ones. It does not fit, so the loop stops at C and D stays behind it (head-of-line):

# %%
out = scheduler.schedule()
scheduler.update_from_output(out, runner.execute_model(out))
print(f"step {step + 1}: scheduled {out.num_scheduled_tokens}, waiting {[r.request_id for r in scheduler.waiting]}")

# %% [markdown]
# ### 11.5.2 Two ways back: path A and path B · 两条恢复路径
#
# - Preemption returns the victim's blocks to the free list **tail first**, with their hashes. A freed
#   block stays findable until the pool hands it to someone else (lazy eviction).
# - At resumption the scheduler asks the prefix cache, as for any new prompt:
#   - **path A**: every full block is still there, only the partial last block is recomputed;
#   - **path B**: the blocks were handed out meanwhile, everything is recomputed.
# - Same scene twice, only the lengths of A and B change. If A and B stop soon (22 and 24 output tokens)
#   nobody needs C's blocks; if they run on (40 each), they take them one by one.

# %%
from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.sim.run import make_runner
from minivllm.lab.viz.figures.timeline import recovery_events


def run_scene(out_a, out_b):
    """The scene on an LLMEngine (same Scheduler), recording block tables for the recovery analysis."""
    config = EngineConfig.from_kwargs(model="none", max_num_batched_tokens=128, max_num_seqs=3, max_model_len=128,
                                      num_gpu_blocks=10, block_size=16)  # fmt: skip
    engine = LLMEngine(config, model_runner=make_runner(config, preset=None), record_block_pool=True)
    pending = scene_requests(out_a, out_b)
    step = 0
    while pending or engine.has_unfinished_requests():
        for r in [r for r in pending if ARRIVAL_STEP[r.request_id] == step]:
            engine.add_request(r.request_id, list(r.prompt_token_ids), r.sampling_params)
            pending.remove(r)
        engine.step()
        step += 1
    return engine.trace


def reused(trace, ev):
    """For each of the victim's blocks: who got it first while the victim waited (step, request)."""
    first = {}
    for s in trace.steps[ev.preempt_step : ev.resume_step]:
        for req_id, ids in s.block_tables.items():
            for b in ids:
                if b in ev.blocks_before and b not in first:
                    first[b] = f"{req_id} at step {s.step}"
    return ", ".join(f"block {b} -> {first.get(b, 'nobody')}" for b in ev.blocks_before)


def describe(trace):
    for ev in recovery_events(trace, block_size=16):
        print(f"{ev.request_id}: preempted at step {ev.preempt_step} holding blocks {ev.blocks_before} "
              f"({ev.computed_before} tokens of K/V, {ev.recoverable} of them in full blocks)")
        print(f"  reused while it waited: {reused(trace, ev)}")
        print(f"  resumed at step {ev.resume_step} with blocks {ev.blocks_after}: {ev.cached} tokens from the "
              f"prefix cache, {ev.recomputed} recomputed, {ev.new_tokens} new -> path {ev.path}")


print("A and B stop early (22 and 24 output tokens):")
trace_a = run_scene(22, 24)
describe(trace_a)
print("\nA and B run on (40 output tokens each):")
trace_b = run_scene(40, 40)
describe(trace_b)
(ev_a,), (ev_b,) = recovery_events(trace_a, block_size=16), recovery_events(trace_b, block_size=16)
print(f"\nVerdict: same preemption, two endings: path {ev_a.path} ({ev_a.cached} of {ev_a.computed_before} tokens "
      f"back from the cache) when A and B stop early, path {ev_b.path} ({ev_b.recomputed} recomputed) when they "
      "run on and take the victim's blocks.")  # fmt: skip

# %% [markdown]
# - **Path A** (first run): C's full blocks come back as they were. Only the tokens of its partial last
#   block are recomputed (a partial block is never cached), plus the one token C sampled but never computed.
# - **Path B** (second run): A and B kept growing and took C's blocks from the free list, tail first. Their
#   hashes were dropped, the prefix cache finds nothing, and C recomputes everything.
# - Either way the outputs are the same. Only the work differs. The prefix cache turns a preemption from
#   "recompute everything" into "recompute the tail" when the pool gives it time.
#
# ### 11.5.3 The recovery timeline · 恢复时间线
#
# - A busier scene from the simulator: ten requests on two shared 48-token system prompts, a 24-block
#   pool, budget 64. Preemptions happen naturally.
# - Top panel: tokens dropped per step (below zero) and tokens back from the cache or recomputed (above).
#   Bottom: one bar per preemption.

# %%
from minivllm.lab.sim.run import shared_prefix_workload, simulate
from minivllm.lab.viz.figures import recovery_timeline

busy = simulate(shared_prefix_workload(), max_num_batched_tokens=64, max_num_seqs=8, max_model_len=256,
                num_gpu_blocks=24, block_size=16, record_block_pool=True).trace  # fmt: skip
events = recovery_events(busy, block_size=16)
paths = {p: sum(e.path == p for e in events) for p in sorted({e.path for e in events})}
print(f"{len(events)} preemptions (paths {paths}): {sum(e.computed_before for e in events)} tokens of K/V dropped, "
      f"{sum(e.cached for e in events)} back from the cache, {sum(e.recomputed for e in events)} recomputed")
print(f"Verdict: every resumed request got at least its 48-token shared system prompt back from the cache "
      f"({all(e.cached >= 48 for e in events)}); the fewest tokens back was {min(e.cached for e in events)}.")

# %%
recovery_timeline(busy, title="Ten requests, a 24-block pool: what each preemption cost", block_size=16)

# %% [markdown]
# - Every resumed request gets **at least 48 tokens** from the cache: its shared system prompt. Those
#   blocks are also held by other running requests (`ref_cnt > 0`), so they never reach the free list
#   and can never be evicted.
# - The private tail is the part at risk. It goes back to the free list tail-first, so the last blocks
#   are reused first, and the hash chain breaks there: path A+B, the head back, the tail recomputed.
#
# ### 11.5.4 Preempt a request yourself · 亲手抢占一个请求
#
# - The recovery explorer runs a scene like the one above, one step at a time. Pick a running request,
#   press **preempt** (the Scheduler's own `preempt_request`), then **run 1 step** (the **steps** slider
#   sets how many steps one click runs; the button says it).
# - The block map outlines the chosen request's blocks; the timeline counts what came back.
# - The cells below drive the same app from code with `app.do_step(n)`, which leaves the slider as it is.

# %%
# NBVAL_IGNORE_OUTPUT
from minivllm.lab.viz.widgets import RecoveryExplorer

app = RecoveryExplorer()
app.ui  # noqa: B018 (the cell's value is what Jupyter displays)

# %%
app.do_step(6)  # run to step 7
app.request.value = "req-2"
app.preempt.click()
print(app.note)
app.do_step(1)
print(app.summary())

# %% [markdown]
# - With a 64-block pool there is plenty of room: req-2 is resumed in the very next step and its full blocks
#   come back from the cache (path A). Preempt it a step or two later to see its partial block recomputed.

# %%
app.num_blocks.value = 24  # a new engine on a smaller pool
app.do_step(50)
print(app.summary())

# %% [markdown]
# **Try this:** with 24 blocks, step one at a time from the start and watch the block map at the
# preemption steps. Preempt a request that has been decoding for a long time. How many of its tokens
# come back? Then preempt one and keep stepping while the others grow: when does it turn into path B?
#
# ### 11.5.5 Same outputs after recovery · 恢复后输出不变
#
# - Now the real SmolLM2-135M on this CPU, greedy decoding. Three short prompts, 12 output tokens each,
#   8-token blocks.
# - Run 1: a 40-block pool, no preemption. Run 2: an 8-block pool (7 usable, 56 tokens) for three requests
#   that grow to about 20 tokens each, so the scheduler must preempt and recover.
# - Greedy decoding picks the arg-max token, so the outputs must match token for token. That holds
#   only if the K/V that came back from the cache, or was recomputed, is the same K/V.

# %%
from minivllm.model.loader import load_model
from minivllm.worker.model_runner import ModelRunner

loaded = load_model("smollm2")  # loaded once, shared by both engines
PROMPTS = ["The history of the printing press begins", "A recipe for a simple tomato soup:",
           "Photosynthesis is the process by which"]  # fmt: skip


def run_real(num_gpu_blocks):
    config = EngineConfig.from_kwargs(model="smollm2", max_num_batched_tokens=64, max_num_seqs=4, max_model_len=24,
                                      num_gpu_blocks=num_gpu_blocks, block_size=8)  # fmt: skip
    engine = LLMEngine(config, model_runner=ModelRunner(config, loaded), record_block_pool=True)
    for i, prompt in enumerate(PROMPTS):
        engine.add_request(f"r{i}", prompt, SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True))
    while engine.has_unfinished_requests():
        engine.step()
    return engine


roomy, tight = run_real(40), run_real(8)
for name, engine in (("40 blocks", roomy), ("8 blocks", tight)):
    preempted = {r: rec.num_preemptions for r, rec in engine.trace.requests.items() if rec.num_preemptions}
    computed = sum(s.num_scheduled_tokens for s in engine.trace.steps)
    print(f"{name}: {len(engine.trace.steps)} steps, {computed} tokens computed, preemptions {preempted or 'none'}")
for ev in recovery_events(tight.trace, block_size=8):
    print(f"  {ev.request_id}: preempted at step {ev.preempt_step}, resumed at {ev.resume_step}: {ev.cached} tokens "
          f"from the cache, {ev.recomputed} recomputed (path {ev.path})")

# %%
same = all(roomy.outputs[r].outputs[0].token_ids == tight.outputs[r].outputs[0].token_ids for r in roomy.outputs)
print("Verdict: every request's 12 output tokens are identical with and without preemption:", same)

# %%
# NBVAL_IGNORE_OUTPUT
for r, out in tight.outputs.items():
    print(f"{r}: {PROMPTS[int(r[1])]!r} -> {out.outputs[0].text[:70]!r}...")

# %% [markdown]
# - The preempted request paid with extra computed tokens and extra steps, not with different text.
# - Recompute (path B) is exact because the model is a pure function of the token ids and positions. A
#   cache hit (path A) is exact because a block's hash covers its tokens *and* every token before it.

# %% [markdown]
# ## Summary
#
# - When `allocate_slots` finds no free block, the scheduler preempts the **last running request** (FCFS):
#   all its blocks go back, `num_computed_tokens = 0`, it is put at the **front** of the waiting queue,
#   and **nobody is admitted** in that step.
# - The freed blocks keep their hashes. At resumption the prefix cache returns the full blocks nobody
#   reused (path A). Blocks reused meanwhile, and the partial last block, are recomputed (path B).
# - Blocks shared with running requests (a common system prompt) never leave the cache.
# - Preemption costs time, never correctness: greedy outputs are identical (`minivllm/core/scheduler.py`
#   `_preempt`, `preempt_request`; `minivllm/lab/viz/figures/timeline.py` `recovery_events`).

# %% [markdown]
# ## Exercises
#
# 1. Write `first_preemption(prompt_lens, max_tokens, num_gpu_blocks)`: requests `r0, r1, ...` with these
#    prompt lengths and output lengths all arrive at step 0 (block size 16, budget 256, `max_num_seqs` 8,
#    `max_model_len` 512, prefix caching on; the prompts share no tokens, e.g. request `i` uses ids
#    `1000 * (i + 1), 1000 * (i + 1) + 1, ...`). Return `(step, victim)` of the first preemption (steps
#    counted from 0), or `None`. Use the Scheduler and `FakeModelRunner`, as in §11.5.1.
# 2. Write `resume_split(prompt_len, steps_before, block_size)`: a lone request runs `steps_before` steps,
#    is preempted with `scheduler.preempt_request`, and resumes in the next step with a big pool. Return
#    `(tokens found in the prefix cache, tokens computed in the resume step)`. Try it with a formula
#    first, then check against the engine.
#
# The check functions compare your answer with what the engine itself does. Solutions are in
# `11_5_preemption_recovery_solutions.ipynb`.

# %%
from minivllm.lab.exercises.ch11_5 import check_exercise_1, check_exercise_2


def first_preemption(prompt_lens, max_tokens, num_gpu_blocks):
    ...  # your code here


check_exercise_1(first_preemption)


# %%
def resume_split(prompt_len, steps_before, block_size):
    ...  # your code here


check_exercise_2(resume_split)
