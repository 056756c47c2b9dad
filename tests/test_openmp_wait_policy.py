"""``import minivllm`` chooses OpenMP's wait policy only when nobody else has (minivllm/__init__.py).

libgomp reads ``OMP_WAIT_POLICY`` and ``GOMP_SPINCOUNT`` once, when torch first loads it, so minivllm sets
them (PASSIVE, 1000 spins before sleeping) only if it is imported before torch and ``OMP_WAIT_POLICY`` is
unset. Each case runs in a fresh interpreter: this one has imported torch long ago.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_SHOW = "import json, os; {first} print(json.dumps([os.environ.get(v) for v in ('OMP_WAIT_POLICY', 'GOMP_SPINCOUNT')]))"


def _env_after(first: str, **env: str) -> list[str | None]:
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    code = _SHOW.format(first=first)
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_minivllm_first_sets_passive_with_a_short_spin() -> None:
    assert _env_after("import minivllm;") == ["PASSIVE", "1000"]


@pytest.mark.parametrize("policy", ["ACTIVE", "PASSIVE"])
def test_a_policy_set_by_the_user_is_left_alone(policy: str) -> None:
    # A spin count added to ACTIVE would cut its spinning short: nothing is added.
    assert _env_after("import minivllm;", OMP_WAIT_POLICY=policy) == [policy, None]


def test_a_spin_count_set_by_the_user_is_kept() -> None:
    assert _env_after("import minivllm;", GOMP_SPINCOUNT="0") == ["PASSIVE", "0"]


def test_torch_first_leaves_openmp_to_its_defaults() -> None:
    # libgomp has read the environment already: setting it now would say something untrue.
    assert _env_after("import torch, minivllm;") == [None, None]
