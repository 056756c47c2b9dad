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
# # Chapter 4 · Paged attention · 分页注意力
#
# - The KV cache is cut into **blocks** of `block_size` tokens (16 here). A request owns a list of
#   block ids, its **block table**; the blocks can sit anywhere in the cache.
# - Every step, all scheduled tokens of all requests are packed back to back into **one flat batch**.
#   A handful of small tensors (the attention metadata) tell the attention kernel who is who.
# - Nothing in the metadata says "prefill" or "decode": a request is `num_computed_tokens` (context
#   already cached) plus this step's chunk.
#
# Everything below runs the real `minivllm` scheduler and the real model (SmolLM2-135M on this CPU).

# %%
import torch

from minivllm.attention.metadata import build_attention_metadata
from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.model.loader import load_model
from minivllm.sampling_params import SamplingParams
from minivllm.worker.model_runner import ModelRunner

loaded = load_model("smollm2")  # loaded once; every engine below reuses it
arch = loaded.arch
print(f"SmolLM2-135M: {arch.num_layers} layers, {arch.num_heads} query heads, {arch.num_kv_heads} KV heads, "
      f"head_dim {arch.head_dim}")


class RecordingRunner(ModelRunner):
    """The real model runner; it also keeps every SchedulerOutput it executes."""

    def __init__(self, config, loaded):
        super().__init__(config, loaded)
        self.scheduler_outputs = []

    def execute_model(self, out):
        self.scheduler_outputs.append(out)
        return super().execute_model(out)


def make_engine(budget, max_num_seqs=8, num_blocks=32):
    config = EngineConfig.from_kwargs(
        model="smollm2", device="cpu", dtype="float32", attention_backend="torch",
        max_num_batched_tokens=budget, max_num_seqs=max_num_seqs, max_model_len=256,
        block_size=16, num_gpu_blocks=num_blocks, enable_prefix_caching=False,  # prefix caching: chapter 5
    )
    return LLMEngine(config, model_runner=RecordingRunner(config, loaded))


def runs(values):
    """[3, 4, 5, 9] -> '3..5, 9': consecutive integers as ranges."""
    out, start = [], None
    for i, v in enumerate(values):
        if start is None:
            start = v
        if i + 1 == len(values) or values[i + 1] != v + 1:
            out.append(f"{start}..{v}" if v != start else f"{v}")
            start = None
    return ", ".join(out)


greedy = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)

# %% [markdown]
# ## 4.1 Block tables and slot mapping · 块表与槽位映射
#
# - Three short prompts start decoding; one step later a 100-token document arrives.
# - The token budget is 48 per step, so the document is cut into chunks of 45 (3 tokens go to the
#   three decodes).
# - The engine's runner keeps every `SchedulerOutput`; we look at step 2: three decodes and the
#   document's **second** chunk, in one forward pass.

# %%
engine = make_engine(budget=48)
tok = engine.tokenizer
chats = ["The capital of France is",
         "Once upon a time, in a village by the sea, there lived a",  # 15 tokens: one token short of a block
         "The three primary colours are red,"]
doc_text = (
    "An operating system does not give a program one long strip of physical memory. It hands out small pages "
    "wherever they are free and keeps a page table that maps each virtual page to a physical frame. Paged "
    "attention does the same for the key and value vectors of a language model: every request owns a list of "
    "fixed-size blocks, the block table, and the blocks can sit anywhere in the cache. A new token only needs a "
    "free slot, never a contiguous stretch, so memory is not wasted on reservations that are never used."
)
doc = tok.encode(doc_text)[:100]
for i, text in enumerate(chats):
    engine.add_request(f"chat-{i}", tok.encode(text), greedy)
engine.step()  # step 0: the three prompts
engine.add_request("doc", doc, SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True))
while engine.has_unfinished_requests():
    engine.step()
outputs = engine.model_runner.scheduler_outputs
for s in engine.trace.steps[:5]:
    print(f"step {s.step}: prefill {s.prefill_tokens}  decode {sorted(s.decode_tokens)}")

