"""Make assets/server/demo_stall.png and demo.png: the live demo page with SmolLM2 mid-stall and after (§11.9).

Run from the repository root: ``python tests/serving/demo_screenshot.py`` (a few minutes on a laptop CPU). The
server as the README starts it (``serve --model smollm2 --demo-preset``), chromium at 1366 x 768 (a projector),
the page's script played as tests/serving/test_demo_scene.py plays it (tests/helpers/demo_page.play_scene): the
chats stream, the page sizes the scene, chunking goes off, the long RAG prompt lands (the first picture, while
every chat waits), chunking goes on, the prompt lands again (the second picture, with the comparison). Uses
Debian's chromium; the timings are wall clock, so run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # for tests.helpers

from tests.helpers.demo_page import CHROMIUM, CHROMIUM_ARGS, DEMO_FLAGS, play_scene  # noqa: E402
from tests.helpers.server import running_server  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2")
    p.add_argument("--max-stall-s", type=float, default=15, help="the page's cap on the unchunked stall")
    p.add_argument("--width", type=int, default=1366)
    p.add_argument("--height", type=int, default=768)
    p.add_argument("--out-dir", default=str(REPO / "assets" / "server"))
    args = p.parse_args()
    from playwright.sync_api import sync_playwright

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with running_server(args.model, *DEMO_FLAGS) as srv, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": args.width, "height": args.height})
        page.goto(f"{srv.base_url}/?max_stall_s={args.max_stall_s:g}")
        page.wait_for_selector("body[data-ready='1']", timeout=60_000)

        def mid_stall() -> dict:
            page.wait_for_timeout(1500)  # the counters well into the stall
            page.screenshot(path=str(out / "demo_stall.png"))
            return {"status": page.inner_text("#status")}

        played = play_scene(page, 900_000, on_stall=mid_stall)
        page.wait_for_timeout(1000)
        page.screenshot(path=str(out / "demo.png"))
        texts = [page.inner_text("#scene"), page.inner_text("#compare")]
        page.click("#stop-all")
        browser.close()
    print(f"wrote {out / 'demo_stall.png'} ({played.stall['status']}) and {out / 'demo.png'}")
    print(*texts, sep="\n")
    for r in played.runs:  # the comparison table, from the engine's trace
        print(
            f"{r['label']:36} RAG {r['numTokens']} tok: worst chat gap {r['worst']:.2f} s, longest step "
            f"{r['longestStep']:.2f} s ({r['prefillSteps']} steps), chat tokens meanwhile {sum(r['chatTokens'])}, "
            f"RAG TTFT {r['ttft']:.2f} s"
        )


if __name__ == "__main__":
    main()
