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
# # Chapter 11.3-11.4 · The token budget and one scheduling path · token 预算与统一调度路径
#
# - §11.3: each step has a **token budget** (`max_num_batched_tokens`); we replay a small run step by step
#   and see how decodes and prefill chunks share it. §11.3.1: vLLM V1 has **one** scheduling path, no
#   prefill or decode method, and chunking off is the same `schedule()`.
# - §11.4: a request's whole progress is one integer, `num_computed_tokens`, for its prompt and its
#   output alike; its tokens are read-only views (§11.4.3); a guided request waits in WAITING_FOR_FSM
#   (§11.4.4).
# - The small runs use the real Scheduler on the simulator (virtual clock, deterministic); §11.4.4 runs the
#   real model.

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
from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.sim.cost_model import CostModel
from minivllm.lab.sim.sim_runner import SimRunner
from minivllm.sampling_params import SamplingParams

A100 = CostModel.from_preset("llama2_7b_a100")  # step times of Llama-2-7B on an A100 (the simulator's clock)
PROMPTS = {"chat0": 12, "chat1": 12, "chat2": 12, "doc0": 200, "doc1": 90}  # prompt lengths in tokens
OUTPUTS = {"chat0": 10, "chat1": 10, "chat2": 10, "doc0": 4, "doc1": 4}  # output tokens
ARRIVAL_STEP = {"doc0": 2, "doc1": 2}  # the documents land at step 2, the chats at step 0


def run_small(budget=64, chunked=True, max_model_len=256):
    """The small scene on the real Scheduler (simulated forward pass). Returns the finished engine and,
    per step, each request's (num_computed_tokens, num_tokens) read after the step."""
    config = EngineConfig.from_kwargs(max_num_batched_tokens=budget, enable_chunked_prefill=chunked, max_num_seqs=8,
                                      max_model_len=max_model_len, num_gpu_blocks=128)
    engine = LLMEngine(config, model_runner=SimRunner(A100, config=config))
    requests, progress, step = {}, [], 0
    while step == 0 or engine.has_unfinished_requests():
        for i, (req_id, n) in enumerate(PROMPTS.items()):
            if ARRIVAL_STEP.get(req_id, 0) == step:
                engine.add_request(req_id, [1000 * i + j for j in range(n)],
                                   SamplingParams(max_tokens=OUTPUTS[req_id], ignore_eos=True))
                requests[req_id] = engine.scheduler.requests[req_id]  # the live Request object
        engine.step()
        progress.append({r: (q.num_computed_tokens, q.num_tokens) for r, q in requests.items()})
        step += 1
    return engine, progress


engine, progress = run_small(budget=64)
trace = engine.trace
print(f"{len(trace.steps)} steps, budget {trace.steps[0].token_budget} tokens per step")

# %% [markdown]
# ## 11.3 V1's unified token budget · V1 的统一 token budget 实现
#
# - Every step the scheduler starts with `max_num_batched_tokens` tokens to hand out (here 64).
# - **(A) RUNNING first**, in order: each request gets `min(tokens it still needs, budget left)`: 1 for a
#   decode, a chunk for a prompt not finished yet.
# - **(B) then WAITING**, in arrival order, while budget and seats (`max_num_seqs`) remain: same rule.
# - So the decodes never wait for a prompt, and a prompt's chunk is whatever the decodes left.
#   (`long_prefill_token_threshold` can cap one request's chunk further; off here.)
#
# ### Step by step · 逐步回放
#
# - The player shows one step at a time: the whole run's chunk schedule on top (a red line marks the step),
#   and below, the tokens each request got in that step.

# %%
# NBVAL_IGNORE_OUTPUT
from minivllm.lab.viz.widgets import StepPlayer

app = StepPlayer(trace)
app.ui

# %%
for k in range(len(trace.steps)):
    app.slider.value = k  # what dragging the slider does
    print(app.summary())

# %% [markdown]
# - Steps 2-4: the three decodes take one token each, doc0 takes the rest of the budget; doc1 arrived too
#   but waits behind it.
# - Step 5: doc0 needs less than the rest; doc1 is admitted and takes what is left over.
# - When a document finishes its prompt it samples a token and joins the decodes.
#
# **Try this:** press Play, or drag the slider to step 5, where doc0's last chunk and doc1's first chunk
# share one step. Then guess: with a budget of 24 tokens, in how many steps does doc0's 200-token prompt
# get its tokens? 200 / 24 rounded up says 9. The engine:

