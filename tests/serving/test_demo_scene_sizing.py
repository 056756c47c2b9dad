"""The demo page's scene sizing (§11.1.1) replayed in Node on recorded measurements: no browser, no server.

``probeScene`` (minivllm/serving/static/demo_scene.js) is run as the page runs it, with ``calibrate`` (one
sizing prompt read unchunked while the chats stream) replaced by measurements recorded from real runs. Asserted:
the RAG prompt it chooses stays within the cap, and a scene capped by max_model_len takes the cap itself, even when
a sizing step also prefilled another request's prompt (its step then counts more tokens than the prompt sent).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs Node.js (apt install nodejs)")
SCENE_JS = Path(__file__).resolve().parents[2] / "minivllm" / "serving" / "static" / "demo_scene.js"

# A loaded CI run of the tiny model (tests/serving/test_demo_page.py; max_model_len 256, so the cap is 208): the
# fourth prompt's step also prefilled 32 tokens of another request (L 224 for 208 sent, 16 of them cached).
LOADED_CI_RUN = [
    {"L": 128, "sent": 128, "cached": 0, "t": 0.006825, "steps": 1, "decode": 0.001820},
    {"L": 192, "sent": 208, "cached": 16, "t": 0.005760, "steps": 1, "decode": 0.003616},
    {"L": 192, "sent": 208, "cached": 16, "t": 0.0, "steps": 1, "decode": 0.005104},
    {"L": 224, "sent": 208, "cached": 16, "t": 0.007021, "steps": 1, "decode": 0.001396},
    {"L": 176, "sent": 192, "cached": 16, "t": 0.009621, "steps": 1, "decode": 0.002311},
    {"L": 176, "sent": 192, "cached": 16, "t": 0.000079, "steps": 1, "decode": 0.003412},
    {"L": 176, "sent": 192, "cached": 16, "t": 0.001310, "steps": 1, "decode": 0.002663},
]

RUNNER = """
const fs = require("fs");
const [src, measuredJson, argsJson] = process.argv.slice(1);
globalThis.location = { search: "" };
globalThis.demo = { sizing: { measured: [] } };
const measured = JSON.parse(measuredJson), sent = [];
// A list: the measurements in order; else a cost model: t = a·L + b·L² for the L = numTokens - cached prefilled.
const measure = (numTokens) => {
  if (Array.isArray(measured)) return measured[sent.length - 1];
  const { a, b, cached, decode } = measured, L = numTokens - cached;
  return { L, sent: numTokens, cached, t: a * L + b * L * L, steps: 1, decode };
};
eval(fs.readFileSync(src, "utf8") + `
calibrate = async (numTokens) => { sent.push(numTokens); return measure(numTokens); };
probeScene(...JSON.parse(argsJson)).then((r) => console.log(JSON.stringify({ ...r, sent })));`);
"""


def probe_scene(measured: list[dict] | dict, n: int, decode: float, chunk: int, len_cap: int) -> dict:
    """probeScene's result for these measurements (a list, in the order the page asks for them; or a cost model
    ``{a, b, cached, decode}``), and the lengths it sent."""
    out = subprocess.run(
        [NODE, "-e", RUNNER, str(SCENE_JS), json.dumps(measured), json.dumps([n, decode, chunk, len_cap])],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(out.stdout)


def test_capped_scene_takes_the_cap_when_a_step_shares_its_prefill():
    scene = probe_scene(LOADED_CI_RUN, n=6, decode=0.0014548, chunk=16, len_cap=208)
    assert scene["sent"][:4] == [128, 208, 208, 208] and max(scene["sent"]) <= 208, scene["sent"]
    assert scene["capped"] and not scene["trimmed"], scene
    assert scene["ragTokens"] == scene["cap"] == 208, scene


def test_chosen_prompt_adds_the_cached_opening_within_the_cap():
    # A slower machine: the aim (10x the chunked run's slowest step) is reached below the cap. Each prompt's 16
    # cached tokens (the template's opening) are added back to the tokens the fit says to prefill.
    model = {"a": 2e-4, "b": 1e-7, "cached": 16, "decode": 0.05}
    scene = probe_scene(model, n=6, decode=0.05, chunk=16, len_cap=1968)
    assert not scene["capped"] and scene["converged"], scene
    assert scene["ragTokens"] < scene["cap"] and scene["ragTokens"] % 16 == 0, scene
    assert scene["ratio"] >= 10, scene
    prefill = scene["ragTokens"] - 16  # one chunk (16 tokens) shorter would miss the aim
    stall = lambda L: 0.05 + 2e-4 * L + 1e-7 * L * L  # noqa: E731
    last_chunk = lambda L: 0.05 + 2e-4 * 16 + 1e-7 * (2 * L * 16 - 16 * 16)  # noqa: E731
    assert stall(prefill - 16) < 10 * last_chunk(prefill - 16) <= 10 * last_chunk(prefill) <= stall(prefill)
