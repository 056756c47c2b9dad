"""Hub model ids (``org/name``) resolve through the Hugging Face cache, as vLLM's do: ``LLM(model=...)``,
``serve --model`` and the instructor notebook's ``load_model`` (MINIVLLM_INSTRUCTOR_MODEL). Tested offline
(HF_HUB_OFFLINE=1) with a tiny model laid out in a throw-away cache (HF_HOME in tmp); an id that is not cached
fails with an error naming it. No hub is reachable from the tests: the download itself is huggingface_hub's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minivllm.model.loader import is_hub_id

ROOT = Path(__file__).resolve().parents[2]
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_what_counts_as_a_hub_id(tmp_path):
    assert is_hub_id("HuggingFaceTB/SmolLM2-135M-Instruct") and is_hub_id("meta-llama/Llama-3.1-8B-Instruct")
    assert not is_hub_id("smollm2") and not is_hub_id("/abs/folder") and not is_hub_id("./rel/folder")
    assert not is_hub_id("a/b/c") and not is_hub_id("~/models/x")
    (tmp_path / "org" / "name").mkdir(parents=True)
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        assert not is_hub_id("org/name")  # an existing folder wins, as in vLLM (os.path.exists)
    finally:
        os.chdir(cwd)


def lay_out_hf_cache(hf_home: Path, repo_id: str, folder: str) -> Path:
    """The hub cache's layout (huggingface_hub's file_download.py): refs/main names a commit whose snapshot
    folder holds the files."""
    repo = hf_home / "hub" / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    snapshot = repo / "snapshots" / COMMIT
    shutil.copytree(folder, snapshot)
    return snapshot


@pytest.mark.slow  # a fresh process (the hub reads HF_HOME and HF_HUB_OFFLINE at import), three engines
def test_hub_id_resolves_offline_through_the_cache(tiny_llama, tmp_path):
    snapshot = lay_out_hf_cache(tmp_path / "hf", "tiny-org/tiny-llama", tiny_llama)
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    env.pop("HF_HUB_CACHE", None)
    res = subprocess.run([sys.executable, "-m", "tests.helpers.hub_cache_check", tiny_llama], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["llm_folder"] == out["serve_folder"] == out["instructor_folder"] == str(snapshot)
    assert out["tokens"]["hub"] == out["tokens"]["folder"]
    error = out["absent_error"]
    assert "'tiny-org/not-cached'" in error and "HF_HUB_OFFLINE is set" in error
    assert str(tmp_path / "hf" / "hub") in error  # where it looked
