"""The live demo page in Debian's chromium (never ``playwright install``): shared by
tests/serving/test_demo_page.py, tests/serving/test_demo_scene.py and tests/serving/demo_screenshot.py.

``play_scene`` plays the lecturer's script as a lecturer does (the page's own buttons, each once the page
highlights it), so that the done-when test and the README's screenshots show the same scene."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# true once the RAG stream has its 16 tokens and has stopped
RAG_DONE = "() => { const s = window.demo.streams.find((x) => x.kind === 'rag'); return s.tokens == 16 && !s.running; }"
# The README's serve command (minivllm/serving/README.md): ``python -m minivllm serve --model smollm2 --demo-preset``.
DEMO_FLAGS = ("--demo-preset",)
# The script's step the page highlights (1-based; 9 once every step is done).
STEP = "() => Number(document.body.dataset.step)"
STALL_S = "() => window.demo.stallS"
# Red counters seen, recorded by the page itself every 100 ms (installed by play_scene): [seconds, count, RAG running,
# sizing phase, stall threshold, longest open gap].
WATCH_RED = """() => { window.__red = []; setInterval(() => {
  const n = document.querySelectorAll('.pane .waiting.late').length;
  if (n) window.__red.push([performance.now() / 1000, n, window.demo.ragRunning,
    window.demo.sizing && window.demo.sizing.what, window.demo.stallS,
    Math.max(...[...document.querySelectorAll('.pane')].map((p) => Number(p.dataset.openGap)))]);
  }, 100); }"""


@dataclass
class Scene:
    """What play_scene saw."""

    scene: dict  # window.demo.scene: what the sizing measured and chose
    runs: list[dict]  # window.demo.runs: the comparison table's rows
    disabled_reasons: list[str] = field(default_factory=list)  # the RAG button's reasons seen while it was disabled
    red_before_scene: list = field(default_factory=list)  # red counters before the first RAG prompt was sent
    stall: dict[str, Any] = field(default_factory=dict)  # what on_stall returned
    sizing_s: float = 0.0  # from "Start chats" to the scene sized and the chats steady


def wait_step(page, step: int, timeout: float) -> None:
    page.wait_for_function(f"() => ({STEP})() === {step}", timeout=timeout, polling=100)


def play_scene(page, hang_ms: float, on_stall: Callable[[], dict] | None = None) -> Scene:
    """Plays the page's script: start the chats, wait until calm (sized, steady), chunking off, send, (on_stall,
    called while the long step runs and every chat's counter is red), chunking on, send again. Each click waits
    for the page to highlight that control; every wait ends on the page's state, hang_ms only guards a hang."""
    page.evaluate(WATCH_RED)
    reasons: list[str] = []
    wait_step(page, 1, hang_ms)
    assert "next" in (page.get_attribute("#start-chats", "class") or "")
    t0 = time.monotonic()
    page.click("#start-chats")
    # the script moves on within its 100 ms update: until then the button still says "start the chats first"
    page.wait_for_function(f"() => ({STEP})() >= 2", timeout=hang_ms, polling=50)
    while page.evaluate(STEP) <= 2:  # sizing: the RAG button says why it cannot act yet
        if page.is_disabled("#send-rag"):
            reasons.append(page.get_attribute("#send-rag", "title") or "")
        page.wait_for_timeout(250)
        assert time.monotonic() - t0 < hang_ms / 1000, "the scene was not sized"
    sizing_s = time.monotonic() - t0
    scene = page.evaluate("() => window.demo.scene")
    print(f"sized in {sizing_s:.0f} s:", page.inner_text("#scene"), f"(stall threshold {page.evaluate(STALL_S)} s)")
    wait_step(page, 3, hang_ms)
    page.click("#chunked")  # chunking off: §11.1.1's complaint
    wait_step(page, 4, hang_ms)  # the RAG button is next once the chats are steady again
    page.wait_for_function("() => !document.getElementById('send-rag').disabled", timeout=hang_ms, polling=100)
    red_before = page.evaluate("() => window.__red")
    page.click("#send-rag")
    stall: dict[str, Any] = {}
    if on_stall is not None:  # every counter red (a stall), unless the long step ends first
        page.wait_for_function(
            f"() => document.querySelectorAll('.pane .waiting.late').length === 7 || ({RAG_DONE})()",
            timeout=hang_ms,
            polling=100,
        )
        assert page.evaluate("() => document.querySelectorAll('.pane .waiting.late').length") == 7, (
            f"the long step ended before every counter turned red (a stall: over {page.evaluate(STALL_S)} s)"
        )
        stall = on_stall()
    page.wait_for_function(RAG_DONE, timeout=hang_ms)
    wait_step(page, 6, hang_ms)
    page.click("#chunked")  # chunking on: §11.2's fix
    wait_step(page, 7, hang_ms)
    page.wait_for_function("() => !document.getElementById('send-rag').disabled", timeout=hang_ms, polling=100)
    page.click("#send-rag")
    page.wait_for_function(RAG_DONE, timeout=hang_ms)
    wait_step(page, 9, hang_ms)
    return Scene(scene, page.evaluate("() => window.demo.runs"), reasons, red_before, stall, sizing_s)


def boxes_overlap(a: dict, b: dict) -> bool:
    return (
        a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]
    )


def overlapping_labels(page) -> list[tuple[str, str]]:
    """Pairs of texts that overlap: the chart's own labels (its canvas reports each text's box), and the page's
    blocks (controls, status, panes, chart, script column) by their bounding boxes."""
    canvas = page.evaluate("() => window.demo.labelBoxes")
    blocks = page.evaluate(
        """() => [...document.querySelectorAll('#controls > *, #status, .pane, #chart-box, aside, #legend > span')]
             .filter((e) => e.offsetParent !== null)
             .map((e) => { const r = e.getBoundingClientRect();
                           return {text: e.id || e.className || e.textContent.slice(0, 30), x: r.x, y: r.y,
                                   w: r.width, h: r.height, legend: e.parentElement.id === 'legend'}; })"""
    )
    bad = []
    for group in (canvas, [b for b in blocks if not b["legend"]], [b for b in blocks if b["legend"]]):
        for i, a in enumerate(group):
            bad += [(a["text"], b["text"]) for b in group[i + 1 :] if boxes_overlap(a, b)]
    return bad
