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
# # Chapter 4 · Solutions · 习题解答

# %% [markdown]
# ## Exercise 1
#
# - The scheduled tokens sit at positions `num_computed .. num_computed + num_scheduled - 1`.
# - Position `p` lives in logical block `p // block_size`, at offset `p % block_size`; the block table
#   turns the logical block into a physical one.

# %%
from minivllm.lab.exercises.ch04 import check_exercise_1, check_exercise_2, check_exercise_3


def slot_mapping_for(num_computed, num_scheduled, block_table, block_size):
    positions = range(num_computed, num_computed + num_scheduled)
    return [block_table[p // block_size] * block_size + p % block_size for p in positions]


check_exercise_1(slot_mapping_for)


# %% [markdown]
# ## Exercise 2
#
# - Query row `i` sits at position `seq_len - q_len + i` and may see every key up to that position:
#   the bottom-right rule. It covers the decode (`q_len = 1`: everything) and the fresh prompt
#   (`q_len = seq_len`: the square causal mask) as special cases.

# %%
def chunk_mask(q_len, seq_len):
    context = seq_len - q_len
    return [[key <= context + i for key in range(seq_len)] for i in range(q_len)]


check_exercise_2(chunk_mask)


# %% [markdown]
# ## Exercise 3
#
# - Padded: every request gets `max(query_lens)` rows and `max(seq_lens)` keys.
# - Packed (varlen): request `r` computes `query_lens[r] * seq_lens[r]` cells.

# %%
def wasted_score_cells(query_lens, seq_lens):
    padded = len(query_lens) * max(query_lens) * max(seq_lens)
    return padded - sum(q * L for q, L in zip(query_lens, seq_lens))


check_exercise_3(wasted_score_cells)
