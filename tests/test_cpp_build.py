"""minivllm.cpp_build: a build stopped part-way does not make every later engine hang (compile_inline).

torch marks a build in progress with a ``lock`` file in the extension's build folder and waits for it to go away;
a process killed while building (a notebook kernel restarted during the first build) leaves it there. Each case
builds a tiny extension in a fresh ``TORCH_EXTENSIONS_DIR``, in a fresh interpreter.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("ninja")

_BUILD = textwrap.dedent(
    """
    import sys, torch
    from minivllm.cpp_build import compile_inline
    compile_inline(sys.argv[1], '''
    #include <torch/library.h>
    int64_t twice(int64_t x) { return 2 * x; }
    TORCH_LIBRARY(%s, m) { m.def("twice(int x) -> int", &twice); }
    ''' % sys.argv[1])
    print(getattr(torch.ops, sys.argv[1]).twice(21))
    """
)
HANG_GUARD_S = 600  # a hang would otherwise last forever; a build takes seconds


def _env(ext_dir: Path) -> dict[str, str]:
    return {**os.environ, "TORCH_EXTENSIONS_DIR": str(ext_dir)}


def _command(name: str) -> list[str]:
    """A fresh interpreter that builds the extension ``name`` and prints twice(21)."""
    return [sys.executable, "-c", _BUILD, name]


def _build(ext_dir: Path, name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_command(name), env=_env(ext_dir), capture_output=True, text=True, timeout=HANG_GUARD_S)


def test_a_lock_left_by_a_killed_build_is_cleared(tmp_path: Path) -> None:
    name = "minivllm_test_stale_lock"
    # What a build killed part-way leaves: its folder with torch's lock file in it.
    (tmp_path / name).mkdir()
    (tmp_path / name / "lock").touch()
    done = _build(tmp_path, name)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "42"
    assert "stopped part-way" in done.stderr  # and it says so
    assert not (tmp_path / name / "lock").exists()


def test_killing_a_build_part_way_then_building_again(tmp_path: Path) -> None:
    name = "minivllm_test_killed_build"
    lock = tmp_path / name / "lock"
    first = subprocess.Popen(_command(name), env=_env(tmp_path), stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        while not lock.exists() and first.poll() is None:  # wait for the build to start (an event, not a time)
            time.sleep(0.01)
        if first.poll() is not None:
            pytest.fail("the first build ended before it was seen building")
        os.killpg(first.pid, signal.SIGKILL)  # as Jupyter restarts a kernel: its process group, no cleanup
    finally:
        first.wait()
    assert lock.exists()  # the state every later engine would have waited on
    again = _build(tmp_path, name)
    assert again.returncode == 0, again.stderr
    assert again.stdout.split()[-1] == "42"


def test_a_second_process_loads_the_first_ones_build(tmp_path: Path) -> None:
    name = "minivllm_test_reuse"
    for _ in range(2):
        done = _build(tmp_path, name)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split()[-1] == "42"
    assert "stopped part-way" not in done.stderr
