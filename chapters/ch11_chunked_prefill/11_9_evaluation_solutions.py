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
# # Chapter 11.9-11.10 · Solutions · 习题解答

# %% [markdown]
# ## Exercise 1
#
# - TTFT: from arrival to the first output token, queueing and every prefill chunk included.
# - TPOT: the decode time spread over the tokens after the first, `(last - first) / (n - 1)`. It is
#   undefined for a single token.

# %%
from minivllm.lab.exercises.ch11_9 import check_exercise_1, check_exercise_2, check_exercise_3


def ttft_and_tpot(arrival_time, token_times):
    ttft = token_times[0] - arrival_time
    n = len(token_times)
    tpot = (token_times[-1] - token_times[0]) / (n - 1) if n > 1 else None
    return ttft, tpot


check_exercise_1(ttft_and_tpot)


# %% [markdown]
# ## Exercise 2
#
# - The prompt takes `m = ceil(prompt_len / chunk)` steps. Chunk `i` (from 0) finds `i * chunk` tokens
#   already in the cache and reads them all.
# - In total `chunk * (0 + 1 + ... + (m - 1)) = chunk * m * (m - 1) / 2`: it grows with the square of the
#   number of chunks.

# %%
def kv_tokens_read(prompt_len, chunk):
    m = -(-prompt_len // chunk)
    return chunk * m * (m - 1) // 2


check_exercise_2(kv_tokens_read)


# %% [markdown]
# ## Exercise 3
#
# - Only full blocks have a hash, so only they can be found again: the computed tokens rounded down to a
#   multiple of the block size.
# - The last-token rule caps the hit at `num_tokens - 1` (the logits of the last token must be computed).
#   A preempted request never reaches it (its last sampled token is not computed yet); a repeated prompt
#   whose tokens fill whole blocks does: a 64-token prompt seen before gets 48 tokens back, not 64.

# %%
def tokens_back(num_tokens, num_computed, block_size):
    return min(num_computed, num_tokens - 1) // block_size * block_size


check_exercise_3(tokens_back)
