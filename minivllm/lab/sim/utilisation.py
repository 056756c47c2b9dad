"""Compute utilisation of simulated steps: useful FLOPs / (step time x peak FLOP/s) (§11.7, curve 4).

The book's fourth curve is "GPU 利用率 vs chunk_size (Plateau)". Tokens per step is not a
utilisation; this module prices each step's useful work with the cost model's FLOP fields
(``flops_per_token`` for the linear layers, ``attn_flops_per_pair`` for attention) and divides
by what the GPU could have done in the step's time (``step_time x peak_flops``). A decode step
is memory bound (weights and KV read, ~5 ms fixed cost), so its share of peak is small; a
full prefill step approaches the MFU the preset was priced at (0.72 for the A100 preset).
Mirrors the MFU Vidur computes per batch (``vidur/utils/mfu_calculator.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from minivllm.lab.sim.cost_model import CostModel, StepShape, shapes_from_steps


def _check(model: CostModel) -> None:
    if model.peak_flops <= 0 or model.flops_per_token <= 0:
        raise ValueError(
            f"cost model {model.name!r} has no FLOP counts (peak_flops {model.peak_flops}, flops_per_token "
            f"{model.flops_per_token}); both must be > 0 to compute a utilisation."
        )


def step_flops(model: CostModel, shape: Iterable[tuple[int, int]]) -> float:
    """Useful FLOPs of one step: linear layers per scheduled token plus attention per causal pair."""
    shape = list(shape)
    tokens = sum(q for q, _ in shape)
    pairs = sum(q * k + q * (q + 1) / 2 for q, k in shape)
    return model.flops_per_token * tokens + model.attn_flops_per_pair * pairs


def step_utilisation(model: CostModel, shape: StepShape) -> float:
    """Fraction of peak compute one step of this shape uses in the cost model's time (0 for an empty step)."""
    _check(model)
    t = model.step_time(shape)
    return step_flops(model, shape) / (t * model.peak_flops) if t > 0 else 0.0


def trace_utilisation(model: CostModel, steps: Sequence[Any]) -> float:
    """Busy-time-weighted utilisation of a run: all steps' useful FLOPs / (their total time x peak).

    ``steps`` are StepRecords (``trace.steps``); their shapes are rebuilt with ``shapes_from_steps``
    and priced again by ``model``, so this is the utilisation of a simulated run priced by the same model.
    """
    _check(model)
    shapes = [s for s in shapes_from_steps(steps) if s]
    busy = sum(model.step_time(s) for s in shapes)
    return sum(step_flops(model, s) for s in shapes) / (busy * model.peak_flops) if busy > 0 else 0.0
