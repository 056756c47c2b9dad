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
# # Chapter 11.6 · Varlen batch metadata · 变长批次元数据
#
# - A mixed step holds a prefill chunk, decodes and a short prompt, all of different lengths. There is
#   no padding to a common length: all scheduled tokens are packed **back to back** into one flat batch.
# - A handful of small tensors (the *varlen metadata*) tells every attention layer where each request's
#   rows start, how much context each one sees, and where its K/V lives in the paged cache.
# - The batch below comes from the real Scheduler; the attention backends then run on it and are
#   compared with a float64 reference.

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
from minivllm.lab.testbench import step
from minivllm.request import Request
from minivllm.sampling_params import SamplingParams
from minivllm.worker.fake_runner import FakeModelRunner


def mixed_step(scale=1):
    """Run the Scheduler until the book's step: req_A's second 1024-token chunk (2048-token prompt),
    req_B decoding with 2048 tokens in its cache, req_C's 128-token prompt scheduled whole.
    ``scale`` divides every size (for slow backends)."""
    s = Scheduler(
        SchedulerConfig(max_num_batched_tokens=2048 // scale, max_num_seqs=8, max_model_len=4096 // scale,
                        long_prefill_token_threshold=1024 // scale),  # a chunk is at most 1024 tokens
        CacheConfig(block_size=16, num_gpu_blocks=512),
    )  # fmt: skip
    params = SamplingParams(max_tokens=8, ignore_eos=True)
    runner = FakeModelRunner()
    s.add_request(Request("req_B", list(range(10_000, 10_000 + 2048 // scale)), params))
    step(s, runner)  # step 0: B's first chunk
    s.add_request(Request("req_A", list(range(20_000, 20_000 + 2048 // scale)), params))
    step(s, runner)  # step 1: B's second chunk (its prompt is done: it samples), A's first chunk
    s.add_request(Request("req_C", list(range(30_000, 30_000 + 128 // scale)), params))
    return s, s.schedule()  # step 2: the mixed step


scheduler, out = mixed_step()
print("step 2 scheduled:", out.num_scheduled_tokens, f"({out.total_num_scheduled_tokens} tokens)")
computed = {r.req_id: r.num_computed_tokens for r in out.scheduled_new_reqs + out.scheduled_cached_reqs}
for req_id in ("req_A", "req_B", "req_C"):
    n = out.num_scheduled_tokens[req_id]
    print(f"  {req_id}: {computed[req_id]:>4} tokens already in the KV cache + {n:>4} this step "
          f"= {computed[req_id] + n:>4} context")

# %% [markdown]
# ## 11.6 The FlashAttention backend's mixed batch · FlashAttention backend 的混合批实现
#
# ### 11.6.1 One flat batch · 一个扁平批次
#
# - The book's example: **req_A** a 1024-token prefill chunk with 1024 tokens already computed (2048
#   context), **req_B** a decode (one token), **req_C** a fresh 128-token prompt.
# - The Scheduler sends per request only `num_computed_tokens` (before this step) and the number of
#   scheduled tokens. The block tables come from the KV cache manager.
# - Build the metadata in the book's order A, B, C. (minivllm's runner packs new requests first, then the
#   running ones; vLLM uses its persistent-batch order. The metadata is the same up to that order.)

# %%
from minivllm.attention import build_attention_metadata

ORDER = ["req_A", "req_B", "req_C"]
kv = scheduler.kv_cache_manager
block_ids = [kv.get_block_ids(r) for r in ORDER]
meta = build_attention_metadata(
    [computed[r] for r in ORDER], [out.num_scheduled_tokens[r] for r in ORDER], block_ids, kv.block_size
)
print("engine batch order:", out.req_ids)
print("num_actual_tokens:", meta.num_actual_tokens)
print("query_start_loc:  ", meta.query_start_loc.tolist())
print("seq_lens:         ", meta.seq_lens.tolist())
print("max_query_len:    ", meta.max_query_len)
print("max_seq_len:      ", meta.max_seq_len)
print("logits_indices:   ", meta.logits_indices.tolist())

# %% [markdown]
# - `query_start_loc = [0, 1024, 1025, 1153]`: request r owns rows `qsl[r] : qsl[r+1]` of the flat batch
#   (A rows 0-1023, B row 1024, C rows 1025-1152). `num_actual_tokens` is the last entry.
# - `seq_lens = [2048, 2049, 128]`: the context each request attends to, **including** this step's tokens.
#   For A that is the 1024 cached tokens plus its 1024 new ones; for B its 2048 cached tokens plus the one
#   token it feeds back.
# - `max_query_len` and `max_seq_len` size the kernel launch (tile counts, scratch space).
# - `logits_indices = [1023, 1024, 1152]`: the last row of each request. Only these rows go through the
#   LM head: one next-token distribution per request, never 1153.
# - Each of the three samples a token here: A's chunk ends at its prompt's end, B decodes, C's prompt fits
#   whole. A request still inside its prompt would have its sample dropped.
#
# ### 11.6.2 Where the K/V lives · K/V 存放在哪里
#
# - `block_table`: one row per request, the physical block ids of its logical blocks 0, 1, 2, ...,
#   padded with 0 (the null block) to the longest row.
# - `positions`: the absolute position of every row (for RoPE): `num_computed + 0, 1, 2, ...`.
# - `slot_mapping`: where each new token's K/V is written,
#   `block_table[r][pos // block_size] * block_size + pos % block_size`.

# %%
def short(xs, head=4, tail=2):
    """A long list as [first few, ..., last two]."""
    xs = list(xs)
    if len(xs) <= head + tail:
        return str(xs)
    return f"[{', '.join(map(str, xs[:head]))}, ..., {', '.join(map(str, xs[-tail:]))}]"


qsl = meta.query_start_loc.tolist()
print(f"block_table: shape {list(meta.block_table.shape)} (block_size {meta.block_size})")
for r, req_id in enumerate(ORDER):
    row = meta.block_table[r].tolist()
    used = len(block_ids[r])
    print(f"  {req_id}: {short(row[:used])} ({used} blocks) + {len(row) - used} padding zeros")
for r, req_id in enumerate(ORDER):
    rows = range(qsl[r], qsl[r + 1])
    pos = meta.positions[qsl[r] : qsl[r + 1]].tolist()
    slots = meta.slot_mapping[qsl[r] : qsl[r + 1]].tolist()
    print(f"{req_id}: rows {rows.start}..{rows.stop - 1}  positions {short(pos)}  slots {short(slots)}")

# %%
# Check one slot by hand: req_A's first new token (row 0) sits at position 1024.
pos, table = meta.positions[0].item(), block_ids[0]
print(f"position {pos}: logical block {pos // 16}, physical block {table[pos // 16]}, offset {pos % 16} "
      f"-> slot {table[pos // 16] * 16 + pos % 16}; slot_mapping[0] = {meta.slot_mapping[0].item()}")

# %% [markdown]
# - A's chunk starts at position 1024, in its 65th block. The first 64 blocks hold the chunk computed in
#   step 1, and this step only *reads* them.
# - B's single row, at position 2048, opens a fresh block (its 129th: 2048 tokens filled 128 blocks
#   exactly). C writes its 128 slots into 8 fresh blocks.
# - Nothing here says "prefill" or "decode". Every request is just (context already cached, rows this step).
#
# ### 11.6.3 The causal rule for chunks · 分块的因果规则
#
# - A query row at position `p` may see keys `0..p`. In the flat batch, row `i` of request r sits at
#   `p = seq_len - query_len + i`: the mask is aligned **bottom-right**, not top-left.
# - The torch backend derives one of three kinds per request from the metadata:

# %%
from minivllm.attention.torch_backend import build_torch_plan

plan = build_torch_plan(meta)
for req_id, rp, seq_len in zip(ORDER, plan.requests, meta.seq_lens_cpu):
    print(f"{req_id}: {rp.end - rp.start:>4} query rows x {seq_len:>4} keys -> {rp.kind}")

# %%
toy = build_attention_metadata([3], [3], [[1, 2]], 4)  # a chunk: 3 cached tokens + 3 new ones
mask = build_torch_plan(toy).requests[0].mask
print("chunk with 3 cached + 3 new tokens; rows = queries at positions 3..5, columns = keys 0..5")
for p, row in zip(range(3, 6), mask.int().tolist()):
    print(f"  query at position {p}: {row}")

# %% [markdown]
# - `decode`: one row, sees everything, no mask needed. `causal`: a fresh prompt, the usual triangle.
#   `chunk`: a triangle shifted right by the cached context. A top-left triangle (what `is_causal=True`
#   means in PyTorch's SDPA) would hide the cached tokens from the first rows.
#
# ### 11.6.4 The backends agree · 各后端结果一致
#
# - Every backend consumes the same metadata and the same paged cache `[2, num_blocks, block_size,
#   kv_heads, head_dim]`. They first write the new K/V at `slot_mapping`, then attend.
# - Random q, k, v with SmolLM2's head layout (9 query heads sharing 3 KV heads, head_dim 64), and a
#   cache whose other slots hold random "earlier" K/V. The oracle is
#   `minivllm.attention.reference`: a per-token Python loop in float64.

# %%
import torch

from minivllm.attention import get_attn_backend
from minivllm.attention.reference import reference_attention


def random_inputs(meta, num_blocks, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = meta.num_actual_tokens
    q, k, v = torch.randn(t, 9, 64, generator=g), torch.randn(t, 3, 64, generator=g), torch.randn(t, 3, 64, generator=g)
    return q, k, v, torch.randn(2, num_blocks, 16, 3, 64, generator=g)


q, k, v, cache = random_inputs(meta, kv.num_gpu_blocks)
ref_out, ref_cache = reference_attention(q, k, v, cache, meta, scale=64**-0.5)
torch_cache = cache.clone()
torch_out = get_attn_backend("torch", "cpu", torch.float32, 16, 64).forward(q, k, v, torch_cache, meta, 64**-0.5)
err = (torch_out.double() - ref_out).abs().max().item()
print(f"output {list(torch_out.shape)}")
print("KV cache after the write identical:", torch.equal(torch_cache.double(), ref_cache))
print("torch backend vs float64 reference, max abs error < 1e-5:", err < 1e-5)

# %%
# NBVAL_IGNORE_OUTPUT
print(f"max abs error: {err:.1e}")

# %% [markdown]
# - The Triton kernel (the CUDA default) runs on CPU under `TRITON_INTERPRET=1`. The interpreter runs
#   the kernel program by program in Python, far too slow for 1153 rows and 2048-token contexts.
# - So it runs on the same batch at **1/8 scale** (A: 128 + 128, B: 256 + 1, C: 16), built by the same
#   Scheduler, in fp32, in a **fresh process**: `TRITON_INTERPRET` must be set before `triton` is
#   imported. tests/attention/test_triton_backend.py covers many more shapes.

# %%
import json
import os
import subprocess
import sys

small_sched, small_out = mixed_step(scale=8)
small_reqs = small_out.scheduled_new_reqs + small_out.scheduled_cached_reqs
small_computed = {r.req_id: r.num_computed_tokens for r in small_reqs}
batch = dict(
    computed=[small_computed[r] for r in ORDER],
    scheduled=[small_out.num_scheduled_tokens[r] for r in ORDER],
    blocks=[small_sched.kv_cache_manager.get_block_ids(r) for r in ORDER],
)
CHILD = """
import json, sys, torch
from minivllm.attention import build_attention_metadata, get_attn_backend
from minivllm.attention.triton_utils import triton_available
from minivllm.attention.reference import reference_attention
if not triton_available():
    print("triton is not installed: skipped (tests/attention covers it where it is)"); sys.exit()
b = json.loads(sys.argv[1])
meta = build_attention_metadata(b["computed"], b["scheduled"], b["blocks"], 16)
g = torch.Generator().manual_seed(0)
t = meta.num_actual_tokens
q, k, v = torch.randn(t, 9, 64, generator=g), torch.randn(t, 3, 64, generator=g), torch.randn(t, 3, 64, generator=g)
cache = torch.randn(2, 512, 16, 3, 64, generator=g)
ref, ref_cache = reference_attention(q, k, v, cache, meta, 64 ** -0.5)
out = get_attn_backend("triton", "cpu", torch.float32, 16, 64).forward(q, k, v, cache, meta, 64 ** -0.5)
print("query_start_loc", meta.query_start_loc.tolist(), "seq_lens", meta.seq_lens.tolist())
print("KV cache after the write identical:", torch.equal(cache.double(), ref_cache))
err = (out.double() - ref).abs().max().item()
print("triton kernel (interpreter) vs float64 reference, max abs error < 1e-5:", err < 1e-5)
print(f"max abs error {err:.1e}", file=sys.stderr)
"""
env = {**os.environ, "TRITON_INTERPRET": "1"}
child = subprocess.run([sys.executable, "-c", CHILD, json.dumps(batch)], capture_output=True, text=True, env=env)
print(child.stdout.strip() or child.stderr.strip()[-2000:])

# %%
# NBVAL_IGNORE_OUTPUT
print(child.stderr.strip()[-300:])

# %% [markdown]
# - The same four tensors are FlashAttention's arguments. vLLM's FlashAttention backend
#   (`vllm/v1/attention/backends/flash_attn.py`) makes one call for the whole mixed batch:
#   `flash_attn_varlen_func(q, k_cache, v_cache, cu_seqlens_q=query_start_loc, seqused_k=seq_lens,
#   max_seqlen_q=max_query_len, max_seqlen_k=max_seq_len, block_table=block_table, causal=True, ...)`,
#   after `reshape_and_cache_flash` has written the new K/V through `slot_mapping`. `causal=True` is
#   aligned bottom-right there, which is the chunk rule of §11.6.3.
# - With FA3 (Hopper), vLLM also passes `scheduler_metadata`: a tile schedule that
#   `get_scheduler_metadata(...)` computes once per step, ahead of time, from the same `seq_lens` and
#   `query_start_loc`. Every layer's launch then reuses it instead of planning again, and the launch stays
#   CUDA-graph safe. minivllm's `backend.prepare(meta)` (building `meta.plan` once per step) is the same idea.
# - `flash_attn` (upstream FlashAttention-2) is an optional GPU cross-check. It needs CUDA, fp16/bf16 and a
#   page size that is a multiple of 256. The selector says why it cannot run here:

# %%
# NBVAL_IGNORE_OUTPUT
try:
    get_attn_backend("flash_attn", "cpu", torch.float32, 16, 64)
except ValueError as e:
    print(e)

# %% [markdown]
# ### 11.6.5 The same metadata in the real model · 真实模型里的同一份元数据
#
# - In the engine, `ModelRunner` builds this metadata once per step and every one of SmolLM2's 30 layers
#   reuses it. Here is the 1/8-scale mixed step run through the real model, with the metadata it used
#   captured on the way.

# %%
from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.worker.model_runner import ModelRunner

config = EngineConfig.from_kwargs(
    model="smollm2", max_num_batched_tokens=256, long_prefill_token_threshold=128, max_num_seqs=8,
    max_model_len=512, num_gpu_blocks=64, attention_backend="torch",
)  # fmt: skip
runner = ModelRunner(config)
engine = LLMEngine(config, model_runner=runner)
seen, orders = [], []  # each step's metadata and batch order, recorded on the way
prepare, execute = runner.attn_backend.prepare, runner.execute_model


def recording_prepare(m):
    seen.append(m)
    prepare(m)


def recording_execute(scheduler_output):
    orders.append(scheduler_output.req_ids)
    return execute(scheduler_output)


runner.attn_backend.prepare, runner.execute_model = recording_prepare, recording_execute
params = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
engine.add_request("req_B", list(range(1000, 1256)), params)
engine.step()
engine.add_request("req_A", list(range(2000, 2256)), params)
engine.step()
engine.add_request("req_C", list(range(3000, 3016)), params)
before = {r: len(engine.outputs[r].outputs[0].token_ids) for r in ("req_A", "req_B", "req_C")}
engine.step()
m = seen[-1]
print("engine batch order:", orders[-1])
print("query_start_loc", m.query_start_loc.tolist(), "seq_lens", m.seq_lens.tolist(),
      "logits_indices", m.logits_indices.tolist(), "max_query_len", m.max_query_len)  # fmt: skip
print("tokens sampled this step:", {r: len(engine.outputs[r].outputs[0].token_ids) - n for r, n in before.items()})

# %% [markdown]
# - The runner's order differs (C, the new request, first), so the offsets move, but the content is the
#   one of §11.6.1 at 1/8 scale: a 16-token prompt, a decode over 257 positions, a 128-token chunk over 256.
# - All three reached the end of their tokens, so each sampled one token in this step.

# %% [markdown]
# ## Summary
#
# - One step = one flat batch of `T` tokens. `query_start_loc` cuts it into requests; `seq_lens` says how
#   far back each request looks; `block_table` and `slot_mapping` map positions to physical cache slots;
#   `positions` feeds RoPE; `logits_indices` picks one row per request for sampling.
# - The causal rule is bottom-right aligned, so a chunk sees its cached context. Prefill, chunk and
#   decode differ only in (context, rows).
# - The torch backend, the Triton kernel and the float64 reference agree on the same metadata
#   (`minivllm/attention/metadata.py`, `torch_backend.py`, `triton_backend.py`, `reference.py`).

# %% [markdown]
# ## Exercises
#
# 1. Write `query_start_loc(num_scheduled)`: the list for a batch whose requests get these many tokens.
# 2. Write `slot_mapping(num_computed, num_scheduled, block_ids, block_size)` for one request: the slots
#    its new tokens are written to.
# 3. Write `attention_kind(num_computed, num_scheduled)`: `"decode"`, `"causal"` or `"chunk"`, as the
#    torch backend decides.
#
# The check functions compare your answer with `build_attention_metadata` and the torch backend's plan.
# Solutions are in `11_6_varlen_metadata_solutions.ipynb`.

# %%
from minivllm.lab.exercises.ch11_6 import check_exercise_1, check_exercise_2, check_exercise_3


def query_start_loc(num_scheduled):
    ...  # your code here


check_exercise_1(query_start_loc)


# %%
def slot_mapping(num_computed, num_scheduled, block_ids, block_size):
    ...  # your code here


check_exercise_2(slot_mapping)


# %%
def attention_kind(num_computed, num_scheduled):
    ...  # your code here


check_exercise_3(attention_kind)
