"""Standalone HTML and headless-Chromium screenshots of the figures (what a reader's browser draws).

``save_html`` embeds plotly.js (offline, ~4.8 MB per file); ``screenshot`` runs Debian's
``chromium`` headless on a ``file://`` URL. ``python -m minivllm.lab.viz.figures.export assets/figures``
rebuilds the committed screenshots from seeded simulator runs (see ``gallery.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import plotly.graph_objects as go

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


PAGE_MARGIN = 20  # px the HTML page adds around the figure


def find_chromium() -> str | None:
    """Path of a Chromium / Chrome binary ($CHROMIUM first), or None."""
    explicit = os.environ.get("CHROMIUM")
    if explicit and Path(explicit).is_file():
        return explicit
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def save_html(fig: go.Figure, path: str | Path, width: int = 1200, height: int | None = None) -> Path:
    """Write ``fig`` as a self-contained HTML page (plotly.js embedded, works offline)."""
    path = Path(path)
    fig = go.Figure(fig)  # a copy: the caller's figure keeps its own size
    fig.update_layout(width=width, height=height or fig.layout.height or 500)
    fig.write_html(path, include_plotlyjs=True, full_html=True, config={"displayModeBar": False})
    return path


def screenshot_command(html: str | Path, png: str | Path, size: tuple[int, int], profile: str) -> list[str]:
    chromium = find_chromium()
    if chromium is None:
        raise FileNotFoundError("no chromium found (apt-get install chromium, or set $CHROMIUM)")
    return [
        chromium,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        "--virtual-time-budget=5000",  # let plotly.js finish drawing before the shot
        f"--screenshot={Path(png).resolve()}",
        f"--window-size={size[0]},{size[1]}",
        Path(html).resolve().as_uri(),
    ]


def screenshot_many(jobs: list[tuple[Path, Path, tuple[int, int]]], timeout: float = 60.0) -> list[Path]:
    """Screenshot every ``(html, png, (width, height))`` with headless Chromium, one process per CPU at a time."""
    width = max(1, os.cpu_count() or 1)
    with tempfile.TemporaryDirectory(prefix="minivllm-chromium-") as tmp:
        for start in range(0, len(jobs), width):
            batch = jobs[start : start + width]
            procs = []
            for i, (html, png, size) in enumerate(batch, start=start):
                cmd = screenshot_command(html, png, size, os.path.join(tmp, f"profile{i}"))
                procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
            for p, (_, png, _) in zip(procs, batch):
                _, err = p.communicate(timeout=timeout)
                if not Path(png).is_file():
                    raise RuntimeError(f"chromium wrote no {png} (exit {p.returncode}): {err.decode()[-500:]}")
    return [png for _, png, _ in jobs]


def shrink_png(path: str | Path, colours: int = 128) -> Path:
    """Re-save a screenshot with a palette of ``colours`` (needs pillow): a few tens of kB instead of hundreds."""
    from PIL import Image

    img = Image.open(path).convert("RGB")
    img.quantize(colors=colours, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    return Path(path)


def main(argv: list[str] | None = None) -> None:
    import argparse

    from minivllm.lab.viz.figures.gallery import gallery

    parser = argparse.ArgumentParser(description="Rebuild the figure screenshots in a folder.")
    parser.add_argument("folder", nargs="?", default="assets/figures")
    parser.add_argument("--keep-html", action="store_true", help="also keep the standalone HTML pages")
    args = parser.parse_args(argv)
    out = Path(args.folder)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        html_dir = out if args.keep_html else Path(tmp)
        jobs = []
        for name, fig in gallery().items():
            height = int(fig.layout.height or 500)
            html = save_html(fig, html_dir / f"{name}.html", height=height)
            jobs.append((html, out / f"{name}.png", (1200, height + PAGE_MARGIN)))
        for png in screenshot_many(jobs):
            shrink_png(png)
            print(f"{png}  {png.stat().st_size // 1024} kB")


if __name__ == "__main__":
    main()
