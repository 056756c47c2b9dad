"""§11.1's whole scene on the demo page, as a lecturer plays it on a projector, against SmolLM2 (§11.1.1, §11.2).

The server as the README starts it (``serve --model smollm2 --demo-preset``); Debian's chromium at 1366 x 768;
two CPU hogs (``sh -c 'while :; do :; done'``) beside it, as a lecture machine has other work. The page's own
script is played (tests/helpers/demo_page.play_scene): start the chats, wait until calm (the page sizes the
scene), chunking off, send the long RAG prompt, watch, chunking on, send it again, compare. Asserted: the scene
is sized within its stall cap (here ``?max_stall_s=10``), the
sizing's predicted unchunked stall is within 0.5-2x the step measured, no red counter before the scene, the RAG
button disabled with a reason while it cannot act, every chat streaming (tokens during the chunked prefill), the
unchunked worst chat gap at least 3x the chunked one, a second tab reloaded mid-stall showing the live state
within 2 s, every counter in the 1366 x 768 viewport mid-stall, no two labels overlapping, the comparison sentence
following the data, and no KV block leaked. The numbers are printed for the record.

Measured on the shared 2-core machine at load average 3-10 besides the hogs (ten runs; two failed on checks fixed
since: two event numbers 1 px apart, a 100 ms race in the test): sized in 29-52 s from unchunked probes of 112-2,048
tokens; the chosen 784-1,792-token prompt predicted at 7.5-10.0 s, its one unchunked step 7.9-13.3 s
(predicted/measured 0.74-1.21) against a chunked worst gap of 1.2-2.6 s (4.5-9.4x); a tab reloaded mid-stall live in
0.65-1.09 s; test wall 77-103 s, the pytest process (server and engine threads included) 24-44 s CPU.
"""

from __future__ import annotations

import os
import subprocess
import time

import httpx
import pytest

from tests.helpers.demo_page import CHROMIUM, CHROMIUM_ARGS, DEMO_FLAGS, overlapping_labels, play_scene
from tests.helpers.server import running_server, wait_idle

pytest.importorskip("playwright")
pytestmark = [
    pytest.mark.slow,  # the real model, a browser and two CPU hogs: a few minutes on 2 cores
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium (apt install chromium)"),
]
# The page's cap on the unchunked stall it chooses (15 s by default): 10 s keeps the test to ~2 minutes (the sizing
# makes stalls predicted up to 1.15x the cap) and still leaves a stall: a decode step of six chats took 0.2-0.5 s here
# (load average 5-10 besides the hogs), so a stall (5x that) starts at 1-2.7 s.
MAX_STALL_S = 10
VIEW = {"width": 1366, "height": 768}  # a projector
# Guards against a hang only; every wait ends on the page's state. Sizing measures up to 7 prompts unchunked, each
# a stall predicted at most 1.15x the cap.
HANG_MS = 600_000


def in_view(page, selector: str) -> list[bool]:
    return page.eval_on_selector_all(
        selector,
        f"""els => els.map((e) => {{ const r = e.getBoundingClientRect();
            return r.top >= 0 && r.left >= 0 && r.bottom <= {VIEW["height"]} && r.right <= {VIEW["width"]}; }})""",
    )