# %% [markdown]
# - The scheduler never sends a whole block table again: a new request comes with its table, a running
#   one only with the blocks added this step. The runner (and we) keep a mirror.

# %%
tables, tables_at = {}, []
for out in outputs:
    for new in out.scheduled_new_reqs:
        tables[new.req_id] = list(new.block_ids)
    for cached in out.scheduled_cached_reqs:
        tables[cached.req_id] += cached.new_block_ids
    tables_at.append({r: list(tables[r]) for r in out.req_ids})

out = outputs[2]
print("step 2 new blocks:", {c.req_id: c.new_block_ids for c in out.scheduled_cached_reqs if c.new_block_ids})
print("block tables after step 2:", tables_at[2])

# %% [markdown]
# - `chat-1` had 15 + 1 tokens: its 17th token needs a second block, and it gets whichever block is
#   free next. So does the document. Neither table is contiguous, and nothing cares.
# - Now build the step's attention metadata with the same function the runner calls.

# %%
req_ids = out.req_ids
computed = {r.req_id: r.num_computed_tokens for r in out.scheduled_new_reqs + out.scheduled_cached_reqs}
meta = build_attention_metadata(
    [computed[r] for r in req_ids],
    [out.num_scheduled_tokens[r] for r in req_ids],
    [tables_at[2][r] for r in req_ids],
    block_size=16,
)
print("batch order:        ", req_ids)
print("num_actual_tokens:  ", meta.num_actual_tokens)
print("query_start_loc:    ", meta.query_start_loc.tolist())
print("seq_lens:           ", meta.seq_lens.tolist())
print("max_query_len:      ", meta.max_query_len, "  max_seq_len:", meta.max_seq_len)
print("block_table:        ", meta.block_table.tolist())
print("logits_indices:     ", meta.logits_indices.tolist())

# %%
qsl = meta.query_start_loc_cpu
print(f"{'request':8} {'computed':>8} {'chunk':>5} {'seq_len':>7}  {'rows':>7}  {'positions':>9}  slots")
for i, r in enumerate(req_ids):
    rows = slice(qsl[i], qsl[i + 1])
    pos = meta.positions[rows].tolist()
    print(f"{r:8} {computed[r]:>8} {qsl[i + 1] - qsl[i]:>5} {meta.seq_lens_cpu[i]:>7}  {qsl[i]:>3}..{qsl[i + 1] - 1:<3}"
          f"  {runs(pos):>9}  {runs(meta.slot_mapping[rows].tolist())}")

# %% [markdown]
# - `positions` = `num_computed_tokens + 0, 1, ...`: the absolute place of each token (RoPE uses it).
# - `slot_mapping` = `block_table[r][pos // 16] * 16 + pos % 16`: the physical row where the token's
#   K and V are written before attention. Check one by hand:

# %%
i = req_ids.index("doc")
p = 50  # the document's token at position 50
block = tables_at[2]["doc"][p // 16]
print(f"position {p}: block_table[{p // 16}] = {block}, offset {p % 16} -> slot {block * 16 + p % 16}")
print("slot_mapping says:", meta.slot_mapping[qsl[i] + p - computed["doc"]].item())

# %% [markdown]
# - `seq_lens[r]` = context + chunk: how many cached positions request `r` reads. The document reads
#   90 (45 cached + its 45 new), each decode reads its whole history.
# - `logits_indices` = the last row of each request: one token is sampled per request; the document's
#   sample is thrown away because its prompt is not finished (§11.6).
#
# Paging moves K/V around; it must not change a single token. The same four requests, run one at a
# time (`max_num_seqs=1`, budget 128: no batching, no chunks), give the same greedy outputs:

# %%
alone = make_engine(budget=128, max_num_seqs=1)
for i, text in enumerate(chats):
    alone.add_request(f"chat-{i}", tok.encode(text), greedy)
alone.add_request("doc", doc, SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True))
while alone.has_unfinished_requests():
    alone.step()
