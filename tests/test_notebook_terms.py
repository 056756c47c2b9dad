"""The notebooks use the book's words: its Chinese text writes "token" (never 令牌), so the notebooks do too."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

CHAPTERS = Path(__file__).resolve().parent.parent / "chapters"
BOOK_WORDS = {"令牌": "token"}  # a word the book never uses -> the one it uses


@pytest.mark.parametrize("path", sorted(CHAPTERS.glob("ch*/*.ipynb")), ids=lambda p: p.name)
def test_book_words(path):
    nb = nbformat.read(path, as_version=4)
    hits = [(word, book) for c in nb.cells for word, book in BOOK_WORDS.items() if word in c.source]
    assert not hits, f"{path.name}: write the book's word, {hits}"
