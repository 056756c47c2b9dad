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
# # Chapter 11.7 · Solutions · 习题解答

# %% [markdown]
# ## Exercise 1
#
# - The decodes are RUNNING, so they are served first: one token each. The prompt gets what is left,
#   `budget - num_decodes` tokens per step, from the step it arrives in until its last chunk, which
#   samples the first token.

# %%
from minivllm.lab.exercises.ch11_7 import check_exercise_1, check_exercise_2, check_exercise_3


def steps_to_first_token(prompt_len, num_decodes, budget):
    per_step = budget - num_decodes
    return -(-prompt_len // per_step)


check_exercise_1(steps_to_first_token)


# %% [markdown]
# ## Exercise 2
#
# - The waiting loop takes the prompts in order; each gets `min(its tokens, threshold, budget left)` until
#   the budget is spent.

# %%
def first_step_chunks(prompt_lens, budget, threshold):
    left, chunks = budget, []
    for p in prompt_lens:
        n = min(p, threshold) if threshold > 0 else p
        n = min(n, left)
        chunks.append(n)
        left -= n
    return chunks


check_exercise_2(first_step_chunks)

# %% [markdown]
# ## Exercise 3
#
# - One simulator run per budget (cached, since the three cases share budgets), then the best throughput
#   among the budgets whose ITL p99 meets the SLO.

# %%
from functools import cache

from minivllm.config import EngineConfig
from minivllm.engine.llm_engine import LLMEngine
from minivllm.lab.metrics.summary import summarize
from minivllm.lab.sim.cost_model import CostModel
from minivllm.lab.sim.run import run_workload
from minivllm.lab.sim.sim_runner import SimRunner
from minivllm.lab.sim.workload import make_workload


@cache
def run(budget):
    w = make_workload("azure_conv", 40, seed=1, vocab_size=32000, max_model_len=4096)
    config = EngineConfig.from_kwargs(model="none", max_num_batched_tokens=budget, max_num_seqs=32, max_model_len=4096)
    engine = LLMEngine(config, model_runner=SimRunner(CostModel.from_preset("llama2_7b_a100"), config=config))
    run_workload(engine, w.requests)
    m = summarize(engine.trace)
    return m.output_throughput, m.itl.p99 * 1e3


def best_budget(budgets, itl_p99_slo_ms):
    ok = [b for b in budgets if run(b)[1] <= itl_p99_slo_ms]
    return max(ok, key=lambda b: run(b)[0]) if ok else None


check_exercise_3(best_budget)

# %%
from minivllm.lab.metrics.shape import describe

BUDGETS = [64, 128, 256, 512, 1024, 2048, 4096]
print(f"{'budget':>6} {'out tok/s':>9} {'ITL p99 (ms)':>12}")
for b in BUDGETS:
    thr, itl = run(b)
    print(f"{b:>6} {thr:>9.0f} {itl:>12.1f}")
thr, itl = [run(b)[0] for b in BUDGETS], [run(b)[1] for b in BUDGETS]
print(f"Throughput {describe(BUDGETS, thr)}; ITL p99 {describe(BUDGETS, itl)}: past the knee the SLO, not throughput, "
      "decides the budget.")
