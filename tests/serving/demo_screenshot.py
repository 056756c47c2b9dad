"""Make assets/server/demo.png: the live demo page with SmolLM2, §11.1.1's stall and then §11.2's fix (§11.9).

Run from the repository root: ``python tests/serving/demo_screenshot.py`` (about a minute on a laptop CPU).
Chats stream and the page sizes the scene to the machine; chunked prefill goes off; a long RAG prompt lands
(every chat stalls for its whole prefill); chunking goes on with a small budget; a second RAG prompt lands (the
chats keep flowing, the RAG prompt's TTFT grows). Uses Debian's chromium, as tests/serving/test_demo_scene.py
does; run it on a quiet machine (the timings are wall clock).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # for tests.helpers

from tests.helpers.demo_page import CHROMIUM, CHROMIUM_ARGS, RAG_DONE  # noqa: E402
from tests.helpers.server import running_server  # noqa: E402
from tests.serving.test_demo_page import SIZED  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2")
    p.add_argument("--rag-tokens", type=int, default=None, help="default: what the page's sizing chooses")
    p.add_argument("--budget", type=int, default=256, help="the chunked token budget")
    p.add_argument("--calm-s", type=float, default=3.0, help="seconds of chats before and after each RAG prompt")
    p.add_argument("--width", type=int, default=1280)
    p.add_argument("--out", default=str(REPO / "assets" / "server" / "demo.png"))
    args = p.parse_args()
    from playwright.sync_api import sync_playwright

    flags = ("--max-model-len", "4096", "--num-gpu-blocks", "1024", "--max-num-batched-tokens", str(args.budget))
    with running_server(args.model, *flags) as srv, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": args.width, "height": 960})
        page.goto(f"{srv.base_url}/")
        page.wait_for_selector("body[data-ready='1']", timeout=30_000)
        page.click("#start-chats")
        page.wait_for_function(SIZED, timeout=120_000)
        if args.rag_tokens is not None:
            page.fill("#rag-tokens", str(args.rag_tokens))
        page.click("#chunked")  # off: the complaint
        page.wait_for_timeout(args.calm_s * 1000)
        for _ in range(2):
            page.click("#send-rag")
            page.wait_for_function(RAG_DONE, timeout=300_000)
            page.wait_for_timeout(args.calm_s * 1000)
            if not page.is_checked("#chunked"):
                page.click("#chunked")  # on, with the budget: the fix
                page.wait_for_timeout(args.calm_s * 1000)
        page.wait_for_function("() => window.demo.runs.length === 2", timeout=30_000)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=args.out)
        scene = page.inner_text("#scene")
        stats = page.evaluate("() => window.demo.streams.map((s) => [s.label, Math.round(s.max), s.ttft])")
        runs = page.evaluate("() => window.demo.runs")
        page.click("#stop-all")
        browser.close()
    print(f"wrote {args.out}; per stream [label, max gap ms, last TTFT s]: {stats}\n{scene}")
    for r in runs:  # the comparison table, from the engine's trace
        print(
            f"{r['label']:36} RAG {r['numTokens']} tok: worst chat gap {r['worst'] * 1e3:.0f} ms, "
            f"p99 {r['p99'] * 1e3:.0f} ms, chat tokens meanwhile {sum(r['chatTokens'])}, RAG TTFT {r['ttft']:.2f} s"
        )


if __name__ == "__main__":
    main()
