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
# # Chapter 5 · Block pool and prefix caching · 块池与前缀缓存
#
# - The **block pool** owns every KV block: a reference count per block, a free queue, and a map from
#   block hashes to blocks.
# - A full block gets a **hash chained to its parent's**: equal hashes mean equal *prefixes*, so a new
#   request can reuse the K/V of every leading block some earlier request already computed.
# - Freed blocks keep their hash until they are reused (lazy eviction), so a finished request's prefix
#   can still be hit; the free queue decides what goes first (LRU).
#
# Everything below runs the real `minivllm` scheduler and block pool; §5.3-§5.5 run the real model
# (SmolLM2-135M on this CPU).

# %%
from minivllm.config import EngineConfig
from minivllm.core.kv_cache_utils import HASH_FUNCTIONS, hash_request_tokens
from minivllm.engine.llm_engine import LLMEngine
from minivllm.model.loader import load_model
from minivllm.sampling_params import SamplingParams
from minivllm.worker.model_runner import ModelRunner

loaded = load_model("smollm2")  # loaded once; every engine below reuses it
tok = loaded.tokenizer

system = (
    "You are the help desk of a small public library. Answer in one or two short sentences. "
    "Opening hours: Monday to Friday 9:00-19:00, Saturday 10:00-16:00, closed on Sunday. "
    "Members may borrow up to ten items for three weeks and renew them twice online. "
    "Late returns cost 20 cents per item per day. Printing costs 10 cents per page."
)
questions = ["When are you open on Saturday?", "How many books can I borrow?", "What does printing cost?",
             "Is the library open on Sunday?", "How much is a late fee?"]


def chat_prompt(question):
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tok.encode(text, add_special_tokens=False)


prompts = [chat_prompt(q) for q in questions]
shared = min(next(i for i, (a, b) in enumerate(zip(prompts[0], p)) if a != b) for p in prompts[1:])
print("prompt lengths:", [len(p) for p in prompts], "| tokens shared by all:", shared)

# %% [markdown]
# ## 5.1 The block hash chain · 块哈希链
#
# - Only **full** blocks get a hash (block size 16 here); a partial last block has none.
# - `hash(block) = H(parent_hash, tokens of the block)`; the first block's parent is a fixed root.
# - The engine's default `H` is Python's `hash()`, fast but different in every process on Python
#   3.11 (hits and misses are the same, the printed values are not). For stable printouts this section
#   uses the `sha256` option (`prefix_caching_hash_algo="sha256"`).

# %%
sha256 = HASH_FUNCTIONS["sha256"]
B = 16


def short(h):
    return f"{h & 0xFFFFFFFF:08x}"


hashes = hash_request_tokens(sha256, B, prompts[0])
print(f"prompt 0: {len(prompts[0])} tokens -> {len(hashes)} full blocks + {len(prompts[0]) % B} left over (no hash)")
parent = "root"
for i, h in enumerate(hashes):
    print(f"block {i}: tokens {i * B:3}..{i * B + B - 1:3}  parent {parent:>8}  hash {short(h.hash_value)}")
    parent = short(h.hash_value)

# %% [markdown]
# - Prompt 1 asks another question after the same system prompt: its first blocks have the same hashes.
# - A copy of prompt 0 with only its **first** block changed: blocks 1.. hold the very same tokens, yet
#   every hash differs, because each one folds in its parent's.

# %%
other = prompts[0][:B][::-1] + prompts[0][B:]  # block 0 reversed, the rest unchanged
for name, p in (("prompt 1", prompts[1]), ("new first block", other)):
    hs = hash_request_tokens(sha256, B, p)
    same_tokens = [p[i * B : (i + 1) * B] == prompts[0][i * B : (i + 1) * B] for i in range(len(hs))]
    same_hash = [a.hash_value == b.hash_value for a, b in zip(hs, hashes)]
    print(f"{name:16} same tokens {''.join('=' if s else 'x' for s in same_tokens)}   "
          f"same hash {''.join('=' if s else 'x' for s in same_hash)}")

