"""§11.1's whole scene on the demo page, as an instructor plays it, against the real SmolLM2 server (§11.1.1, §11.2).

Two tabs in Debian's chromium; the server as the README starts it (``--max-num-batched-tokens 256``). The page sizes
the scene to this machine, chunking goes off, the long RAG prompt lands (every chat's open gap grows while the one
long step runs), chunking goes on, the RAG prompt lands again. Asserted: the comparison table has both rows with the
unchunked worst chat gap at least 3x the chunked one, every chat kept streaming (and got tokens during the chunked
prefill, none during the unchunked one), and both tabs' controls show the server's settings after every action.
The timings are this machine's; the table is printed for the record.
"""

from __future__ import annotations

import os

import httpx
import pytest

from tests.helpers.demo_page import CHROMIUM, CHROMIUM_ARGS, RAG_DONE
from tests.helpers.server import running_server, wait_idle
from tests.serving.test_demo_page import SIZED, scheduling

pytest.importorskip("playwright")
pytestmark = [
    pytest.mark.slow,  # the real model, a browser, about a minute
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium (apt install chromium)"),
]
FLAGS = ("--max-num-batched-tokens", "256", "--max-model-len", "4096", "--num-gpu-blocks", "1024")
CHAT_PANES = "() => window.demo.streams.filter((s) => s.kind === 'chat')"


def controls(page) -> dict:
    """What a tab's controls say: the checkbox, the budget field, and the settings in its status line."""
    return page.evaluate(
        """() => ({ chunked: document.getElementById('chunked').checked,
                    budget: Number(document.getElementById('budget').value),
                    status: document.getElementById('status').textContent })"""
    )


def wait_in_sync(url: str, *pages) -> dict:
    """Every tab shows the server's settings (the next poll at the latest): checkbox, budget, status label."""
    sc = scheduling(url)
    label = "unchunked"
    if sc["enable_chunked_prefill"]:
        label = f"chunked, budget {sc['max_num_batched_tokens']}"
        if sc["long_prefill_token_threshold"]:
            label += f", threshold {sc['long_prefill_token_threshold']}"
    for page in pages:
        page.wait_for_function(
            "([on, label]) => document.getElementById('chunked').checked === on"
            " && document.getElementById('status').textContent.includes(` · ${label} · `)",
            arg=[sc["enable_chunked_prefill"], label],
            timeout=5_000,
        )
        if sc["enable_chunked_prefill"]:
            assert controls(page)["budget"] == sc["max_num_batched_tokens"]
    return sc


def open_gaps(page) -> list[float]:
    return page.evaluate(
        "() => [...document.querySelectorAll('.pane')].slice(0, 6).map((p) => Number(p.dataset.openGap))"
    )


def chat_totals(page) -> list[int]:
    return page.evaluate(f"() => ({CHAT_PANES})().map((s) => s.total)")


def test_the_whole_scene_with_smollm2(smollm2):
    from playwright.sync_api import sync_playwright

    with running_server("smollm2", *FLAGS, loaded=smollm2) as srv, sync_playwright() as pw:
        url = srv.base_url
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page, other = (browser.new_page(viewport={"width": 1280, "height": 900}) for _ in range(2))
        errors: list[str] = []
        for p in (page, other):
            p.on("pageerror", lambda e: errors.append(str(e)))
            p.goto(f"{url}/")
            p.wait_for_selector("body[data-ready='1']", timeout=30_000)
        assert wait_in_sync(url, page, other)["max_num_batched_tokens"] == 256  # the server's, from the start

        page.click("#start-chats")
        page.wait_for_function(SIZED, timeout=90_000)
        scene = page.evaluate("() => window.demo.scene")
        print("scene:", page.inner_text("#scene"))
        assert not scene["capped"] and scene["ratio"] >= 9.9 and scene["chunk"] == 128, scene
        rag = scene["ragTokens"]
        assert page.input_value("#rag-tokens") == str(rag) and f"RAG prompt {rag} tokens" in page.inner_text("#scene")

        page.click("#chunked")  # chunking off: §11.1.1's complaint
        assert wait_in_sync(url, page, other)["enable_chunked_prefill"] is False
        before = chat_totals(page)
        page.click("#send-rag")
        page.wait_for_function(
            "() => document.getElementById('status').textContent.includes('has been running')", timeout=30_000
        )
        first = open_gaps(page)
        page.wait_for_timeout(1000)
        later, late = open_gaps(page), page.eval_on_selector_all(".pane .waiting.late", "els => els.length")
        assert all(b > a + 0.8 for a, b in zip(first, later)) and late == 7, (first, later, late)  # 6 chats + RAG
        page.wait_for_function(RAG_DONE, timeout=120_000)
        page.wait_for_timeout(1500)
        assert all(b > a for a, b in zip(before, chat_totals(page))), (before, chat_totals(page))

        page.click("#chunked")  # chunking on, budget 256, threshold 128: the fix of §11.2
        sc = wait_in_sync(url, page, other)
        assert (sc["enable_chunked_prefill"], sc["max_num_batched_tokens"], sc["long_prefill_token_threshold"]) == (
            True,
            256,
            128,
        )
        before = chat_totals(page)
        page.click("#send-rag")
        page.wait_for_function(RAG_DONE, timeout=120_000)
        page.wait_for_function("() => window.demo.runs.length === 2", timeout=30_000)
        page.wait_for_timeout(1000)
        assert all(b > a for a, b in zip(before, chat_totals(page)))

        cells = "rs => rs.map((r) => [...r.cells].map((c) => c.textContent))"
        print("comparison table:", *page.eval_on_selector_all("#runs tbody tr", cells), sep="\n  ")
        unchunked, chunked = page.evaluate("() => window.demo.runs")
        assert (unchunked["label"], chunked["label"]) == ("unchunked", "chunked, budget 256, threshold 128")
        assert unchunked["numTokens"] == chunked["numTokens"] == rag
        assert unchunked["worst"] >= 3 * chunked["worst"], (unchunked, chunked)
        assert all(n <= 1 for n in unchunked["chatTokens"]), unchunked  # every chat stood still
        assert all(n >= 3 for n in chunked["chatTokens"]), chunked  # every chat kept streaming
        streams = page.evaluate(f"() => ({CHAT_PANES})().map((s) => [s.running, s.pane.textContent])")
        assert all(running and "[error" not in text for running, text in streams)
        wait_in_sync(url, page, other)

        page.click("#stop-all")
        other.close()
        browser.close()
        assert not errors, errors
        state = wait_idle(url)
        assert state["num_free_blocks"] == state["num_gpu_blocks"] - 1
        assert httpx.get(f"{url}/health").status_code == 200
