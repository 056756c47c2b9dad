"""nbval for the chapter notebooks: loaded here, only when a run collects chapters/, with its settings.

pyproject's addopts blocks nbval's auto-loaded plugin (``-p no:nbval``): importing it costs more than a one-file
test run (nbformat, jsonschema, jupyter_client). pytest loads this conftest whenever chapters/ is collected:
``python -m pytest`` (testpaths tests + chapters), ``python -m pytest chapters/...`` or ``make notebooks``.
Then nbval is registered and switched on strictly, as ``--nbval --nbval-current-env --nbval-sanitize-with
tests/nbval_sanitize.cfg`` would: every stored output is compared (``--nbval-lax`` on the command line still
wins), in this environment's kernel, with the wall-clock times and addresses sanitized.

Plotly figures (``application/vnd.plotly.v1+json``) and HTML reprs are not compared: their JSON
changes with the plotly version and template. Their data is checked in tests/lab/viz instead, and every
notebook prints the numbers it relies on as plain text, which nbval does compare.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbval.plugin
import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")

SKIPPED_MIME_TYPES = ("application/vnd.plotly.v1+json", "text/html")
SANITIZE_CONFIG = Path(__file__).resolve().parent.parent / "tests" / "nbval_sanitize.cfg"


def pytest_addoption(parser, pluginmanager):
    """Register nbval (its options then parse: ``python -m pytest chapters --nbval-lax`` works too)."""
    if not pluginmanager.is_registered(nbval.plugin):  # `-p nbval` on the command line registers it itself
        pluginmanager.register(nbval.plugin, "nbval.plugin")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Strict nbval, as the flags above would set it (before nbval's own configure reads them)."""
    option = config.option
    if not option.nbval_lax:
        option.nbval = True
    if not option.current_env and not option.nbval_kernel_name:
        option.nbval_current_env = True
    if option.nbval_sanitize_with is None and option.sanitize_with is None:
        option.nbval_sanitize_with = str(SANITIZE_CONFIG)


def pytest_collectstart(collector):
    path = getattr(collector, "path", None)
    if path is not None and str(path).endswith(".ipynb"):
        collector.skip_compare += SKIPPED_MIME_TYPES


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """A notebook's cells are one story told in order: ``--random-order`` may move whole notebooks, never
    the cells inside one (pytest-random-order's own marker, read by its later hook)."""
    for item in items:
        if str(item.path).endswith(".ipynb"):
            item.add_marker(pytest.mark.random_order(disabled=True))


def pytest_collection_finish(session):
    """The stored outputs were made with SmolLM2's converted weights already cached: on a new machine (or in
    a shuffled run) the first notebook to load it would otherwise show the one-off conversion's progress
    bar as an extra output. Build the cache here, before any notebook runs."""
    if not session.config.option.collectonly and any(str(i.path).endswith(".ipynb") for i in session.items):
        # In a child process: importing the loader here would import triton in compiled mode, which sends
        # the Triton interpreter tests to their fresh-process rerun (tests/attention/test_triton_backend.py).
        code = "from minivllm.model.loader import smollm2_folder; smollm2_folder()"
        subprocess.run([sys.executable, "-c", code], check=True)