# %% [markdown]
# - So a hash lookup can stop at the first miss: once one block differs, no later block can match.
# - The cache key is the whole `(hash, tokens)` tuple, so two different blocks whose hash values
#   happened to collide would still not match.

# %% [markdown]
# ## 5.2 Reference counts and LRU eviction · 引用计数与LRU驱逐
#
# - vLLM's `test_prefill` scene on the real Scheduler (the fake runner stands in for the model): a pool
#   of 11 blocks (block 0 is the reserved null block), `req0` with 55 tokens, `req1` sharing its first
#   48 tokens (3 full blocks) plus 5 of its own. Both arrive together and produce 2 tokens.

# %%
from minivllm.worker.fake_runner import FakeModelRunner

config = EngineConfig.from_kwargs(model="none", max_num_batched_tokens=256, max_num_seqs=8, max_model_len=128,
                                  block_size=16, num_gpu_blocks=11, enable_prefix_caching=True)
small = LLMEngine(config, model_runner=FakeModelRunner())
pool = small.scheduler.kv_cache_manager.block_pool
common = list(range(100, 148))  # 48 tokens: three full blocks
small.add_request("req0", common + list(range(300, 307)), SamplingParams(max_tokens=2))
small.add_request("req1", common + list(range(400, 405)), SamplingParams(max_tokens=2))


def free_queue():
    return [b.block_id for b in pool.free_block_queue.get_all_free_blocks()]


small.step()
kv = small.scheduler.kv_cache_manager
print("hit tokens at admission:", small.trace.steps[0].prefix_cache_hit_tokens)
print("block tables:", {r: kv.get_block_ids(r) for r in ("req0", "req1")})
print("ref counts:  ", {b.block_id: b.ref_cnt for b in pool.blocks if b.ref_cnt > 0 and b.block_id > 0})
print("free queue (head first):", free_queue())

# %% [markdown]
# - Blocks 1-3 are shared (ref count 2); 4 and 5 are each request's own partial last block.
# - Next step both finish. `req0` is freed first, then `req1`; each request's blocks go back
#   **tail-first**, and a block joins the free queue only when its count reaches 0.

# %%
small.step()
print("finished:", small.trace.steps[-1].finished)
print("free queue (head first):", free_queue())
print("blocks still cached:", sorted(b.block_id for b in pool.blocks if b.block_hash is not None))

# %% [markdown]
# - `[6, 7, 8, 9, 10, 4, 5, 3, 2, 1]`: never-used blocks first, then 4 (req0's tail), then req1's
#   blocks tail-first: 5, 3, 2, 1. This is exactly the queue of vLLM's `test_prefill`.
# - The head is evicted first: the deepest blocks of a prefix go before its first blocks, which are
#   the ones most likely to be shared (a system prompt starts at block 1).
# - Eviction is lazy: blocks 1-3 are free **and** still findable. Now a 120-token request arrives (8
#   blocks): it pops `6..10, 4, 5, 3` from the head, and block 3 loses its hash.

# %%
req0_tokens = common + list(range(300, 307))


def req0_chain():
    """Where each full block of req0's prompt sits in the cache now (None: evicted)."""
    found = (pool.get_cached_block(h) for h in hash_request_tokens(kv.hash_fn, 16, req0_tokens))
    return [None if b is None else b.block_id for b in found]


print("req0's blocks in the cache before:", req0_chain())
small.add_request("big", list(range(2000, 2120)), SamplingParams(max_tokens=2))
small.step()
print("big's block table:", kv.get_block_ids("big"))
print("free queue (head first):", free_queue())
print("req0's blocks in the cache now:   ", req0_chain())
small.step()  # big finishes
small.add_request("req0-again", req0_tokens, SamplingParams(max_tokens=1))
small.step()
print("req0's prompt again, hit tokens:", small.trace.requests["req0-again"].num_cached_tokens)

# %% [markdown]
# - 32 tokens instead of 48: block 3 was evicted, blocks 1 and 2 survived. LRU with tail-first frees
#   keeps prefix heads longest.

