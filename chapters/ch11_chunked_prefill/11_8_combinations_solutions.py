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
# # Chapter 11.8 · Solutions · 习题解答

# %% [markdown]
# ## Exercise 1
#
# - The prefix cache returns only **full** blocks. The first request's blocks that lie entirely inside the
#   shared prefix are reused: `shared_len // block_size` of them.
# - The last-token rule: a hit never covers the last prompt token (its logits are needed), so the hit is
#   at most `prompt_len - 1` tokens, rounded down to a block.
# - The request is billed for everything else.

# %%
from minivllm.lab.exercises.ch11_8 import check_exercise_1, check_exercise_2, check_exercise_3


def tokens_billed(prompt_len, shared_len, block_size):
    hit = min(shared_len, prompt_len - 1) // block_size * block_size
    return prompt_len - hit


check_exercise_1(tokens_billed)


# %% [markdown]
# ## Exercise 2
#
# - RUNNING requests are served first. Each decoding request takes its last sampled token plus its drafts:
#   `1 + num_drafts` tokens.
# - The new prompt gets what is left of the budget, or nothing.

# %%
def chunk_beside_drafts(budget, num_decodes, num_drafts):
    return max(budget - num_decodes * (1 + num_drafts), 0)


check_exercise_2(chunk_beside_drafts)


# %% [markdown]
# ## Exercise 3
#
# - Under `policy="priority"` the victim is the running request with the largest `(priority, arrival_time)`:
#   the least important one, and among equals the one that arrived last.

# %%
def priority_victim(running):
    return max(running, key=lambda r: (r[1], r[2]))[0]


check_exercise_3(priority_victim)
