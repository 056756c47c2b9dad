"""Real browser: every figure as standalone HTML (plotly.js embedded), screenshotted by headless Chromium.

Skipped, saying why, only where no Chromium binary is found (Debian: ``apt-get install chromium``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from minivllm.lab.viz.figures.curves import chunk_size_curves
from minivllm.lab.viz.figures.export import PAGE_MARGIN, find_chromium, save_html, screenshot_many
from minivllm.lab.viz.figures.gallery import gallery, sweep_results

ASSETS = Path(__file__).resolve().parents[3] / "assets" / "figures"
NAMES = (
    "gantt_chunked_vs_unchunked",
    "chunk_schedule",
    "kv_block_map",
    "recovery_timeline",
    "latency_cdfs",
    "queue_kv_over_time",
    "chunk_size_curves",
)


def drawn(png: Path) -> tuple[int, float]:
    """(distinct colours, fraction of pixels that are not near-white) of a screenshot."""
    pixels = np.asarray(Image.open(png).convert("RGB")).reshape(-1, 3)
    packed = pixels.astype(np.uint32) @ np.array([1 << 16, 1 << 8, 1], dtype=np.uint32)
    colours = len(np.unique(packed))
    inked = float((pixels.min(axis=1) < 235).mean())
    return colours, inked


@pytest.mark.slow  # a browser
def test_every_figure_renders_in_headless_chromium(tmp_path):
    if find_chromium() is None:
        pytest.skip("no chromium binary found (apt-get install chromium, or set $CHROMIUM): browser test not run")
    figs = gallery(sweep=False)
    figs["chunk_size_curves"] = chunk_size_curves(sweep_results((64, 256, 1024)))
    assert set(figs) == set(NAMES)
    jobs = []
    for name, fig in figs.items():
        height = int(fig.layout.height)
        html = save_html(fig, tmp_path / f"{name}.html", height=height)
        assert html.stat().st_size > 3_000_000 and "https://cdn" not in html.read_text()[:2000]  # offline
        jobs.append((html, tmp_path / f"{name}.png", (1200, height + PAGE_MARGIN)))
    for png in screenshot_many(jobs, timeout=90):
        colours, inked = drawn(png)
        assert colours >= 8, f"{png.name}: only {colours} colours, the figure did not draw"
        assert 0.02 < inked < 0.9, f"{png.name}: {inked:.1%} of the pixels are ink"


def test_committed_screenshots_are_there_and_small():
    for name in NAMES:
        png = ASSETS / f"{name}.png"
        assert png.is_file(), f"missing {png}: run python -m minivllm.lab.viz.figures.export assets/figures"
        assert png.stat().st_size < 300_000
        assert drawn(png)[0] >= 8