# %% [markdown]
# ## 5.3 Prefix caching on a shared system prompt · 前缀缓存
#
# - Five chat requests share their first 100 tokens (chat template + the library's system prompt:
#   6 full blocks + 4 tokens).
# - `q0` arrives first, `q1` at step 2 while `q0` still runs, `q2`-`q4` at steps 10-11, after both
#   finished. Greedy, 8 output tokens each. Budget 256, 48 blocks, block pool recorded every step.

# %%
def run_chats(enable_prefix_caching):
    config = EngineConfig.from_kwargs(
        model="smollm2", device="cpu", dtype="float32", attention_backend="torch",
        max_num_batched_tokens=256, max_num_seqs=8, max_model_len=256, block_size=16, num_gpu_blocks=48,
        enable_prefix_caching=enable_prefix_caching,
    )
    engine = LLMEngine(config, model_runner=ModelRunner(config, loaded), record_block_pool=True)
    arrivals = {0: [0], 2: [1], 10: [2, 3], 11: [4]}  # engine step -> requests that arrive before it
    step = 0
    while step <= max(arrivals) or engine.has_unfinished_requests():
        for i in arrivals.get(step, []):
            engine.add_request(f"q{i}", prompts[i], SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True))
        engine.step()
        step += 1
    return engine


cached = run_chats(enable_prefix_caching=True)
print(f"{'request':8} {'prompt':>6} {'hit':>4} {'computed':>8}  admitted at step")
for r in cached.trace.requests.values():
    admitted = next(s.step for s in cached.trace.steps if r.request_id in s.new_requests)
    print(f"{r.request_id:8} {r.num_prompt_tokens:>6} {r.num_cached_tokens:>4} "
          f"{r.num_prompt_tokens - r.num_cached_tokens:>8}  {admitted}")

# %% [markdown]
# - `q0` finds nothing; everyone after it hits 96 tokens (the 6 full system-prompt blocks) and computes
#   only its own question.
# - `q1` hits blocks `q0` is still using (shared, ref count 2); `q2`-`q4` hit blocks that `q0` and
#   `q1` freed earlier (free, but still cached).
# - The hit must not change a single token. Same arrivals with caching off:

# %%
uncached = run_chats(enable_prefix_caching=False)
prompt_work = {name: sum(sum(s.prefill_tokens.values()) for s in e.trace.steps)
               for name, e in (("caching on", cached), ("caching off", uncached))}
print("prompt tokens computed:", prompt_work)
tokens = {r: (cached.outputs[r].outputs[0].token_ids, uncached.outputs[r].outputs[0].token_ids) for r in cached.outputs}
print("outputs equal:", all(a == b for a, b in tokens.values()))

# %%
# NBVAL_IGNORE_OUTPUT
for r, o in cached.outputs.items():
    print(f"{r}: {questions[int(r[1])]!r} -> {tok.decode(o.outputs[0].token_ids)!r}")

# %% [markdown]
# ## 5.4 The KV block map · KV块映射图
#
# - One cell per block of the pool after a step: grey = free and empty, light blue = free but still
#   cached (a later request can hit it), blue = in use by one request, green = shared (ref count > 1),
#   purple = the null block 0. Hover a cell for its owners, ref count and hash chain.
# - Step 2: `q1` has just been admitted next to `q0`.

# %%
from minivllm.lab.viz.figures import block_map_data, kv_block_map_at

for k in (2, 10):
    s = cached.trace.steps[k]
    print(f"after step {k}:", block_map_data(s.block_pool, s.block_tables).counts)
    print("   block tables:", s.block_tables)
fig = kv_block_map_at(cached.trace, 2)
fig.show()

