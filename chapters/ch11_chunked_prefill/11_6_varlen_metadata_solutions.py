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
# # Chapter 11.6 · Solutions · 习题解答

# %% [markdown]
# ## Exercise 1
#
# - A running sum that starts at 0: request r owns rows `qsl[r] : qsl[r + 1]`.

# %%
from itertools import accumulate

from minivllm.lab.exercises.ch11_6 import check_exercise_1, check_exercise_2, check_exercise_3


def query_start_loc(num_scheduled):
    return [0, *accumulate(num_scheduled)]


check_exercise_1(query_start_loc)


# %% [markdown]
# ## Exercise 2
#
# - The new tokens sit at positions `num_computed, num_computed + 1, ...`; each position is looked up in
#   the block table (logical block `pos // block_size`) and offset inside the block.

# %%
def slot_mapping(num_computed, num_scheduled, block_ids, block_size):
    positions = range(num_computed, num_computed + num_scheduled)
    return [block_ids[p // block_size] * block_size + p % block_size for p in positions]


check_exercise_2(slot_mapping)


# %% [markdown]
# ## Exercise 3
#
# - One query row is a decode (even the very first token of a 1-token prompt); rows = context is a fresh
#   prompt (plain causal triangle); anything else is a chunk after cached context (bottom-right mask).

# %%
def attention_kind(num_computed, num_scheduled):
    if num_scheduled == 1:
        return "decode"
    return "causal" if num_computed == 0 else "chunk"


check_exercise_3(attention_kind)
