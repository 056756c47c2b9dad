"""Fit a cost model's coefficients to measured steps, and report the held-out error (§11.7).

:func:`calibrate` fits the COEFFICIENTS of :class:`minivllm.lab.sim.cost_model.CostModel` (non-negative; least
absolute relative error by iteratively reweighted least squares, or relative least squares) and the ridge
point, on a random share of the steps, and reports the errors on the rest. ``python -m minivllm.lab.sim.calibrate``
measures the steps on the real model; :mod:`minivllm.lab.sim.gpu_presets` builds the GPU presets from profiles
instead. Mirrors the profiling-then-regression step of Vidur (``vidur/execution_time_predictor/``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from minivllm.lab.sim.cost_model import COEFFICIENTS, CostModel, StepSample, samples_from_steps


@dataclass
class CalibrationReport:
    """How well the fitted model predicts steps it was not fitted on (absolute percentage errors)."""

    num_train: int
    num_test: int
    median_ape: float  # held-out
    p90_ape: float  # held-out
    train_median_ape: float
    ridge_tokens: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least squares with c >= 0: refit without the most negative coefficient until none is negative."""
    active = list(range(a.shape[1]))
    while True:
        coef = np.zeros(a.shape[1])
        if active:
            coef[active] = np.linalg.lstsq(a[:, active], b, rcond=None)[0]
        if coef.min() >= 0:
            return coef
        active.remove(int(np.argmin(coef)))


def _fit(x: np.ndarray, target: np.ndarray, scale: np.ndarray, robust: bool) -> tuple[np.ndarray, float]:
    """Coefficients minimising the residuals relative to ``scale``: squared, or (robust) absolute via
    iteratively reweighted least squares, so that a few steps slowed by other processes do not pull the fit."""
    w = 1.0 / scale
    for _ in range(30 if robust else 1):
        coef = _nnls(x * w[:, None], target * w)
        r = np.abs(x @ coef - target) / scale
        w = 1.0 / (scale * np.sqrt(np.maximum(r, 1e-4)))
    return coef, float(np.sum(r) if robust else np.sum(r**2))


def ape(model: CostModel, samples: Sequence[StepSample]) -> np.ndarray:
    """Absolute percentage errors of the model's step times."""
    pred = np.array([model.step_time(s.shape) for s in samples])
    true = np.array([s.duration for s in samples])
    return np.abs(pred - true) / true * 100.0


def calibrate(
    records: Sequence[Any],
    base: CostModel | None = None,
    fit: Sequence[str] = (*COEFFICIENTS, "ridge_tokens"),
    holdout: float = 0.3,
    seed: int = 0,
    max_ridge: int = 1024,
    robust: bool = True,
) -> tuple[CostModel, CalibrationReport]:
    """Fit the ``fit`` coefficients (non-negative; least absolute relative error, or with ``robust=False``
    relative least squares) and ``ridge_tokens`` (grid over the observed token counts <= max_ridge) on a
    random ``1 - holdout`` share of the steps; report the errors on the rest. ``records`` are StepSamples
    or StepRecords (contexts from :func:`shapes_from_steps`); coefficients not in ``fit`` keep ``base``'s."""
    bad = sorted(set(fit) - {*COEFFICIENTS, "ridge_tokens"})
    if bad:
        raise ValueError(f"cannot fit {bad}; allowed: {[*COEFFICIENTS, 'ridge_tokens']}.")
    if records and not isinstance(records[0], StepSample):
        records = samples_from_steps(records)
    samples = [s for s in records if s.shape and s.duration > 0]
    if len(samples) < len(fit) + 1:
        raise ValueError(f"calibrate needs at least {len(fit) + 1} non-empty steps, got {len(samples)}.")
    order = np.random.default_rng(seed).permutation(len(samples))
    num_test = int(round(len(samples) * holdout)) if len(samples) >= 10 else 0
    test = [samples[i] for i in order[:num_test]]
    train = [samples[i] for i in order[num_test:]]
    base = base or CostModel()
    cols = [COEFFICIENTS.index(c) for c in fit if c != "ridge_tokens"]
    held = base.coefficients * np.isin(np.arange(len(COEFFICIENTS)), cols, invert=True)
    y = np.array([s.duration for s in train])
    x = np.array([CostModel(**{**base.to_dict(), "ridge_tokens": 0}).features(s.shape) for s in train])
    tokens = x[:, 1].copy()
    ridges = sorted({0, *(int(t) for t in tokens if t <= max_ridge)}) if "ridge_tokens" in fit else [base.ridge_tokens]
    best: tuple[float, int, np.ndarray] | None = None
    for ridge in ridges:
        x[:, 1] = np.maximum(tokens, ridge)
        fixed = x @ held
        coef, err = _fit(x[:, cols], y - fixed, y, robust)
        if best is None or err < best[0] * (1 - 1e-9):
            best = (err, ridge, coef)
    assert best is not None
    _, ridge, coef = best
    values = {COEFFICIENTS[c]: float(v) for c, v in zip(cols, coef)}
    model = CostModel(**{**base.to_dict(), **values, "ridge_tokens": ridge})
    test_err = ape(model, test) if test else ape(model, train)
    report = CalibrationReport(
        num_train=len(train),
        num_test=len(test),
        median_ape=float(np.median(test_err)),
        p90_ape=float(np.percentile(test_err, 90)),
        train_median_ape=float(np.median(ape(model, train))),
        ridge_tokens=ridge,
    )
    return model, report