print("batched, chunked, paged == one at a time:",
      all(engine.outputs[r].outputs[0].token_ids == alone.outputs[r].outputs[0].token_ids for r in engine.outputs))
print("steps: batched", len(engine.trace.steps), "vs one at a time", len(alone.trace.steps))

# %%
# NBVAL_IGNORE_OUTPUT
for r, o in engine.outputs.items():
    print(f"{r}: {tok.decode(o.outputs[0].token_ids)!r}")

# %% [markdown]
# ## 4.2 The causal rule for chunks · 分块的因果规则
#
# - Query row `i` of a chunk of `q` tokens after `ctx` cached tokens sits at position `ctx + i`; it may
#   see keys `0 .. ctx + i`. With `L = ctx + q` keys the mask is `tril(L - q)`: **bottom-right**
#   aligned.
# - PyTorch's `scaled_dot_product_attention(is_causal=True)` is **top-left** aligned (`tril(0)`): right
#   for a fresh prompt (`q == L`), wrong for a chunk and for a decode.
# - Tiny example: a chunk of 3 tokens after 5 cached ones (`L = 8`).

# %%
import torch.nn.functional as F

q_len, seq_len = 3, 8
top_left = torch.ones(q_len, seq_len, dtype=torch.bool).tril()  # what is_causal=True means
bottom_right = torch.ones(q_len, seq_len, dtype=torch.bool).tril(seq_len - q_len)

g = torch.Generator().manual_seed(0)
Q, K, V = (torch.randn(1, 1, n, 8, generator=g) for n in (q_len, seq_len, seq_len))
sdpa_causal = F.scaled_dot_product_attention(Q, K, V, is_causal=True)
print("is_causal=True is the top-left mask:   ",
      torch.allclose(sdpa_causal, F.scaled_dot_product_attention(Q, K, V, attn_mask=top_left)))
print("is_causal=True is the bottom-right mask:",
      torch.allclose(sdpa_causal, F.scaled_dot_product_attention(Q, K, V, attn_mask=bottom_right)))


def show(mask, title):
    print(title)
    print("         key  " + " ".join(str(j) for j in range(mask.shape[1])))
    for i, row in enumerate(mask.tolist()):
        print(f"  query {i} (pos {seq_len - q_len + i})  " + " ".join("x" if m else "." for m in row))


show(top_left, "top-left (is_causal=True): WRONG for a chunk")
show(bottom_right, "bottom-right tril(L - q): the chunk rule")

# %% [markdown]
# - With the top-left mask the chunk's first query (position 5) sees only key 0, not keys 0..5.
# - Now a tiny paged batch with all three shapes: a decode (`q = 1`), a chunk after context, and a
#   fresh prompt (`q = L`). Random Q/K/V, block size 4, scattered block tables, context already in the
#   cache. Three answers per request:
#   - `TorchAttentionBackend`, minivllm's CPU backend (per-request SDPA, bottom-right mask for chunks);
#   - `reference_attention`, a naive float64 oracle that reads the cache position by position;
#   - plain SDPA with `is_causal=True` on the same gathered keys: the bug.

# %%
from minivllm.attention.reference import reference_attention
from minivllm.attention.torch_backend import TorchAttentionBackend, visible_slots

tiny = build_attention_metadata(
    num_computed_tokens=[4, 5, 0],  # decode after 4 cached; chunk of 3 after 5; fresh prompt of 4
    num_scheduled_tokens=[1, 3, 4],
    block_ids=[[6, 2], [3, 7], [5]],
    block_size=4,
)
Hq, Hkv, D = 4, 2, 8
T = tiny.num_actual_tokens
q, k, v = (torch.randn(T, h, D, generator=g) for h in (Hq, Hkv, Hkv))
cache = torch.randn(2, 8, 4, Hkv, D, generator=g)  # 8 blocks of 4 slots; context K/V are random
scale = D**-0.5

backend = TorchAttentionBackend()
backend.prepare(tiny)
out_torch = backend.forward(q, k, v, cache.clone(), tiny, scale)
out_ref, cache_ref = reference_attention(q, k, v, cache, tiny, scale)

