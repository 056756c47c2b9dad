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
# # Chapter 11.1-11.2 · Solutions · 习题解答

# %% [markdown]
# ## Exercise 1
#
# - The running chats are served first: each takes its one decode token, so every step leaves
#   `budget - num_decoding` tokens for the prompt.
# - The prompt therefore needs `ceil(prompt_len / (budget - num_decoding))` steps. With as many decodes as
#   the budget minus one, the prompt crawls at one token per step.

# %%
from minivllm.lab.exercises.ch11_1 import check_exercise_1, check_exercise_2, gpu_scene


def prefill_steps(prompt_len, budget, num_decoding):
    return -(-prompt_len // (budget - num_decoding))


check_exercise_1(prefill_steps)


# %% [markdown]
# ## Exercise 2
#
# - Run the scene once per budget and take the chats' worst inter-token gap from the trace
#   (`RequestRecord.itls`); keep the budgets within the SLO and return the largest.
# - Smaller budgets always help the chats here, so the answer is the knee: the largest budget that still
#   meets the SLO (and so the best TTFT for the long prompt, §11.2.3).

# %%
def largest_budget_within(slo_ms, budgets):
    ok = []
    for budget in budgets:
        trace = gpu_scene(budget).trace
        worst = max(gap for req_id, rec in trace.requests.items() if req_id.startswith("chat") for gap in rec.itls)
        if worst * 1e3 <= slo_ms:
            ok.append(budget)
    return max(ok) if ok else None


check_exercise_2(largest_budget_within)
