"""The decode-graph path of ModelRunner on a CPU: the static buffers, the padding to a captured size and the
replay, with each "graph" run eagerly on those buffers (a CPU cannot capture). Run in a fresh process with
TRITON_INTERPRET=1 (the Triton backend is the one the graphs use): ``python -m tests.helpers.graph_replay_cpu
MODEL_FOLDER``; prints JSON: the eager and the replayed greedy tokens, and the padded size of every replay."""

from __future__ import annotations

import json
import os
import sys


def main(folder: str) -> None:
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("run me with TRITON_INTERPRET=1 set before anything imports triton")
    from minivllm.config import EngineConfig
    from minivllm.engine.llm_engine import LLMEngine
    from minivllm.model.loader import load_model
    from minivllm.sampling_params import SamplingParams
    from minivllm.worker.model_runner import ModelRunner

    loaded = load_model(folder, "float32", "cpu")
    lengths, max_tokens = [5, 17, 9, 30, 3], [6, 3, 8, 5, 7]  # finishing at different steps: 5, 4, 3 ... decodes
    replayed: list[list[int]] = []

    def eager_capture(fn, pool):  # the graph's forward on the static buffers, run again at each "replay"
        def replay():
            out = fn()
            replayed[-1].append(out.shape[0])
            return out

        return replay

    tokens = {}
    for mode in ("eager", "graphs"):
        config = EngineConfig.from_kwargs(
            model=folder, device="cpu", dtype="float32", attention_backend="triton", max_num_seqs=8,
            max_model_len=64, num_gpu_blocks=64, block_size=16, enforce_eager=mode == "eager",
        )  # fmt: skip
        runner = ModelRunner(config, loaded)
        if mode == "graphs":
            assert runner.eager_reason is not None and "CUDA" in runner.eager_reason  # on a CPU: eager, and why
            runner.eager_reason, runner.graph_capture = None, eager_capture
            replayed.append([])
        engine = LLMEngine(config, model_runner=runner)
        if mode == "graphs":
            assert runner.decode_graphs is not None and runner.decode_graphs.sizes == [1, 2, 4, 8]
            replayed[-1].clear()  # the capture's own calls
        for i, (n, m) in enumerate(zip(lengths, max_tokens)):
            prompt = [(7 * i + 3 * j) % loaded.arch.vocab_size for j in range(n)]
            engine.add_request(str(i), prompt, SamplingParams(max_tokens=m, temperature=0.0, ignore_eos=True))
        while engine.has_unfinished_requests():
            engine.step()
        tokens[mode] = [engine.outputs[str(i)].outputs[0].token_ids for i in range(len(lengths))]
    assert all(len(t) == m for t, m in zip(tokens["eager"], max_tokens)), tokens  # no request failed
    print(json.dumps({"tokens": tokens, "replayed_sizes": replayed[0]}))


if __name__ == "__main__":
    main(sys.argv[1])