# The bug: gather the same keys, but let SDPA's is_causal=True place the diagonal.
flat = cache_ref.float().view(2, -1, Hkv, D)
slots = visible_slots(tiny).split(tiny.seq_lens_cpu)
kinds = [rp.kind for rp in tiny.plan.requests]
for r, qs in enumerate(zip(tiny.query_start_loc_cpu, tiny.query_start_loc_cpu[1:])):
    rows = slice(*qs)
    keys, vals = (flat[i, slots[r]].transpose(0, 1)[None] for i in (0, 1))
    wrong = F.scaled_dot_product_attention(q[rows].transpose(0, 1)[None], keys, vals, is_causal=True,
                                           scale=scale, enable_gqa=True)[0].transpose(0, 1)
    ok_torch = torch.allclose(out_torch[rows].double(), out_ref[rows], atol=1e-5)
    ok_wrong = torch.allclose(wrong.double(), out_ref[rows], atol=1e-5)
    print(f"request {r} ({kinds[r]:6}, q={qs[1] - qs[0]}, L={tiny.seq_lens_cpu[r]}): "
          f"torch backend == reference: {ok_torch}   is_causal=True == reference: {ok_wrong}")

# %% [markdown]
# - The fresh prompt hides the bug: there `q == L` and both alignments coincide.
# - The decode is the classic failure: one query row with top-left alignment sees key 0 only, so it
#   returns exactly `V[0]` (the first token's value) whatever the query:

# %%
r = 0  # the decode
keys, vals = (flat[i, slots[r]].transpose(0, 1)[None] for i in (0, 1))
wrong_decode = F.scaled_dot_product_attention(q[0:1].transpose(0, 1)[None], keys, vals, is_causal=True,
                                              scale=scale, enable_gqa=True)
