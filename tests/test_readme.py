"""The README is a front door: short, its reading path on the first screen, every link it and the wings' READMEs
give pointing at a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READMES = [ROOT / "README.md", *sorted((ROOT / "minivllm").rglob("README*.md")), ROOT / "tests" / "README.md"]
LINK = re.compile(r"\]\(([^)#\s]+)\)")


def test_front_door_is_short_and_opens_with_the_commands_and_the_reading_path():
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= 150
    headings = [ln for ln in lines if ln.startswith("## ")]
    assert headings[:3] == ["## Two commands", "## Read the engine in this order", "## The chapters"]
    assert lines.index("## Read the engine in this order") < 50  # on the first screen


def test_reading_path_lists_engine_files_with_their_line_counts():
    text = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| \d+ \| \[`[^`]+`\]\((minivllm/[^)]+)\) \| (\d+) \|", text, re.M)
    assert len(rows) >= 12
    for path, count in rows:
        assert not path.startswith(("minivllm/lab/", "minivllm/serving/")), path
        assert sum(1 for _ in open(ROOT / path)) == int(count), f"{path}: the README says {count} lines"


def test_every_relative_link_exists():
    for readme in READMES:
        for target in LINK.findall(readme.read_text()):
            if "://" in target:
                continue
            assert (readme.parent / target).exists(), f"{readme.relative_to(ROOT)} links to missing {target}"