# %% [markdown]
# - After step 2: six green blocks (the system prompt, ref count 2), then each request's own blocks.
# - After step 10: `q0` and `q1` are gone. Their last full blocks (7 and 9, where their questions
#   are) stay light blue: free, still cached. Their partial last blocks (8 and 10, the answers) have no
#   hash, so they are plain free. `q2` and `q3` took the six system-prompt blocks back out of the free
#   queue: green again.
# - Step through the whole run: the player shows each step's chunk schedule, the tokens per request and
#   the block map.

# %%
# NBVAL_IGNORE_OUTPUT
from minivllm.lab.viz.widgets import StepPlayer

app = StepPlayer(cached.trace)
app.ui  # noqa: B018 (the cell's value is what Jupyter displays)

# %%
app.slider.value = 10  # what a student does by dragging the slider
print(app.summary())
print(app.state()["blocks"])

# %% [markdown]
# **Try this:** press Play. At which step do the six system-prompt blocks turn light blue (nobody
# uses them, still cached), and which step makes them green again? Then set the slider to 12 and hover
# block 1: how many requests hold it now?

# %% [markdown]
# ## 5.5 The last-token rule · 最后一个 token 规则
#
# - A hit may never cover a prompt's **last** token: the step must compute it to get the logits the
#   next token is sampled from.
# - Hits come in whole blocks, so when a prompt ends exactly on a block boundary its whole last block
#   is recomputed, even if it is cached.
# - On the warm cache of §5.3: `q0`'s first 64 tokens (4 full blocks, all cached), its first 65 tokens,
#   and `q0`'s whole prompt again (113 tokens, 7 full blocks cached).

# %%
tests = {"first 64": prompts[0][:64], "first 65": prompts[0][:65], "q0 again": prompts[0]}
print(f"{'request':9} {'prompt':>6} {'full blocks':>11} {'hit':>4} {'computed':>8}")
for name, p in tests.items():
    cached.add_request(name, p, SamplingParams(max_tokens=1, temperature=0.0))
    while cached.has_unfinished_requests():
        cached.step()
    hit = cached.trace.requests[name].num_cached_tokens
    print(f"{name:9} {len(p):>6} {len(p) // 16:>11} {hit:>4} {len(p) - hit:>8}")

# %% [markdown]
# - 64 tokens: all 4 blocks are cached, yet only 48 tokens hit; the last block (16 tokens) is recomputed.
# - One token more and all 64 hit: the 65th token is the one that gets computed.
# - The same prompt again: 112 of 113 tokens hit, 1 token of work before the first output token.

# %% [markdown]
# ## Summary
#
# - A full block's hash chains its parent's: equal hashes mean equal prefixes, and a lookup stops at
#   the first miss.
# - Blocks carry reference counts; shared prefix blocks are referenced by every request using them.
# - Freed blocks go to the tail of the free queue, a request's blocks tail-first, and keep their hash
#   until popped from the head: LRU with lazy eviction keeps shared prefix heads longest.
# - A shared system prompt is computed once; later requests (running or arriving after it finished)
#   compute only their own suffix, and the outputs are unchanged.
# - The last-token rule: a hit never covers the last prompt token; on a block boundary that costs a
#   whole block.

# %% [markdown]
# ## Exercises
#
# 1. Write `cache_hit_tokens(prompt_len, shared_len, block_size)`: request A (`prompt_len` tokens) ran
#    and finished; request B has the same length, shares A's first `shared_len` tokens and differs
#    after them. How many of B's tokens are prefix-cache hits?
# 2. Write `free_queue_after(num_gpu_blocks, block_tables)`: on a fresh pool, some requests were
#    admitted together and got these block tables (in batch order); then all of them finished in that
#    order. Return the free queue, head (evicted next) first.
#
# The check functions compare your answer with what the engine itself does. Solutions are in
# `ch05_solutions.ipynb`.

# %%
from minivllm.lab.exercises.ch05 import check_exercise_1, check_exercise_2


def cache_hit_tokens(prompt_len, shared_len, block_size):
    ...  # your code here


check_exercise_1(cache_hit_tokens)


# %%
def free_queue_after(num_gpu_blocks, block_tables):
    ...  # your code here


check_exercise_2(free_queue_after)
