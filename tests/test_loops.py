"""The test loops stay honest: the Makefile's core loop is the torch-free list, nbval loads only where notebooks
are collected, and every test checks something (an assert, pytest.raises, or a helper that asserts)."""

from __future__ import annotations

import ast
import shlex
import sys
from pathlib import Path

import pytest

from tests.helpers.torch_free import TORCH_FREE

ROOT = Path(__file__).resolve().parents[1]
CHECKING_CALLS = {"raises", "warns", "fail", "deprecated_call"}  # pytest's; any call named assert* checks too


def make_target(name: str) -> list[str]:
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = lines.index(f"{name}:")
    return shlex.split(lines[start + 1].strip().replace("$(PYTEST)", "python -m pytest"))


def test_the_makefiles_core_loop_is_the_torch_free_list():
    words = make_target("core")
    assert words[:3] == ["python", "-m", "pytest"]
    paths = [w for w in words[3:] if not w.startswith("-")]
    assert paths == list(TORCH_FREE)


def test_nbval_is_loaded_only_when_the_run_collects_chapters(request):
    config = request.config
    chapters = ROOT / "chapters"
    args = [Path(config.invocation_params.dir, a.split("::")[0]).resolve() for a in config.args]
    collects_chapters = any(p == chapters or chapters in p.parents or p in chapters.parents for p in args)
    assert config.pluginmanager.has_plugin("nbval.plugin") == collects_chapters
    if not collects_chapters:
        assert "nbval.plugin" not in sys.modules


def _checks(fn: ast.AST, local: dict[str, ast.AST], helpers: set[str], seen: set[str]) -> bool:
    for node in ast.walk(fn):
        if isinstance(node, (ast.Assert, ast.Raise)):
            return True
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in CHECKING_CALLS or name.startswith("assert") or name in helpers:
                return True
            if name in local and name not in seen:
                seen.add(name)
                if _checks(local[name], local, helpers, seen):
                    return True
    return False


def unchecked_tests(folder: Path) -> list[str]:
    """Test functions with no assert, no pytest.raises/warns/fail, no assert_* call, and no call to a function of
    their module or of tests.helpers that has one (a static scan: fixtures that assert are not followed)."""
    found = []
    for path in sorted(folder.rglob("test_*.py")):
        tree = ast.parse(path.read_text())
        local = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        helpers = {
            a.asname or a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("tests.helpers")
            for a in n.names
        }
        for name, fn in local.items():
            if name.startswith("test_") and not _checks(fn, local, helpers, {name}):
                found.append(f"{path.relative_to(ROOT)}:{fn.lineno} {name}")
    return found


def test_every_test_checks_something():
    assert unchecked_tests(ROOT / "tests") == []


def test_the_scan_finds_a_test_that_only_prints(tmp_path):
    (tmp_path / "test_x.py").write_text(
        "def helper(x):\n    assert x\n\n"
        "def test_prints():\n    print(1)\n\n"
        "def test_via_helper():\n    helper(1)\n\n"
        "def test_close(torch):\n    torch.testing.assert_close(1, 1)\n"
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys.modules[__name__], "ROOT", tmp_path)
        assert unchecked_tests(tmp_path) == ["test_x.py:4 test_prints"]
