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
# # Chapter 11.3-11.4 · Solutions · 习题解答

# %% [markdown]
# ## Exercise 1
#
# - Keep each request's remaining prompt tokens. Per step: first the running requests (those already
#   admitted, in admission order), then the waiting ones (in arrival order), each taking
#   `min(remaining, budget left)`, until the budget is spent.
# - With one output token per request, a request leaves as soon as its prompt is done (its last chunk
#   samples that token), so there are no decodes to serve.
# - Admission order is index order here, so "running, then waiting" is simply index order over the
#   unfinished requests.

# %%
from minivllm.lab.exercises.ch11_3 import check_exercise_1, check_exercise_2


def budget_schedule(prompt_lens, budget):
    remaining = list(prompt_lens)
    steps = []
    while any(remaining):
        left, step = budget, {}
        for i, need in enumerate(remaining):
            if need and left:
                step[i] = min(need, left)
                remaining[i] -= step[i]
                left -= step[i]
        steps.append(step)
    return steps


check_exercise_1(budget_schedule)


# %% [markdown]
# ## Exercise 2
#
# - The integer is the running sum of the tokens the request was scheduled (prefill chunks, decodes and
#   drafts), and a preemption sets it back to 0 (the KV cache is dropped; it will be recomputed).

# %%
def computed_after_each_step(trace, req_id):
    value, out = 0, []
    for s in trace.steps:
        if req_id in s.preempted:
            value = 0
        value += s.prefill_tokens.get(req_id, 0) + s.decode_tokens.get(req_id, 0) + s.spec_tokens.get(req_id, 0)
        out.append(value)
    return out


check_exercise_2(computed_after_each_step)
