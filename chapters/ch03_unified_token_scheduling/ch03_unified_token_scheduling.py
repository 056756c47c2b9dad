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
# # Chapter 3 · Unified token scheduling · 统一的 token 调度
#
# - A request is a list of tokens and **one integer**: `num_computed_tokens`.
# - Each step the scheduler hands out a **token budget** (`max_num_batched_tokens`); a request's share
#   is just how far its integer may move.
# - "Prefill" and "decode" are not states: they are what it looks like when the integer is far behind
#   (many tokens to compute) or one token behind (the last sampled token).
#
# Everything below runs the real `minivllm` scheduler; the last section runs the real model.

# %%
from minivllm.config import CacheConfig, SchedulerConfig
from minivllm.core.scheduler import Scheduler
from minivllm.request import Request
from minivllm.sampling_params import SamplingParams
from minivllm.worker.fake_runner import FakeModelRunner


def make_scheduler(budget, max_num_seqs=8, threshold=0, num_blocks=200):
    return Scheduler(
        SchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=max_num_seqs, max_model_len=1024,
                        long_prefill_token_threshold=threshold),
        CacheConfig(block_size=16, num_gpu_blocks=num_blocks, enable_prefix_caching=False),
    )


# %% [markdown]
# ## 3.1 One request, one integer · 一个请求，一个整数
#
# - One request with a 100-token prompt, a budget of 32 tokens per step, 3 output tokens.
# - Watch `num_computed_tokens` chase `num_tokens`: four steps of prompt (32 + 32 + 32 + 4), then one
#   token per step.
# - The request samples a token only in the step where its chunk reaches the end of its tokens.

# %%
scheduler = make_scheduler(budget=32)
runner = FakeModelRunner()  # a deterministic stand-in for the model: no torch needed here
request = Request("A", list(range(100)), SamplingParams(max_tokens=3, ignore_eos=True))
scheduler.add_request(request)

print(f"{'step':>4} {'scheduled':>9} {'computed before':>15} {'computed after':>14} {'num_tokens':>10}  sampled")
step = 0
while scheduler.has_unfinished_requests():
    before = request.num_computed_tokens
    out = scheduler.schedule()
    result = scheduler.update_from_output(out, runner.execute_model(out))
    sampled = [o.new_token_ids for o in result.outputs]
    print(f"{step:>4} {out.num_scheduled_tokens['A']:>9} {before:>15} {before + out.num_scheduled_tokens['A']:>14} "
          f"{request.num_tokens:>10}  {sampled[0] if sampled else '-'}")
    step += 1
print("finished:", request.get_finished_reason())

# %% [markdown]
# - Steps 0-3 are the prefill, cut into chunks by the budget; nothing is sampled until step 3.
# - From step 3 on, `num_tokens` grows by one per step and `num_computed_tokens` stays one behind:
#   that is decode.
# - There is no `is_prefill` flag anywhere: the phase is *derived* from the two numbers.

# %% [markdown]
# ## 3.2 The step table · 步骤表
#
# - Three chats (12-token prompts) decode; a 200-token prompt arrives at step 2.
# - Each cell: `P<n>` = n prompt tokens in this step, `D<n>` = a decode step; `used/budget` is how much
#   of the 64-token budget was spent.
# - RUNNING requests are served first (the chats keep decoding), the newcomer fills what is left.

# %%
from minivllm.lab.cli.steps import demo

print(demo(max_num_batched_tokens=64))

# %% [markdown]
# - In steps 2-5 the long prompt takes the 61 tokens the three decodes leave: a **mixed batch** of
#   decode tokens and prefill chunks, in one forward pass.
# - The same workload with chunking switched off: the whole prompt waits for one step that can hold it.

# %%
print(demo(max_num_batched_tokens=256, enable_chunked_prefill=False))

# %% [markdown]
# ## 3.3 Prefill vs decode cost per token · 预填充与解码的每 token 成本
#
# - Now the real model (SmolLM2-135M on this CPU).
# - One step with a 256-token prompt chunk, then single-token decode steps, timed by the engine.
# - A prompt token is much cheaper than a decode token: prefill is one big matrix multiply over many
#   tokens; a decode step reads every weight to produce a single token.

# %%
from minivllm import LLM

llm = LLM("smollm2", max_num_batched_tokens=256, max_num_seqs=4, max_model_len=1024, num_gpu_blocks=256)
engine = llm.engine
prompt = engine.tokenizer.encode("The quick brown fox jumps over the lazy dog. " * 40)[:256]
engine.add_request("p", prompt, SamplingParams(max_tokens=9, temperature=0.0, ignore_eos=True))
while engine.has_unfinished_requests():
    engine.step()
steps = engine.trace.steps
print("tokens per step:", [s.num_scheduled_tokens for s in steps])

# %%
# NBVAL_IGNORE_OUTPUT
prefill = steps[0]
decodes = steps[2:]  # skip the first decode (warm-up effects)
prefill_ms_per_token = 1e3 * prefill.duration / prefill.num_scheduled_tokens
decode_ms_per_token = 1e3 * sum(s.duration for s in decodes) / len(decodes)
print(f"prefill: {1e3 * prefill.duration:.0f} ms for 256 tokens = {prefill_ms_per_token:.2f} ms per token")
print(f"decode:  {decode_ms_per_token:.1f} ms per token (one token per step)")
print(f"a decode token costs {decode_ms_per_token / prefill_ms_per_token:.0f}x a prompt token")

# %%
print("decode token dearer than a prompt token:", decode_ms_per_token > 3 * prefill_ms_per_token)

# %% [markdown]
# - This is why mixing helps: the decode steps leave the machine mostly idle, and prompt chunks can
#   ride along almost for free (§11.2).

# %% [markdown]
# ## Summary
#
# - One integer, `num_computed_tokens`, is the whole progress of a request.
# - The scheduler gives each step a token budget: RUNNING requests first, then WAITING ones.
# - Prefill chunks and decodes share a step; nobody asks "is this prefill?".
# - Per token, prompt work is far cheaper than decode work: the reason to mix them.

# %% [markdown]
# ## Exercises
#
# 1. Write `steps_until_first_token(prompt_len, budget)`: for a lone request (nothing else running,
#    chunked prefill on, no threshold), in which step (counting from 1) does it get its first token?
# 2. Add `long_prefill_token_threshold`: `steps_with_threshold(prompt_len, budget, threshold)`
#    (0 means no threshold).
#
# The check functions compare your answer with what the engine itself does. Solutions are in
# `ch03_solutions.ipynb`.

# %%
from minivllm.lab.exercises.ch03 import check_exercise_1, check_exercise_2


def steps_until_first_token(prompt_len, budget):
    ...  # your code here


check_exercise_1(steps_until_first_token)


# %%
def steps_with_threshold(prompt_len, budget, threshold):
    ...  # your code here


check_exercise_2(steps_with_threshold)
