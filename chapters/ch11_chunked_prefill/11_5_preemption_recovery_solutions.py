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
# # Chapter 11.5 · Solutions · 习题解答

# %% [markdown]
# ## Exercise 1
#
# - Replay the requests on the real Scheduler with the fake model and stop at the first step whose
#   `SchedulerOutput` lists a preempted request.

# %%
from minivllm.config import CacheConfig, SchedulerConfig
from minivllm.core.scheduler import Scheduler
from minivllm.lab.exercises.ch11_5 import check_exercise_1, check_exercise_2
from minivllm.lab.testbench import run_steps
from minivllm.request import Request
from minivllm.sampling_params import SamplingParams


def first_preemption(prompt_lens, max_tokens, num_gpu_blocks):
    scheduler = Scheduler(
        SchedulerConfig(max_num_batched_tokens=256, max_num_seqs=8, max_model_len=512),
        CacheConfig(block_size=16, num_gpu_blocks=num_gpu_blocks),
    )
    for i, (p, m) in enumerate(zip(prompt_lens, max_tokens)):
        ids = list(range(1000 * (i + 1), 1000 * (i + 1) + p))
        scheduler.add_request(Request(f"r{i}", ids, SamplingParams(max_tokens=m, ignore_eos=True)))
    for step, (out, _) in enumerate(run_steps(scheduler)):
        if out.preempted_req_ids:
            return step, min(out.preempted_req_ids)
    return None


check_exercise_1(first_preemption)

# %% [markdown]
# - The victim is always the newest running request; the step is when the requests' combined blocks
#   first exceed the pool (`num_gpu_blocks - 1` usable blocks).

# %% [markdown]
# ## Exercise 2
#
# - After `k` steps a lone request has computed `prompt_len + k - 1` tokens and holds one more (the token
#   it sampled last, never computed).
# - The prefix cache returns its full blocks: `computed // block_size * block_size` tokens. The resume step
#   computes everything else, the partial block plus the new token.

# %%
def resume_split(prompt_len, steps_before, block_size):
    computed = prompt_len + steps_before - 1
    cached = computed // block_size * block_size
    return cached, computed + 1 - cached


check_exercise_2(resume_split)
