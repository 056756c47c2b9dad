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
# # Chapter 5 · Solutions · 习题解答

# %% [markdown]
# ## Exercise 1
#
# - Hits come in whole blocks and stop at the first block that differs: at most `shared_len // block_size`
#   blocks.
# - The last-token rule: the last prompt token is never a hit, so at most
#   `(prompt_len - 1) // block_size` blocks can be searched.

# %%
from collections import Counter

from minivllm.lab.exercises.ch05 import check_exercise_1, check_exercise_2


def cache_hit_tokens(prompt_len, shared_len, block_size):
    return min(shared_len // block_size, (prompt_len - 1) // block_size) * block_size


check_exercise_1(cache_hit_tokens)


# %% [markdown]
# ## Exercise 2
#
# - A fresh pool hands out blocks from the head of `[1, 2, ..., num_gpu_blocks - 1]` (block 0 is the
#   null block), so the blocks nobody got stay at the head, in order.
# - Then each request, in order, drops one reference on each of its blocks, **tail-first**; a block
#   joins the tail of the queue when its count reaches 0.

# %%
def free_queue_after(num_gpu_blocks, block_tables):
    refs = Counter(b for table in block_tables for b in table)
    queue = [b for b in range(1, num_gpu_blocks) if b not in refs]
    for table in block_tables:
        for b in reversed(table):
            refs[b] -= 1
            if refs[b] == 0:
                queue.append(b)
    return queue


check_exercise_2(free_queue_after)
