"""The live demo page in Debian's chromium (never ``playwright install``): shared by
tests/serving/test_demo_page.py and tests/serving/demo_screenshot.py."""

from __future__ import annotations

import shutil

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
