"""A notebook that explains a step's price uses the terms the simulator adds up (``CostModel.terms``: host,
linear, attention, KV reads), never a cost-model field that is 0 in the preset it prices with (a stale
explanation: e.g. ``overhead_s``, ``per_token_s`` and ``ridge_tokens`` are 0 in ``llama2_7b_a100``)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import nbformat
import pytest

from minivllm.lab.sim.cost_model import CostModel

CHAPTERS = Path(__file__).resolve().parent.parent / "chapters"
PRESET = re.compile(r"""from_preset\(\s*["']([\w.]+)["']""")


def zero_fields(preset: str) -> set[str]:
    model = CostModel.from_preset(preset)
    return {f.name for f in dataclasses.fields(model) if getattr(model, f.name) in (0, 0.0)}


def test_the_a100_preset_has_the_fields_this_test_looks_for():
    assert {"overhead_s", "per_token_s", "ridge_tokens"} <= zero_fields("llama2_7b_a100")


@pytest.mark.parametrize("path", sorted(CHAPTERS.glob("ch11_chunked_prefill/*.ipynb")), ids=lambda p: p.name)
def test_no_zero_field_explains_a_cost(path):
    nb = nbformat.read(path, as_version=4)
    source = "\n".join(c.source for c in nb.cells)
    presets = set(PRESET.findall(source))
    stale = sorted({name for p in presets for name in zero_fields(p) if re.search(rf"\b{name}\b", source)})
    assert not stale, f"{path.name} explains costs with fields that are 0 in {sorted(presets)}: {stale}"
