"""Shared fixtures: tiny random Qwen2 / Llama / Mistral HF folders (saved to tmp) and smollm2, loaded once.
Hypothesis profiles: ``dev`` (100 examples per property, the default) and ``ci`` (1,000), loaded when the
environment has CI=true (.ci/run sets it); ``--hypothesis-profile ci`` (or ``dev``) on the command line wins.

A run of the core loop's paths only (tests/helpers/torch_free.py) fails if anything in it imports torch.

Nothing here imports torch: the fixtures import what they build with, so the pure-Python tests start fast.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

pytest.register_assert_rewrite("tests.helpers")  # a failed assert in a helper shows its values

settings.register_profile("dev", max_examples=100)
settings.register_profile("ci", max_examples=1000)
settings.load_profile("ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev")


def pytest_configure(config: pytest.Config) -> None:
    from tests.helpers.torch_free import TorchFreeGuard, torch_free_run

    if torch_free_run(config):
        config.pluginmanager.register(TorchFreeGuard(), "torch-free")


@pytest.fixture(scope="session")
def tiny_qwen2(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.helpers.tiny_models import save_tiny_model

    return save_tiny_model(str(tmp_path_factory.mktemp("tiny_qwen2")), "qwen2")


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.helpers.tiny_models import save_tiny_model

    return save_tiny_model(str(tmp_path_factory.mktemp("tiny_llama")), "llama")


@pytest.fixture(scope="session")
def tiny_mistral(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.helpers.tiny_models import save_tiny_model

    return save_tiny_model(str(tmp_path_factory.mktemp("tiny_mistral")), "mistral")


@pytest.fixture(scope="module")
def tiny(tiny_qwen2):
    """The tiny Qwen2 loaded once per test module (a module may switch its CPU GEMM: not shared wider)."""
    from minivllm.model.loader import load_model

    return load_model(tiny_qwen2)


@pytest.fixture(scope="session")
def smollm2():
    """The default model, loaded once per session (the first ever load builds the cache, ~25 s)."""
    from minivllm.model.loader import load_model

    return load_model("smollm2")


os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