def test_the_whole_scene_on_a_projector_beside_cpu_hogs(smollm2):
    from playwright.sync_api import sync_playwright

    t0, cpu0 = time.monotonic(), time.process_time()
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(2)]
    try:
        with running_server("smollm2", *DEMO_FLAGS, loaded=smollm2) as srv, sync_playwright() as pw:
            url = srv.base_url
            sc = httpx.get(f"{url}/admin/scheduling").json()
            assert (sc["max_num_seqs"], sc["max_num_batched_tokens"], sc["enable_chunked_prefill"]) == (16, 256, True)
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport=VIEW)
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{url}/?max_stall_s={MAX_STALL_S}")
            page.wait_for_selector("body[data-ready='1']", timeout=HANG_MS)

            def mid_stall() -> dict:
                """Every counter red and in view; the other tab reloaded: how soon it shows the live state."""
                counters = in_view(page, ".pane .waiting.late")
                overlaps = overlapping_labels(page)
                if os.environ.get("MINIVLLM_DEMO_STALL_PNG"):  # tests/serving/demo_screenshot.py's mid-stall picture
                    page.screenshot(path=os.environ["MINIVLLM_DEMO_STALL_PNG"])
                other = browser.new_page(viewport=VIEW)  # a second tab (opened now: its redraws cost CPU)
                other.on("pageerror", lambda e: errors.append(str(e)))
                other.goto(f"{url}/?max_stall_s={MAX_STALL_S}")
                start = time.monotonic()
                other.reload()
                other.wait_for_function(
                    "() => document.body.dataset.live === '1'"
                    " && document.getElementById('status').textContent.includes('has been running')",
                    timeout=HANG_MS,
                    polling=50,
                )
                reload_s = time.monotonic() - start
                other.close()
                still = page.evaluate("() => window.demo.streams.find((s) => s.kind === 'rag').tokens === 0")
                return {"counters": counters, "overlaps": overlaps, "reload_s": reload_s, "still_stalled": still}

            played = play_scene(page, HANG_MS, on_stall=mid_stall)
            scene, (off, on), stall = played.scene, played.runs, played.stall
            print(f"\nscene ({played.sizing_s:.1f} s to size):", page.inner_text("#scene"))
            print("comparison:", page.inner_text("#compare"))
            for r in played.runs:
                print(
                    f"  {r['label']:36} RAG {r['numTokens']} tok: worst chat gap {r['worst']:.2f} s, longest step "
                    f"{r['longestStep']:.2f} s in {r['prefillSteps']} steps, chat tokens {sum(r['chatTokens'])}, "
                    f"TTFT {r['ttft']:.2f} s"
                )
            ratio = scene["stall"] / off["longestStep"]
            print(f"predicted/measured stall {scene['stall']:.2f}/{off['longestStep']:.2f} s = {ratio:.2f}; "
                  f"reload mid-stall {stall['reload_s']:.2f} s")  # fmt: skip

            assert scene["stall"] <= MAX_STALL_S and scene["maxStall"] == MAX_STALL_S, scene  # sized within the cap
            assert 0.5 <= ratio <= 2, (scene, off)
            assert played.red_before_scene == [], played.red_before_scene  # a calm baseline
            assert played.disabled_reasons and all(r.startswith(("sizing", "waiting")) for r in played.disabled_reasons)
            assert (off["label"], on["label"]) == ("unchunked", "chunked, budget 256, threshold 128")
            assert off["numTokens"] == on["numTokens"] == scene["ragTokens"]
            assert off["prefillSteps"] == 1 and on["prefillSteps"] > 1
            assert off["worst"] >= 3 * on["worst"], (off, on)
            assert all(n >= 3 for n in on["chatTokens"]), on  # every chat kept streaming
            streams = page.evaluate("() => window.demo.streams.map((s) => [s.kind, s.running, s.pane.textContent])")
            assert all(running and "[error" not in text for kind, running, text in streams if kind == "chat")
            assert stall["still_stalled"] and stall["reload_s"] <= 2.0, stall  # the live state, mid-stall
            assert stall["counters"] == [True] * 7, stall  # every red counter in the projector's view
            assert stall["overlaps"] == [] and overlapping_labels(page) == [], (stall, overlapping_labels(page))
            assert in_view(page, ".pane .waiting") == [True] * 7
            compare = page.inner_text("#compare")
            assert ("earlier" in compare) == (on["ttft"] < off["ttft"]) and "froze" in compare, compare
            if os.environ.get("MINIVLLM_DEMO_AFTER_PNG"):
                page.screenshot(path=os.environ["MINIVLLM_DEMO_AFTER_PNG"])

            page.click("#stop-all")
            browser.close()
            assert not errors, errors
            state = wait_idle(url)
            assert state["num_free_blocks"] == state["num_gpu_blocks"] - 1  # no leaked KV block
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    print(f"test wall {time.monotonic() - t0:.0f} s, this process's CPU {time.process_time() - cpu0:.0f} s")