# %%
def doc0_steps(budget):
    """The steps of a run with ``budget`` that gave doc0 prompt tokens."""
    return [s for s in run_small(budget=budget)[0].trace.steps if "doc0" in s.prefill_tokens]


TRY, doc0_len = 24, PROMPTS["doc0"]
steps24 = doc0_steps(TRY)
naive = -(-doc0_len // TRY)
print(f"budget {TRY}: the naive guess is {naive} steps; the engine took {len(steps24)}, the guess was right:",
      naive == len(steps24))
print("doc0's chunks:", [s.prefill_tokens["doc0"] for s in steps24])
print("decodes in those steps:", [len(s.decode_tokens) for s in steps24])
left = TRY - max(len(s.decode_tokens) for s in steps24)
print(f"the decodes go first, so doc0 gets {left} of the {TRY}: {doc0_len} / {left} rounded up is "
      f"{-(-doc0_len // left)} steps; the engine agrees:", -(-doc0_len // left) == len(steps24))
print("budget 32 hides it: naive", -(-doc0_len // 32), "steps, the engine", len(doc0_steps(32)))

# %% [markdown]
# ### The chunk schedule · 分块调度图
#
# - The same run as one picture: per step, decode tokens (blue) at the bottom, one orange block per prefill
#   chunk, under the dashed budget line.

# %%
from minivllm.lab.viz.figures import chunk_schedule, schedule_columns

fig = chunk_schedule(trace)
fig

# %%
cols = schedule_columns(trace)
print("decode tokens per step:", cols.decode)
print("prefill chunks (step, request, tokens):",
      list(zip(cols.chunk_step, cols.chunk_request, cols.chunk_tokens)))
used = [s.num_scheduled_tokens for s in trace.steps]
print("tokens used per step:  ", used)
print(f"full steps: {sum(u == 64 for u in used)} of {len(used)}; "
      f"the budget is filled whenever a prompt is waiting or unfinished")

# %% [markdown]
# - What the smallest and the first full step cost (simulated A100), split into the terms the simulator adds
#   up (`CostModel.terms`: host work, the linear layers from a measured table, attention, KV reads):

# %%
from minivllm.lab.sim.cost_model import shapes_from_steps

shapes = shapes_from_steps(trace.steps)
small = min(range(len(shapes)), key=lambda i: trace.steps[i].num_scheduled_tokens)  # the fewest tokens
full = next(i for i, s in enumerate(trace.steps) if s.num_scheduled_tokens == s.token_budget)  # the first full one
for i in (small, full):
    split = " + ".join(f"{term} {sec * 1e3:.2f}" for term, sec in A100.terms(shapes[i]).items())
    s = trace.steps[i]
    print(f"step {s.step}: {s.num_scheduled_tokens:>2} tokens, {s.duration * 1e3:5.2f} ms = {split} ms")
full_ms, small_ms = (trace.steps[i].duration * 1e3 for i in (full, small))
print(f"a full step ({trace.steps[full].num_scheduled_tokens} tokens) costs {full_ms / small_ms:.2f}x a "
      f"{trace.steps[small].num_scheduled_tokens}-token step; the linear layers are "
      f"{A100.terms(shapes[small])['linear'] / (small_ms / 1e3):.0%} of the small one")

# %% [markdown]
# - The linear layers read the 7B weights once per step, and for a few dozen tokens that read costs about
#   the same as for one: so filling the budget is nearly free for the decodes. §11.2 (in 11_1) showed the
#   cost once a step holds hundreds of tokens.

# %% [markdown]
# ### 11.3.1 V0 vs V1: the size of the code · V0 vs V1 的代码量对比
#
# - **V0** (`vllm/core/scheduler.py`) had two top-level policies, `_schedule_default` and
#   `_schedule_chunked_prefill`, built from `_schedule_prefills`, `_schedule_running` and
#   `_schedule_swapped`; sequence groups were asked `is_prefill()`.
# - **V1** (`vllm/v1/core/sched/scheduler.py`; `minivllm/core/scheduler.py` here) has one `schedule()`: a
#   running loop and a waiting loop, both asking one question: how many tokens may this request advance?
#
# #### 11.3.1.1 No prefill or decode branch · 没有预填充/解码分支
#
# - Read the source: no method is named after a phase, and the words "prefill" / "decode" occur once in
#   `schedule()`, in the chunking-off rule (§11.3.1.2).

# %%
import inspect
import re
from pathlib import Path

from minivllm.core.scheduler import Scheduler

print("Scheduler methods named after prefill or decode:",
      [name for name in vars(Scheduler) if re.search("prefill|decode", name)])
src = inspect.getsource(Scheduler.schedule)
print(f"schedule() is {len(src.splitlines())} lines; those that say prefill or decode:")
for line in src.splitlines():
    if re.search(r"prefill|\bdecode\b", line):
        print("   ", line.strip())

# %% [markdown]
# - The whole of chunked prefill is one `min()` chain, used by both loops for every request:

# %%
print(inspect.getsource(Scheduler._num_new_tokens))

# %% [markdown]
# #### 11.3.1.2 Chunking off: the same schedule() · 关闭分块：还是同一个 schedule()
#
# - Turn chunking off (`enable_chunked_prefill=False`, budget = `max_model_len` = 256) and run the same scene.
# - Record which functions of `scheduler.py` run in each configuration (`sys.setprofile`): the same list.

# %%
import sys

SCHEDULER_FILE = inspect.getsourcefile(Scheduler)


def scheduler_functions(run):
    """Names of the functions in scheduler.py that ``run()`` calls."""
    seen = set()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename == SCHEDULER_FILE:
            seen.add(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        result = run()
    finally:
        sys.setprofile(None)
    return sorted(name for name in seen if not name.startswith("<")), result  # skip comprehensions


calls_on, (engine_on, _) = scheduler_functions(lambda: run_small(budget=64))
calls_off, (engine_off, _) = scheduler_functions(lambda: run_small(budget=256, chunked=False))
print("chunking on: ", calls_on)
print("chunking off:", calls_off)
print("same functions:", calls_on == calls_off)

# %% [markdown]
# - Step tables of the two configurations (`P<n>`: prompt tokens, `D<n>`: a decode):

# %%
def step_table(trace):
    ids = list(PROMPTS)
    print(" | ".join(["step"] + [f"{r:>5}" for r in ids] + ["used/budget"]))
    for s in trace.steps:
        cells = [(f"P{s.prefill_tokens[r]}" if r in s.prefill_tokens else "")
                 + (f"D{s.decode_tokens[r]}" if r in s.decode_tokens else "") for r in ids]
        used = f"{s.num_scheduled_tokens}/{s.token_budget}"
        print(" | ".join([f"{s.step:>4}"] + [f"{c:>5}" for c in cells] + [used]))


print("chunked prefill, budget 64")
step_table(engine_on.trace)
print("\nchunking off, budget 256")
step_table(engine_off.trace)

# %% [markdown]
# - Chunking off, step 2: doc0 fits whole next to the 3 decodes; doc1 does not fit in what is left, so it
#   **waits whole** and keeps its place; the next step admits it.
# - That is the only difference, one `if` in the waiting loop. With chunking on and the same budget of 256,
#   doc1 takes what is left as its first chunk:

# %%
off2 = engine_off.trace.steps[2]
print(f"chunking off, step 2: {off2.num_scheduled_tokens} of {off2.token_budget} tokens used; doc1's "
      f"{PROMPTS['doc1']} do not fit in the {off2.token_budget - off2.num_scheduled_tokens} left:",
      PROMPTS["doc1"] > off2.token_budget - off2.num_scheduled_tokens and "doc1" not in off2.prefill_tokens)
step2 = run_small(budget=256)[0].trace.steps[2]
print("chunking on, budget 256, step 2: prefill", step2.prefill_tokens, "+", len(step2.decode_tokens), "decodes")

# %% [markdown]
# - The book's table, with minivllm's column read from its own source (line counts are live, so they
#   change with the code; §11.10.1 in 11_9 compares the files line by line):

# %%
# NBVAL_IGNORE_OUTPUT
scheduler_lines = len(Path(SCHEDULER_FILE).read_text().splitlines())
rows = [("专用调度方法 dedicated chunked method", "_schedule_chunked_prefill", "none", "none"),
        ("调度入口 entry point", "chunked_prefill_enabled branch", "schedule()", "schedule()"),
        ("chunk 上限 chunk cap", "enable_chunking passed to helpers", "min(num_new_tokens, token_budget)",
         "_num_new_tokens: min(...)"),
        ("请求状态 request state", "SequenceGroup / Sequence", "Request.num_computed_tokens",
         "Request.num_computed_tokens"),
        ("源码体量 scheduler lines", "2060", "841", str(scheduler_lines))]  # fmt: skip
print(f"{'':38} {'V0 (book)':34} {'V1 (book)':34} minivllm")
for row in rows:
    print(f"{row[0]:38} {row[1]:34} {row[2]:34} {row[3]}")

# %%
chunked_only = [n for n in vars(Scheduler) if "chunk" in n.lower()]
print("methods of minivllm's Scheduler with 'chunk' in the name:", chunked_only)
print("scheduler.py is shorter than V1's 841 lines:", scheduler_lines < 841)

# %% [markdown]
# ## 11.4 num_computed_tokens: the one state of a resumable prefill · num_computed_tokens：断点续传的唯一状态
#
# - The book: "Chunked Prefill 的”状态”就是这一个整数" (the whole state of chunked prefill is this one
#   integer). A `Request` holds its tokens and `num_computed_tokens`; the KV cache holds the rest.
# - How far doc0's `num_computed_tokens` moved in each step of the chunked run (`run_small` read it from
#   the live request after every step):

# %%
doc_steps = [b[0] - a[0] for a, b in zip([(0, 0)] + [r["doc0"] for r in progress if "doc0" in r],
                                         [r["doc0"] for r in progress if "doc0" in r])]  # fmt: skip
while doc_steps[-1] == 0:  # rows after doc0 finished repeat its last value
    doc_steps.pop()
print("doc0's integer moved by:", doc_steps)

# %% [markdown]
# - doc0 climbs by chunks, the sizes the budget left it, then by one per output token (§11.4.1). Nothing
#   else about its progress is recorded anywhere.
#
# - **When the integer moves.** The book: "每完成一个块，num_computed_tokens += chunk_size" (after each
#   chunk *completes*). V1 moves it earlier: at the end of `schedule()`, for every scheduled request, by
#   all its scheduled tokens (drafts included), before the model has run (`vllm/v1/core/sched/scheduler.py`,
#   the last lines of `schedule()` in 0.8.5). `update_from_output` only takes back rejected drafts.
# - Why: the next `schedule()` can plan on top of a step that is still running (vLLM overlaps the two in
#   its async scheduling), and the runner reads where each chunk starts from `SchedulerOutput`, not from a
#   count that is only right once the step is over.

# %%
from minivllm.lab.testbench import make_request, make_scheduler

s = make_scheduler(max_num_batched_tokens=64)
s.add_request(make_request("doc", 150, max_tokens=2))
first = s.schedule()
print(f"schedule() #1: {first.num_scheduled_tokens}, chunk starts at {first.num_computed_tokens['doc']}")
print("num_computed_tokens right after schedule(), no model has run:", s.requests["doc"].num_computed_tokens)
second = s.schedule()  # planned on top of step 1, which has not even run
print(f"schedule() #2: {second.num_scheduled_tokens}, chunk starts at {second.num_computed_tokens['doc']}")

# %% [markdown]
# ### 11.4.1 Decodes use the same field · Decode 阶段也走同一个字段
#
# - After its prompt, doc0 keeps climbing by one token per step, exactly like chat0, which was decoding
#   from the start: the book's "同一个”计算进度”的连续演化" (one progress, evolving without a break).

# %%
for step, row in enumerate(progress):
    doc = f"{row['doc0'][0]:>3}/{row['doc0'][1]:<3}" if "doc0" in row else "  (not here)"
    print(f"after step {step:>2}: doc0 {doc}  chat0 {row['chat0'][0]:>2}/{row['chat0'][1]}")
prompt_done = next(i for i, r in enumerate(progress) if r.get("doc0", (0, 1))[0] >= PROMPTS["doc0"])
finished = next(i for i, r in enumerate(progress) if r.get("doc0", (0, 1))[0] == PROMPTS["doc0"] + OUTPUTS["doc0"] - 1)
tail = [r["doc0"][0] for r in progress[prompt_done : finished + 1]]
print("after its prompt doc0 advances by", sorted({b - a for a, b in zip(tail, tail[1:])}), "per step")
print("(with speculative decoding it advances by 1 + accepted drafts: 11_8 §11.8.2)")

# %% [markdown]
# ### 11.4.2 The flat philosophy of one integer · 这一个整数的”扁平哲学”
#
# - The book's "❌ 过度设计" (over-design) would be a `RequestProgress` with a phase, a chunk counter and
#   flags. minivllm's `Request`, like vLLM's, has none: the phase is derived from the integer.

# %%
from minivllm.request import ConstantList, Request

req = Request("r", list(range(100)), SamplingParams(max_tokens=5))
print("fields:", sorted(vars(req)))
print("fields about a phase or chunk:", [f for f in vars(req) if re.search("prefill|decode|phase|chunk", f)])


def phase(r):
    """The phase, derived: still in the prompt, or producing output."""
    return "prompt" if r.num_computed_tokens < r.num_prompt_tokens else "output"


for done in (0, 64, 99, 100):
    req.num_computed_tokens = done
    print(f"num_computed_tokens {done:>3} of {req.num_prompt_tokens} prompt tokens -> {phase(req)}")

# %% [markdown]
# ### 11.4.3 Request's fields and the two token lists · Request 的源码字段与双重 token 列表
#
# - As in `vllm/v1/request.py`: `prompt_token_ids`, a private `_output_token_ids` and a private
#   `_all_token_ids` (prompt + outputs, a copy of the prompt to start with); `num_tokens` is the length of
#   the second, and that is what `num_computed_tokens` is compared with.

# %% [markdown]
# - **`ConstantList`**: a request exposes its tokens as read-only **live views**. Whoever holds the view
#   sees every token the request appends, but cannot change them; `append_output_token_ids` is the only
#   writer and updates both lists at once.

# %%
req = Request("r", [1, 2, 3], SamplingParams(max_tokens=5))
view = req.all_token_ids
print(type(view).__name__, view, "output:", req.output_token_ids)
req.append_output_token_ids(42)  # the only writer (the scheduler calls it with sampled tokens)
print("after append through the request:", view, "output:", req.output_token_ids)
for mutate in (lambda: view.append(7), lambda: view.__setitem__(0, 9), lambda: req.output_token_ids.clear()):
    try:
        mutate()
    except TypeError as e:
        print("mutation refused:", e)
print("still", view, "| is a ConstantList:", isinstance(req.output_token_ids, ConstantList))
print("num_tokens == len(all_token_ids) == prompt + outputs:", req.num_tokens == len(view) == 3 + 1)

# %% [markdown]
# ### 11.4.4 WAITING_FOR_FSM, the first state of a guided request · WAITING_FOR_FSM 初始状态
#
# - A request with `guided_choice` (its output must be one of a few strings) needs a grammar, compiled on a
#   background thread (`minivllm.structured_output.GrammarCompiler`).
# - Until it is ready the request sits in `WAITING_FOR_FSM`; the waiting loop **passes over it and keeps its
#   place**, and the requests behind it run.
# - Real model (SmolLM2-135M, greedy). To make the printout repeatable we hold the compiler back until
#   step 3 with a gate; a free-running compile is timed below.

# %%
import threading
import time

import torch

from minivllm.lab.cli.demo import build_engine, chat_ids
from minivllm.model.loader import load_model
from minivllm.structured_output import GrammarCompiler
from minivllm.structured_output.choice import build_vocabulary

torch.set_num_threads(1)  # steady timings on a shared machine (see 11_1)
loaded = load_model("smollm2")
tok = loaded.tokenizer
CHOICES = ["yes", "no"]

gate = threading.Event()


def gated_vocabulary(tokenizer):
    gate.wait()  # compiling starts only when the gate opens
    return build_vocabulary(tokenizer)


engine = build_engine(loaded, True, 128, 512)
compiler = GrammarCompiler(tok, loaded.eos_token_id, vocab_builder=gated_vocabulary)
grammar = compiler.submit(CHOICES)  # returns at once; the work runs on the compiler's thread
engine.add_request("guided", chat_ids(tok, "Is Paris the capital of France? Answer yes or no."),
                   SamplingParams(max_tokens=4, temperature=0.0, guided_choice=CHOICES), grammar=grammar)
for i, question in enumerate(["Name a colour.", "Say hello."]):
    engine.add_request(f"chat{i}", chat_ids(tok, question), SamplingParams(max_tokens=6, temperature=0.0,
                                                                          ignore_eos=True))
reqs = dict(engine.scheduler.requests)  # keep the Request objects: finished ones leave the scheduler
print("queue before step 0:", [r.request_id for r in engine.scheduler.waiting])
step = 0
while engine.has_unfinished_requests():
    if step == 3:
        gate.set()
        while not (grammar.is_ready() or grammar.error):  # wait for the background compile
            time.sleep(0.01)
    engine.step()
    print(f"after step {step}: " + "  ".join(f"{r}={q.status.name}" for r, q in reqs.items()))
    step += 1
out = engine.outputs["guided"].outputs[0]  # its one CompletionOutput
print("guided answer is one of", CHOICES, ":", out.text in CHOICES, "| finish reason:", out.finish_reason)

# %%
# NBVAL_IGNORE_OUTPUT
print("guided answer:", repr(out.text), "| chats:", [engine.outputs[f"chat{i}"].outputs[0].text for i in range(2)])

# %% [markdown]
# - Steps 0-2: the guided request is at the head of the queue but not ready; the chats behind it are
#   admitted and decode.
# - Step 3: the grammar is ready, so the waiting loop admits the request (WAITING_FOR_FSM → WAITING →
#   RUNNING in one pass); it prefills and samples only tokens its grammar allows.
# - Without a gate the compile takes as long as it takes (it decodes every token of the vocabulary once);
#   wall clock on this machine:

# %%
# NBVAL_IGNORE_OUTPUT
engine = build_engine(loaded, True, 128, 512)
start = time.perf_counter()
engine.add_request("guided", chat_ids(tok, "Is Paris the capital of France? Answer yes or no."),
                   SamplingParams(max_tokens=4, temperature=0.0, guided_choice=CHOICES))  # compiled in background
engine.add_request("chat0", chat_ids(tok, "Name a colour."), SamplingParams(max_tokens=6, temperature=0.0,
                                                                             ignore_eos=True))
guided, steps_waiting = engine.scheduler.requests["guided"], 0
while guided.status.name == "WAITING_FOR_FSM":
    engine.step()
    steps_waiting += 1
print(f"the grammar was ready after {time.perf_counter() - start:.2f} s; the guided request waited "
      f"{steps_waiting} steps while chat0 ran")

# %% [markdown]
# ## Summary
#
# - **Token budget:** each step hands out `max_num_batched_tokens` tokens: RUNNING requests first (decodes
#   take 1, unfinished prompts a chunk), then WAITING ones; a chunk is what the budget has left.
# - **One path:** V1's `schedule()` has no prefill or decode branch; `_num_new_tokens` is all of chunked
#   prefill, and chunking off is one `if` in the waiting loop, not another scheduler.
# - **One integer:** a request's progress is `num_computed_tokens`, for its prompt and its output alike,
#   moved when a step is scheduled; its tokens are exposed as read-only live views (`ConstantList`).
# - **WAITING_FOR_FSM:** a guided request whose grammar is still compiling is passed over without losing
#   its place; the others keep running.

# %% [markdown]
# ## Exercises
#
# 1. Prompts of lengths `prompt_lens` all arrive at once (one output token each, chunked prefill, budget
#    `budget`). Write `budget_schedule(prompt_lens, budget)`: a list with one dict per step,
#    `{request index: tokens scheduled}`.
# 2. Write `computed_after_each_step(trace, req_id)`: from an `EngineTrace` alone, the request's
#    `num_computed_tokens` after every step (0 before it arrives). The check also uses a run with too little
#    KV cache: a preempted request starts again from 0 (`StepRecord.preempted`).
#
# The check functions compare your answer with what the engine itself does. Solutions are in
# `11_3_token_budget_solutions.ipynb`.

# %%
from minivllm.lab.exercises.ch11_3 import check_exercise_1, check_exercise_2


def budget_schedule(prompt_lens, budget):
    ...  # your code here


check_exercise_1(budget_schedule)


# %%
def computed_after_each_step(trace, req_id):
    ...  # your code here


check_exercise_2(computed_after_each_step)
