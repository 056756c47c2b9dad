"""Hub ids through a Hugging Face cache, offline: run in a fresh process whose HF_HOME is a throw-away cache
holding ``tiny-org/tiny-llama`` and HF_HUB_OFFLINE=1 (huggingface_hub reads both at import). Prints JSON:
where LLM(model=...), ``serve --model`` and the instructor notebook's load_model resolved the id, the greedy
tokens from the hub id and from the plain folder, and the error for an id that is not cached."""

from __future__ import annotations

import json
import sys

HUB_ID, ABSENT = "tiny-org/tiny-llama", "tiny-org/not-cached"


def main(local_folder: str) -> None:
    from minivllm.entrypoints.llm import LLM
    from minivllm.model.loader import load_model
    from minivllm.sampling_params import SamplingParams
    from minivllm.serving.server import build_engine, build_parser

    greedy = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
    out: dict = {}
    tokens = {}
    for name, model in (("hub", HUB_ID), ("folder", local_folder)):
        llm = LLM(model=model, device="cpu", max_model_len=64)
        tokens[name] = llm.generate([[5, 6, 7, 8, 9]], greedy)[0].outputs[0].token_ids
        if name == "hub":
            out["llm_folder"] = llm.engine.model_runner.loaded.hf_folder
    out["tokens"] = tokens
    args = build_parser().parse_args(["--model", HUB_ID, "--device", "cpu", "--max-model-len", "64"])
    out["serve_folder"] = build_engine(args).engine.model_runner.loaded.hf_folder
    out["instructor_folder"] = load_model(HUB_ID, "float32", "cpu").hf_folder  # MINIVLLM_INSTRUCTOR_MODEL's path
    try:
        load_model(ABSENT)
        out["absent_error"] = None
    except FileNotFoundError as e:
        out["absent_error"] = str(e)
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
