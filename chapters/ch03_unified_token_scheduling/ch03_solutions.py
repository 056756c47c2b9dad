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
# # Chapter 3 · Solutions · 习题解答

# %% [markdown]
# ## Exercise 1
#
# - A lone request advances by the whole budget each step, so its prompt needs `ceil(prompt_len / budget)`
#   steps, and the first token comes out of the last of them.

# %%
from minivllm.lab.exercises.ch03 import check_exercise_1, check_exercise_2


def steps_until_first_token(prompt_len, budget):
    return -(-prompt_len // budget)


check_exercise_1(steps_until_first_token)


# %% [markdown]
# ## Exercise 2
#
# - The threshold caps one request's chunk: each step advances by `min(budget, threshold)`.

# %%
def steps_with_threshold(prompt_len, budget, threshold):
    chunk = min(budget, threshold) if threshold > 0 else budget
    return -(-prompt_len // chunk)


check_exercise_2(steps_with_threshold)
