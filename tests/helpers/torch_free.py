"""The core loop's promise, checked in every run of it: no test, fixture or test module imports torch.

A run whose paths all lie in ``TORCH_FREE`` (the Makefile's ``core`` loop, or any file in it) registers
``TorchFreeGuard`` (tests/conftest.py). The first test module, setup, test or teardown that brings torch into
``sys.modules`` fails there, saying what did; a clean run ends with the line "torch-free: ... never imported
torch". The scheduler, the KV cache and the metrics are plain Python: their loop needs neither torch nor a model.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The Makefile's `core` loop (tests/test_loops.py keeps the two lists equal).
TORCH_FREE = (
    "tests/core",
    "tests/lab/metrics",
    "tests/serving/metrics",
    "tests/test_import_graph.py",
    "tests/test_loops.py",
)


def torch_free_run(config: pytest.Config) -> bool:
    """True when every path the run was given lies in ``TORCH_FREE`` (no path: testpaths, not torch-free)."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return False
    roots = [config.rootpath / p for p in TORCH_FREE]
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if not any(path == root or root in path.parents for root in roots):
            return False
    return True


def _message(what: str) -> str:
    return f"{what} imported torch: the core loop ({', '.join(TORCH_FREE)}) runs without torch and without a model"


class TorchFreeGuard:
    """Fails the collector or test phase in which ``torch`` first appears in ``sys.modules``."""

    def __init__(self) -> None:
        if "torch" in sys.modules:
            raise pytest.UsageError(_message("a plugin or conftest loaded before the tests"))
        self.failed = False

    def _newly_imported(self) -> bool:
        if self.failed or "torch" not in sys.modules:
            return False
        self.failed = True
        return True

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector):
        report = yield
        if self._newly_imported():
            report.outcome = "failed"
            report.longrepr = _message(f"collecting {collector.nodeid}")
        return report

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item):
        result = yield
        if self._newly_imported():
            pytest.fail(_message(f"setting up {item.nodeid} (its fixtures)"), pytrace=False)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        result = yield
        if self._newly_imported():
            pytest.fail(_message(item.nodeid), pytrace=False)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None):
        result = yield
        if self._newly_imported():
            pytest.fail(_message(f"tearing down {item.nodeid}"), pytrace=False)
        return result

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if "torch" in sys.modules and not self.failed:  # imported outside any phase above: still a failure
            self.failed = True
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if "torch" in sys.modules:
            terminalreporter.write_line(_message("this run"), red=True)
        else:
            terminalreporter.write_line("torch-free: this run never imported torch", green=True)
