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
#   scheduling policy are on in the same engine, and all of them draw on the step's **budget** and the
#   **KV block pool**.
# - Every scene runs the real `Scheduler`. The real model (SmolLM2-135M on this CPU) serves the prefix-cache
#   and speculative-decoding scenes; the simulator (a virtual clock priced as Llama-2-7B on an A100) serves
#   the preemption, budget and priority scenes.

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


def table(head, rows):
    """A small right-aligned text table."""
    rows = [[f"{x:,}" if isinstance(x, int) else str(x) for x in row] for row in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    print("\n".join("  ".join(x.rjust(w) for x, w in zip(line, widths)) for line in [head, *rows]))


def greedy_same(a, b):
    """Do two engines give every request the same output tokens?"""
    return all(a.outputs[r].outputs[0].token_ids == b.outputs[r].outputs[0].token_ids for r in a.outputs)


# %% [markdown]
# ## 11.8 Chunked prefill with the other optimisations · Chunked Prefill 与其他优化的组合
#
# The book: 「Chunked Prefill 不是孤立的优化，它和 V1 的其他机制有密切的协同」 ("chunked prefill is not an
# isolated optimisation; it works closely with V1's other mechanisms"). One mechanism per sub-section, in the
# book's order; 11.8.5 gathers the verdicts in the book's synergy matrix.
#
# ### 11.8.1 + Prefix caching · + 前缀缓存
#
# - **Claim**: hit blocks get 「ref_cnt++，零计算」 ("ref_cnt++, zero compute"), and 「budget 消费也只扣"真算了"
#   的那部分」 ("the budget is charged only for what is really computed").
# - **Experiment**: three questions to a library assistant share one system prompt. Budget 64; q0 comes first,
#   q1 and q2 arrive at step 2. The same scene runs with prefix caching on and off.

# %%
SYSTEM = (
    "You are the assistant of the Riverside city library. It opens at nine and closes at eight, Monday to "
    "Saturday; on Sunday it is closed. Members may borrow up to ten books for three weeks. Answer in one short "
    "sentence."
)
QUESTIONS = ["When does the library open?", "How many books can I borrow?", "Is it open on Sunday?"]


def chat_prompt(question, system=None):
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": question}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer.encode(text, add_special_tokens=False)


prompts = {f"q{i}": chat_prompt(q, SYSTEM) for i, q in enumerate(QUESTIONS)}
params = SamplingParams(max_tokens=2, temperature=0.0)
arrivals = {0: [dict(request_id="q0", prompt=prompts["q0"], params=params)],
            2: [dict(request_id=r, prompt=prompts[r], params=params) for r in ("q1", "q2")]}  # fmt: skip
settings = dict(max_num_batched_tokens=64, max_num_seqs=4, max_model_len=512, num_gpu_blocks=64)
cached = real_engine(enable_prefix_caching=True, **settings)
uncached = real_engine(enable_prefix_caching=False, **settings)
runs_811 = {"on": run_scene(cached, arrivals), "off": run_scene(uncached, arrivals)}


def billed(trace, r):
    return sum(s.prefill_tokens.get(r, 0) for s in trace.steps)


hits = {r: runs_811["on"].requests[r].num_cached_tokens for r in prompts}
on_, off_ = runs_811["on"], runs_811["off"]
table(["request", "prompt", "hit", "computed, cache on", "computed, cache off"],
      [[r, len(p), hits[r], billed(on_, r), billed(off_, r)] for r, p in prompts.items()])  # fmt: skip

# %%
free_hits = all(billed(runs_811["on"], r) == len(p) - hits[r] for r, p in prompts.items())
q_on, q_off = (sum(billed(t, r) for r in prompts) for t in runs_811.values())
print(f"Verdict: every hit token was free ({free_hits}): with the cache the engine computed {q_on} prompt tokens "
      f"instead of {q_off} and finished in {len(runs_811['on'].steps)} steps instead of "
      f"{len(runs_811['off'].steps)}, with the same greedy tokens ({greedy_same(cached, uncached)}).")  # fmt: skip

# %% [markdown]
# - Only **full** blocks are shared, and never the last prompt token (its logits are needed to sample), so a
#   hit is a multiple of the block size: q0's own first admission finds nothing.
#
# ### 11.8.2 + Speculative decoding (spec decode) · + 投机解码（Spec Decode）
#
# - **Claim**: 「这些 token 挤占的 budget 也是实实在在的」 ("the budget these tokens take is real"), so
#   「Chunked Prefill 和 Spec Decode 因此共用同一个预算模型」 ("chunked prefill and spec decode share one budget
#   model").
# - The n-gram (prompt-lookup) proposer needs no draft model: it finds the request's last `n` tokens earlier
#   in its own context and proposes the `num_speculative_tokens` tokens that followed. A step that verifies
#   4 drafts costs that request 1 + 4 tokens of the budget.
# - **Experiment**: "copy this passage" (prompt lookup's best case) decodes while a report arrives at step 2
#   and is chunked beside it, budget 48; once without drafts, once with 4.

# %%
from minivllm.lab.benchmarks.spec_decode import PASSAGE

quote = chat_prompt(f"Here is a passage:\n{PASSAGE}\nCopy the passage exactly, word for word.")
REPORT = "The city council met on Tuesday to discuss the new library. " + PASSAGE + " The council will vote next month."
report = chat_prompt(f"Read this report. Did the council approve the plan? Answer in three words.\n{REPORT}")
spec_arrivals = {0: [dict(request_id="quote", prompt=quote, params=SamplingParams(max_tokens=12, temperature=0.0))],
                 2: [dict(request_id="report", prompt=report, params=SamplingParams(max_tokens=3, temperature=0.0))]}
spec_settings = dict(max_num_batched_tokens=48, max_num_seqs=4, max_model_len=1024, num_gpu_blocks=128)  # fmt: skip
plain = real_engine(num_speculative_tokens=0, **spec_settings)
spec = real_engine(num_speculative_tokens=4, prompt_lookup_max=4, prompt_lookup_min=2, **spec_settings)
run_scene(plain, spec_arrivals), run_scene(spec, spec_arrivals)


def report_chunks(engine):
    return {s.step: s.prefill_tokens["report"] for s in engine.trace.steps if "report" in s.prefill_tokens}


chunks_plain, chunks_spec = report_chunks(plain), report_chunks(spec)
table(["step", "quote's drafts", "report's chunk, no drafts", "report's chunk, with drafts"],
      [[k, spec.trace.steps[k].spec_tokens.get("quote", 0), chunks_plain.get(k, "-"), chunks_spec.get(k, "-")]
       for k in sorted(chunks_plain | chunks_spec)])  # fmt: skip

# %%
from minivllm.lab.viz.figures import chunk_schedule


def chunk_follows_budget(engine):
    """Each report chunk = min(what is left of its prompt, budget - the quote's 1 + drafts)."""
    left, ok = len(report) - engine.trace.requests["report"].num_cached_tokens, True
    for s in engine.trace.steps:
        if "report" in s.prefill_tokens:
            quote_tokens = s.decode_tokens.get("quote", 0) + s.spec_tokens.get("quote", 0)
            ok &= s.prefill_tokens["report"] == min(left, s.token_budget - quote_tokens)
            left -= s.prefill_tokens["report"]
    return ok


drafted = sum(s.spec_tokens.get("quote", 0) for s in spec.trace.steps)
accepted = sum(s.spec_accepted.get("quote", 0) for s in spec.trace.steps)
rule = chunk_follows_budget(plain) and chunk_follows_budget(spec)
print(f"Verdict: every report chunk was what the quote's 1 + drafts left of the budget ({rule}); with "
      f"{accepted} of its {drafted} drafts accepted, the run took {len(spec.trace.steps)} steps instead of "
      f"{len(plain.trace.steps)}, with the same greedy tokens ({greedy_same(plain, spec)}).")  # fmt: skip
chunk_schedule(spec.trace, title="Drafts (purple) share the budget with the report's chunks (orange)", height=340)

# %% [markdown]
# ### 11.8.3 + Preemption · + 抢占
#
# - **Claim**: the book asks 「Chunked Prefill 正在"分片 prefill 中"的请求，会不会被抢占？」 ("can a request in the
#   middle of its chunked prefill be preempted?"). Yes: it sits in RUNNING like any other. When
#   `allocate_slots` fails, the scheduler takes the last running request, frees its KV, sets
#   `num_computed_tokens = 0` and puts it back at the head of `waiting`; 「如果是 WAITING 新请求分配失败，则本轮直接
#   停止继续拉新请求」 ("if a WAITING request's allocation fails, the step stops admitting").
# - Chunking admits a long prompt with the blocks of its **first chunk** only, so the pool can run dry in
#   the middle of its prefill. The freed blocks keep their hashes; on resumption the prefix cache returns
#   the full blocks that nobody reused meanwhile.
# - **Experiment** (simulator): a 12-block pool (11 usable), two chats decoding, a 120-token prompt `long`
#   arriving at step 2, budget 32.

# %%
from minivllm.lab.viz.figures import recovery_events, recovery_timeline


def preemption_scene(chat_tokens=16, chunked=True, record_block_pool=False):
    engine = sim_engine(record_block_pool, block_size=16, num_gpu_blocks=12, max_num_seqs=4, max_model_len=160,
                        max_num_batched_tokens=32 if chunked else 160, enable_chunked_prefill=chunked)  # fmt: skip
    chat = SamplingParams(max_tokens=chat_tokens, ignore_eos=True)
    arrivals = {0: [dict(request_id="chat0", prompt=list(range(100, 124)), params=chat),
                    dict(request_id="chat1", prompt=list(range(200, 230)), params=chat)],
                2: [dict(request_id="long", prompt=list(range(1000, 1120)),
                         params=SamplingParams(max_tokens=4, ignore_eos=True))]}  # fmt: skip
    return run_scene(engine, arrivals)


trace = preemption_scene(record_block_pool=True)
(ev,) = recovery_events(trace)
mid_prefill = ev.computed_before < trace.requests["long"].num_prompt_tokens
print(f"Verdict: long was preempted mid-prefill ({mid_prefill}) at step {ev.preempt_step}, {ev.computed_before} "
      f"tokens in; when it came back at step {ev.resume_step}, {ev.cached} came from the prefix cache and "
      f"{ev.recomputed} were computed again.")  # fmt: skip
recovery_timeline(trace, title=f"long: {ev.computed_before} tokens dropped at step {ev.preempt_step}, "
                  f"{ev.cached} back from the cache at step {ev.resume_step}")  # fmt: skip

# %% [markdown]
# **Try this:** press Play and watch `long`'s blocks around the preemption and the resumption: "in use",
# then "cached, free", then "in use" again when the prefix cache finds them. The top chart is the chunk
# schedule, the bottom right the KV block map after the step.

# %%
# NBVAL_IGNORE_OUTPUT
from minivllm.lab.viz.widgets import StepPlayer

player = StepPlayer(trace)
player.ui  # noqa: B018 (the cell's value is what Jupyter displays)

# %% [markdown]
# - How much comes back depends on how long the victim waits: the chats take new blocks from the free
#   queue, oldest first, and `long`'s blocks sit there tail-first. Longer chats, the same preemption:

# %%
waits = {n: recovery_events(preemption_scene(chat_tokens=n))[0] for n in (12, 24, 40)}
table(["chat output tokens", "long waits (steps)", "from cache", "recomputed"],
      [[n, e.resume_step - e.preempt_step, e.cached, e.recomputed] for n, e in waits.items()])  # fmt: skip
back = [e.cached for e in waits.values()]
unchunked = preemption_scene(chunked=False)
start = min(s.step for s in unchunked.steps if "long" in s.prefill_tokens)
print(f"Verdict: the longer long waits, the less comes back ({back == sorted(back, reverse=True)}). With "
      f"chunking off it is never preempted ({unchunked.requests['long'].num_preemptions == 0}): it waits whole "
      f"until step {start} instead.")  # fmt: skip

# %% [markdown]
# #### 11.8.3.1 Admit, then preempt: the thrash, and later vLLM's guard · 先接纳后抢占的抖动
#
# - **Claim**: vLLM 0.8.5 (and minivllm by default) admits a waiting request as soon as its **first chunk**
#   fits. Under KV pressure that can go round in circles: admitted, its next chunks fill the pool, a running
#   request needs a block, the newcomer is preempted and forgets its prompt, and next step it is admitted
#   again. Later vLLM added `scheduler_reserve_full_isl` (PR #37307): admit only if the free blocks hold the
#   **whole** current sequence (less prefix hits). The PR saw generation fall from ~100 to ~1.5 tok/s per GPU
#   without it, with prefix caching off.
# - minivllm has the same switch (`SchedulerConfig.scheduler_reserve_full_isl`, CLI
#   `--scheduler-reserve-full-isl`), off by default to keep 0.8.5's decisions.
# - **Experiment** (simulator): six 800-token prompts arrive together, 64 output tokens each, 200 usable
#   blocks (3,200 tokens), budget 512; the guard off and on, prefix caching off and on.

# %%
from minivllm.lab.metrics.summary import summarize

THRASH_IDS = [f"r{i}" for i in range(6)]


def thrash_scene(reserve, caching):
    engine = sim_engine(block_size=16, num_gpu_blocks=201, max_num_seqs=8, max_model_len=3200,
                        max_num_batched_tokens=512, enable_prefix_caching=caching,
                        scheduler_reserve_full_isl=reserve)  # fmt: skip
    params = SamplingParams(max_tokens=64, ignore_eos=True)
    prompts = {r: list(range(1000 * i, 1000 * i + 800)) for i, r in enumerate(THRASH_IDS)}
    return run_scene(engine, {0: [dict(request_id=r, prompt=p, params=params) for r, p in prompts.items()]})


def recomputed_tokens(trace):
    """Prefill tokens computed beyond what each prompt needed once (its first-admission hits excepted)."""
    computed = sum(sum(s.prefill_tokens.values()) for s in trace.steps)
    return computed - sum(r.num_prompt_tokens - r.num_cached_tokens for r in trace.requests.values())


thrash = {(cache, guard): thrash_scene(guard == "on", cache == "on") for cache in ("off", "on")
          for guard in ("off", "on")}  # fmt: skip
rows = {key: summarize(t) for key, t in thrash.items()}
table(["prefix cache", "guard", "preemptions", "recomputed tokens", "output tok/s", "mean ITL ms"],
      [[*key, m.num_preemptions, recomputed_tokens(thrash[key]), f"{m.output_throughput:.0f}",
        f"{m.itl.mean * 1e3:.1f}"] for key, m in rows.items()])  # fmt: skip

# %%
from minivllm.lab.viz.figures import gantt_compare

off, on = rows[("off", "off")], rows[("off", "on")]
victims = sorted({r for s in thrash[("off", "off")].steps for r in s.preempted})
print(f"Verdict: with the cache off, the first-chunk rule preempted {', '.join(victims)} {off.num_preemptions} "
      f"times, the guard {on.num_preemptions} times: output throughput x"
      f"{on.output_throughput / off.output_throughput:.2f}, mean ITL x{on.itl.mean / off.itl.mean:.2f}. With the "
      f"cache on, the thrash recomputes {recomputed_tokens(thrash[('on', 'off')])} tokens: the cache gives back "
      "the preempted chunks.")  # fmt: skip
gantt_compare({"guard off (0.8.5)": thrash[("off", "off")], "guard on (later vLLM)": thrash[("off", "on")]},
              title=f"Six 800-token prompts, no prefix cache: {off.num_preemptions} preemptions (left), "
              f"{on.num_preemptions} (right)")  # fmt: skip

# %% [markdown]
# - The guard's price is idle blocks: the newcomer waits while blocks that would not hold all of it stay free.
#   With the guard on, a sequence longer than the whole pool would wait forever, so vLLM refuses such a
#   `max_model_len` at start-up; minivllm's `LLMEngine` does too, and so does the bare `Scheduler`:

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
# - **Claim**: 「先续 RUNNING」 (RUNNING first, from the head of `self.running`), 「再拉 WAITING」 (then WAITING,
#   only if nobody was preempted this step), and 「每个请求都受同一套截断：先看剩余 token，再看
#   long_prefill_token_threshold，再看 token_budget」 ("every request goes through the same cuts: its remaining
#   tokens, then `long_prefill_token_threshold`, then what is left of the budget").
# - **Experiment** (the real scheduler, fake runner): budget 64, threshold 32. `chat` decodes, `doc` (160
#   tokens) is mid-prefill; `new0` (40 tokens) and `new1` (30) arrive at step 2. The table walks the book's
#   rule by hand from the scheduler's state; the last column is what `schedule()` decided.

# %%
from minivllm.lab.testbench import make_request, make_scheduler
from minivllm.worker.fake_runner import FakeModelRunner


def budget_walk(s):
    """The book's order, by hand: RUNNING then WAITING; each request: remaining -> threshold -> budget."""
    budget, threshold, rows = s.max_num_scheduled_tokens, s.long_prefill_token_threshold, []
    for queue, reqs in (("RUNNING", list(s.running)), ("WAITING", list(s.waiting))):
        for r in reqs:
            left = r.num_tokens - r.num_computed_tokens
            capped = min(left, threshold) if threshold else left
            n = min(capped, budget)
            budget -= n
            rows.append((r.request_id, queue, left, capped, n))
    return rows


sched = make_scheduler(max_num_batched_tokens=64, long_prefill_token_threshold=32, max_num_seqs=8)
fake = FakeModelRunner()
sched.add_request(make_request("chat", 8, max_tokens=20))
sched.add_request(make_request("doc", 160, max_tokens=4))
walk_rows, matches = [], []
for k in range(4):
    if k == 2:
        sched.add_request(make_request("new0", list(range(500, 540)), max_tokens=4))
        sched.add_request(make_request("new1", list(range(600, 630)), max_tokens=4))
    walk = budget_walk(sched)
    out = sched.schedule()
    sched.update_from_output(out, fake.execute_model(out))
    if k >= 2:
        walk_rows += [[k, *row, out.num_scheduled_tokens.get(row[0], 0)] for row in walk]
        order = [row[0] for row in walk if row[4]]
        matches.append(order == list(out.num_scheduled_tokens) and all(
            out.num_scheduled_tokens.get(row[0], 0) == row[4] for row in walk))  # fmt: skip
table(["step", "request", "queue", "left", "after threshold", "after budget", "schedule()"], walk_rows)
print(f"Verdict: the hand walk gives schedule()'s tokens, in its order, in both steps ({all(matches)}).")

# %% [markdown]
# - Decodes and requests already running keep flowing; a new request gets only what they leave, and a
#   newcomer admitted in step 2 is RUNNING in step 3 and served before the one still waiting.
#
# #### 11.8.4.1 fcfs and priority · fcfs 与 priority 两种语义
#
# - **Claim**: 「SchedulerConfig.policy 支持 fcfs 和 priority 两种语义…priority 用更小的 priority 值优先，同
#   priority 再按到达时间排序」 ("policy supports fcfs and priority; under priority a smaller value goes first,
#   equal priorities by arrival time"). Under `policy="priority"` (vLLM 0.9+) the preemption victim is also
#   the running request with the **largest** `(priority, arrival_time)`, not the last one admitted.
# - **Experiment** (simulator): a low-priority request (priority 1, 100-token prompt) arrives first, a
#   high-priority chat (priority 0) at step 2; both decode until the 11-block pool runs dry.

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
done_ms = {p: {r: (rec.finish_time - rec.arrival_time) * 1e3 for r, rec in t.requests.items()} for p, t in runs.items()}
victim = {p: next(r for s in t.steps for r in s.preempted) for p, t in runs.items()}
table(["policy", "victim", "low done (ms)", "high done (ms)"],
      [[p, victim[p], f"{done_ms[p]['low']:.0f}", f"{done_ms[p]['high']:.0f}"] for p in runs])  # fmt: skip
print(f"Verdict: FCFS evicts {victim['fcfs']}, the last admitted; priority evicts {victim['priority']}, and the "
      f"important chat finishes in {done_ms['priority']['high'] / done_ms['fcfs']['high']:.0%} of its FCFS time.")
gantt_compare(runs, title="Who is preempted: FCFS (left) vs priority (right)")

# %% [markdown]
# ### 11.8.5 The synergy matrix · 协同矩阵
#
# - The book's table (组合 combination, 相互关系 how they interact, 生产建议 production advice), with what this
#   notebook measured for each row. minivllm runs on one device and has no LoRA, so the last two rows are
#   not in minivllm.

# %%
MATRIX = [
    ("Chunked + 前缀缓存", "减少实际计算的新 token", "RAG 场景优先验证", "11.8.1",
     f"{q_on} prompt tokens computed with the cache, {q_off} without; hits cost no budget"),
    ("Chunked + Spec Decode", "共享 token budget", "看 draft 接受率和 TPOT", "11.8.2",
     f"{accepted}/{drafted} drafts accepted; {len(spec.trace.steps)} steps instead of {len(plain.trace.steps)}"),
    ("Chunked + 抢占", "抢占后清零，再靠 cache 恢复", "关注 preemption 指标", "11.8.3",
     f"{ev.cached} of {ev.computed_before} dropped tokens back from the cache; thrash: {off.num_preemptions} "
     f"preemptions, {on.num_preemptions} with the guard"),
    ("Chunked + TP", "每个 step 仍要跨 rank 同步", "关注通信尾延迟", "-", "not in minivllm"),
    ("Chunked + Multi-LoRA", "LoRA 影响缓存复用边界", "结合第 16 章的 KV/LoRA 约束", "-", "not in minivllm"),
]  # fmt: skip
for combo, relation, advice, where, shown in MATRIX:
    print(f"{combo} | {relation} | {advice}\n    {where}: {shown}")

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