print("decode with is_causal=True returns V[0]:",
      torch.allclose(wrong_decode[0, :, 0], vals[0].repeat_interleave(Hq // Hkv, 0)[:, 0]))

# %% [markdown]
# - Does it matter for real text? Run one 96-token prompt three ways on the real model:
#   1. budget 128: the whole prompt in one step (a fresh prompt, no chunk);
#   2. budget 32: three chunks of 32, the torch backend's bottom-right mask;
#   3. budget 32 with a backend that uses the top-left mask for chunks (the bug, nothing else changed).

# %%
class TopLeftChunks(TorchAttentionBackend):
    """The bug on purpose: a chunk after cached context gets SDPA's top-left causal mask."""

    def prepare(self, meta):
        super().prepare(meta)
        for rp in meta.plan.requests:
            if rp.kind == "chunk":
                rp.mask = torch.ones_like(rp.mask).tril()


prompt96 = doc[:96]
six = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
results = {}
for name, budget, bug in (("whole", 128, False), ("chunked", 32, False), ("chunked, top-left", 32, True)):
    e = make_engine(budget=budget)
    if bug:
        e.model_runner.attn_backend = TopLeftChunks()
    e.add_request("p", prompt96, six)
    while e.has_unfinished_requests():
        e.step()
    results[name] = e.outputs["p"].outputs[0].token_ids
    print(f"{name:18} prompt steps {[sum(s.prefill_tokens.values()) for s in e.trace.steps if s.prefill_tokens]}")
print("chunked == whole:          ", results["chunked"] == results["whole"])
print("chunked, top-left == whole:", results["chunked, top-left"] == results["whole"])

# %%
# NBVAL_IGNORE_OUTPUT
for name, ids in results.items():
    print(f"{name:18} {tok.decode(ids)!r}")

# %% [markdown]
# ## 4.3 Varlen packing vs padding · 变长打包与填充
#
# - The textbook batch is a rectangle: `R` requests x `max_query_len` query rows x `max_seq_len` keys,
#   shorter requests padded (and masked).
# - A mixed batch is the worst case for a rectangle: one long chunk and many one-token decodes.
# - minivllm (like vLLM) packs instead: `T` real rows, `query_start_loc` says where each request starts.
#
# First, the real step 2 from §4.1:

# %%
def padding_counts(meta):
    q_lens = [b - a for a, b in zip(meta.query_start_loc_cpu, meta.query_start_loc_cpu[1:])]
    R, T = meta.num_reqs, meta.num_actual_tokens
    padded_rows, padded_cells = R * meta.max_query_len, R * meta.max_query_len * meta.max_seq_len
    varlen_cells = sum(q * L for q, L in zip(q_lens, meta.seq_lens_cpu))
    return dict(requests=R, tokens=T, padded_rows=padded_rows, padded_cells=padded_cells, varlen_cells=varlen_cells)


def report(c):
    print(f"{c['requests']} requests, {c['tokens']} real query rows")
    print(f"  query rows : padded {c['padded_rows']:>9,}  packed {c['tokens']:>9,}  "
          f"wasted {c['padded_rows'] - c['tokens']:>9,} ({1 - c['tokens'] / c['padded_rows']:.0%})")
    print(f"  score cells: padded {c['padded_cells']:>9,}  varlen {c['varlen_cells']:>9,}  "
          f"wasted {c['padded_cells'] - c['varlen_cells']:>9,} ({1 - c['varlen_cells'] / c['padded_cells']:.0%})")


report(padding_counts(meta))

# %% [markdown]
# - "Score cells" = query x key pairs per head: what the attention kernel computes (and, padded,
#   allocates as a score matrix).
# - A bigger mixed batch, the shape a GPU server sees: 16 requests decoding at contexts 119..477 and a
#   1024-token document whose second 256-token chunk rides along (budget 272). The real Scheduler
#   makes it; the fake runner stands in for the model (only the shapes matter here).

# %%
from minivllm.config import CacheConfig, SchedulerConfig
from minivllm.core.scheduler import Scheduler
from minivllm.request import Request
from minivllm.worker.fake_runner import FakeModelRunner

sched = Scheduler(SchedulerConfig(max_num_batched_tokens=272, max_num_seqs=32, max_model_len=2048),
                  CacheConfig(block_size=16, num_gpu_blocks=400, enable_prefix_caching=False))
fake = FakeModelRunner(vocab_size=arch.vocab_size)


def fake_step():
    out = sched.schedule()
    tables = {r: sched.kv_cache_manager.get_block_ids(r) for r in out.req_ids}
    sched.update_from_output(out, fake.execute_model(out))
    return out, tables


for i in range(16):
    prompt = [3 + (7 * i + j) % 40000 for j in range(100 + 25 * i)]
    sched.add_request(Request(f"chat-{i:02d}", prompt, SamplingParams(max_tokens=300, ignore_eos=True)))
while sched.waiting or any(r.num_computed_tokens < r.num_prompt_tokens for r in sched.running):
    fake_step()
sched.add_request(Request("doc", [3 + (11 * j) % 40000 for j in range(1024)], SamplingParams(max_tokens=4)))
fake_step()
big_out, big_tables = fake_step()
ids = big_out.req_ids
big_computed = {r.req_id: r.num_computed_tokens for r in big_out.scheduled_new_reqs + big_out.scheduled_cached_reqs}
big = build_attention_metadata([big_computed[r] for r in ids], [big_out.num_scheduled_tokens[r] for r in ids],
                               [big_tables[r] for r in ids], block_size=16)
print("query lens:", [b - a for a, b in zip(big.query_start_loc_cpu, big.query_start_loc_cpu[1:])])
print("seq lens:  ", big.seq_lens_cpu)
report(padding_counts(big))

# %% [markdown]
# - Padding costs memory too. Per layer, in fp32, for SmolLM2's 9 query / 3 KV heads of 64 dims
#   (K/V gathered per request for attention):

# %%
def mib(n_floats):
    return f"{n_floats * 4 / 2**20:7.1f} MiB"


c = padding_counts(big)
R, mq, mL = big.num_reqs, big.max_query_len, big.max_seq_len
packed_kv = sum(big.seq_lens_cpu) * arch.num_kv_heads * arch.head_dim * 2
print(f"{'':14} {'padded':>11} {'packed':>11}")
print(f"{'queries':14} {mib(R * mq * arch.num_heads * arch.head_dim):>11} "
      f"{mib(c['tokens'] * arch.num_heads * arch.head_dim):>11}")
print(f"{'gathered K/V':14} {mib(R * mL * arch.num_kv_heads * arch.head_dim * 2):>11} {mib(packed_kv):>11}")
print(f"{'scores':14} {mib(c['padded_cells'] * arch.num_heads):>11} {mib(c['varlen_cells'] * arch.num_heads):>11}")

# %% [markdown]
# - Time: both ways on this batch, random Q/K/V with SmolLM2's head shapes, one layer.
#   - varlen: `TorchAttentionBackend` (one SDPA call per request over its own `L` keys);
#   - padded: one SDPA call over the `[R, heads, max_query_len, max_seq_len]` rectangle with a mask
#     (bottom-right rule inside, padding masked out).
# - Both must agree with the float64 reference first.

# %%
import time

from minivllm.attention.backend import write_kv_cache


def padded_attention(q, k, v, kv_cache, meta, scale):
    """Attention over a padded rectangle: every request gets max_query_len rows and max_seq_len keys."""
    write_kv_cache(k, v, kv_cache, meta.slot_mapping)
    R, mq, mL, B = meta.num_reqs, meta.max_query_len, meta.max_seq_len, meta.block_size
    flat_k, flat_v = kv_cache[0].flatten(0, 1), kv_cache[1].flatten(0, 1)
    Qp = q.new_zeros(R, mq, q.shape[1], q.shape[2])
    Kp = q.new_zeros(R, mL, flat_k.shape[1], q.shape[2])
    Vp = torch.zeros_like(Kp)
    mask = torch.zeros(R, mq, mL, dtype=torch.bool)
    qsl = meta.query_start_loc_cpu
    for r, L in enumerate(meta.seq_lens_cpu):
        n = qsl[r + 1] - qsl[r]
        pos = torch.arange(L)
        slots = meta.block_table[r, pos // B].long() * B + pos % B
        Qp[r, :n], Kp[r, :L], Vp[r, :L] = q[qsl[r] : qsl[r + 1]], flat_k[slots], flat_v[slots]
        mask[r, :n, :L] = torch.ones(n, L, dtype=torch.bool).tril(L - n)
        mask[r, n:, 0] = True  # padding rows: keep the softmax finite; they are thrown away
    o = F.scaled_dot_product_attention(Qp.transpose(1, 2), Kp.transpose(1, 2), Vp.transpose(1, 2),
                                       attn_mask=mask[:, None], scale=scale, enable_gqa=True).transpose(1, 2)
    return torch.cat([o[r, : qsl[r + 1] - qsl[r]] for r in range(R)])


T, D = big.num_actual_tokens, arch.head_dim
q, k, v = (torch.randn(T, h, D, generator=g) for h in (arch.num_heads, arch.num_kv_heads, arch.num_kv_heads))
cache = torch.randn(2, 400, 16, arch.num_kv_heads, D, generator=g)
scale = D**-0.5
ref, _ = reference_attention(q, k, v, cache, big, scale)
out_varlen = backend.forward(q, k, v, cache.clone(), big, scale)
out_padded = padded_attention(q, k, v, cache.clone(), big, scale)
print("varlen == reference:", torch.allclose(out_varlen.double(), ref, atol=1e-4))
print("padded == reference:", torch.allclose(out_padded.double(), ref, atol=1e-4))


def median_ms(fn, repeats=7):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * sorted(times)[repeats // 2]


def varlen_attention():
    backend.prepare(big)  # the per-step plan is part of the cost
    return backend.forward(q, k, v, cache, big, scale)


# %%
# NBVAL_IGNORE_OUTPUT
threads = torch.get_num_threads()
torch.set_num_threads(1)  # one thread: steadier timings on a shared or busy machine
varlen_ms = median_ms(varlen_attention)
padded_ms = median_ms(lambda: padded_attention(q, k, v, cache, big, scale))
torch.set_num_threads(threads)
print(f"varlen (per request): {varlen_ms:7.1f} ms per layer")
print(f"padded rectangle:     {padded_ms:7.1f} ms per layer ({padded_ms / varlen_ms:.1f}x)")
layers = arch.num_layers
print(f"x {layers} layers: {varlen_ms * layers / 1e3:.2f} s vs {padded_ms * layers / 1e3:.2f} s of attention per step")

# %%
print("padding is more than 2x slower than packing:", padded_ms > 2 * varlen_ms)

# %% [markdown]
# - The rectangle spends its time (and its memory) on the wasted cells counted above: 94% of them here.
# - On a GPU the same trade-off is why vLLM's kernels (FlashAttention varlen, the Triton unified
#   kernel) take `query_start_loc` and `seq_lens` and read K/V through the block table directly:
#   no gather, no padding, decode rows and chunk rows in one launch.
#
# At GPU scale (the simulator, Llama-2-7B on an A100 cost model, §11.1's workload of chats plus long
# prompts, budget 2048), how many query rows would a rectangle waste over the whole run?

# %%
from minivllm.lab.sim.run import demo_workload, simulate

sim = simulate(demo_workload(12), max_num_batched_tokens=2048, max_num_seqs=64, max_model_len=4096)
real_rows = padded_rows = mixed = 0
for s in sim.trace.steps:
    q_lens = [s.prefill_tokens.get(r, 0) + s.decode_tokens.get(r, 0)
              for r in set(s.prefill_tokens) | set(s.decode_tokens)]
    real_rows += sum(q_lens)
    padded_rows += len(q_lens) * max(q_lens)
    mixed += bool(s.prefill_tokens) and bool(s.decode_tokens)
print(f"{len(sim.trace.steps)} steps, {mixed} of them mixed (decodes + prompt chunks)")
print(f"query rows: packed {real_rows:,}, padded {padded_rows:,} ({padded_rows / real_rows:.1f}x)")

# %% [markdown]
# ## Summary
#
# - A block table maps a request's logical blocks to physical ones; `slot_mapping` turns every token of
#   the step into a physical cache row: `block_table[pos // B] * B + pos % B`.
# - Per step, the metadata is tiny: `query_start_loc`, `seq_lens`, `block_table`, `slot_mapping`,
#   `positions`, `logits_indices`. No "prefill" or "decode" flag anywhere.
# - A chunk after cached context needs the **bottom-right** causal rule; SDPA's `is_causal=True` is
#   top-left and silently breaks chunks and decodes (a fresh prompt hides the bug).
# - Packing the mixed batch back to back (varlen) avoids a padded rectangle that wastes most of its
#   rows, memory and time.

# %% [markdown]
# ## Exercises
#
# 1. Write `slot_mapping_for(num_computed, num_scheduled, block_table, block_size)`: the physical slot
#    of each of the request's scheduled tokens this step (a list of ints).
# 2. Write `chunk_mask(q_len, seq_len)`: the causal mask of one request as a list of `q_len` rows of
#    `seq_len` booleans (`True` = the query may see that key). The check measures the mask the torch
#    backend really applies.
# 3. Write `wasted_score_cells(query_lens, seq_lens)`: how many query x key cells (per head) padding the
#    step to a rectangle computes that packing does not. The check replays real scheduler steps.
#
# The check functions compare your answer with what the engine itself does. Solutions are in
# `ch04_solutions.ipynb`.

# %%
from minivllm.lab.exercises.ch04 import check_exercise_1, check_exercise_2, check_exercise_3


def slot_mapping_for(num_computed, num_scheduled, block_table, block_size):
    ...  # your code here


check_exercise_1(slot_mapping_for)


# %%
def chunk_mask(q_len, seq_len):
    ...  # your code here


check_exercise_2(chunk_mask)


# %%
def wasted_score_cells(query_lens, seq_lens):
    ...  # your code here


check_exercise_3(wasted_score_cells)
