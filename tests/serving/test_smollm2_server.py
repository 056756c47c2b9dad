"""SmolLM2 behind the HTTP server (§11.9): greedy chat and completion streams, running concurrently, give exactly
the text of the offline ``LLM.chat`` / ``LLM.generate`` on the same weights (real chat template, real tokenizer,
incremental detokenization)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from minivllm.sampling_params import SamplingParams
from tests.helpers.server import running_server, stream, wait_idle

KW = {"max_model_len": 1024, "num_gpu_blocks": 96, "max_num_batched_tokens": 256}
QUESTIONS = ["What is the capital of France?"]
MAX_TOKENS = 16
PROMPT = "The three primary colours are"


@pytest.mark.slow
def test_smollm2_streams_equal_offline_llm(smollm2):
    from minivllm import LLM
    from minivllm.config import EngineConfig
    from minivllm.worker.model_runner import ModelRunner

    flags = [x for k, v in KW.items() for x in ("--" + k.replace("_", "-"), str(v))]
    with running_server("smollm2", *flags, loaded=smollm2) as srv:

        async def run():
            async with httpx.AsyncClient(timeout=120) as c:
                body = {"model": "smollm2", "max_tokens": MAX_TOKENS, "temperature": 0}
                chats = [
                    stream(
                        c, f"{srv.base_url}/v1/chat/completions", {**body, "messages": [{"role": "user", "content": q}]}
                    )
                    for q in QUESTIONS
                ]
                text = stream(c, f"{srv.base_url}/v1/completions", {**body, "prompt": PROMPT})
                return await asyncio.gather(*chats, text)

        *chats, completion = asyncio.run(run())
        state = wait_idle(srv.base_url)
    assert state["num_free_blocks"] == state["num_gpu_blocks"] - 1
    llm = LLM("smollm2", model_runner=ModelRunner(EngineConfig.from_kwargs(model="smollm2", **KW), smollm2), **KW)
    params = SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0)
    expected = llm.chat([[{"role": "user", "content": q}] for q in QUESTIONS], params, use_tqdm=False)
    for got, want in zip(chats, (e.outputs[0] for e in expected)):
        assert got.done and got.text == want.text and got.finish_reason == want.finish_reason
    want = llm.generate(PROMPT, params, use_tqdm=False)[0].outputs[0]
    assert completion.text == want.text and len(completion.text) > 10


@pytest.mark.slow
def test_stop_strings_over_http_equal_offline_llm(smollm2):
    """``stop`` through the server, streamed and not: the text is cut where the offline engine cuts it (the stream
    holds back what could still begin a stop string, so no character past it is ever sent)."""
    from minivllm import LLM
    from minivllm.config import EngineConfig
    from minivllm.worker.model_runner import ModelRunner

    llm = LLM("smollm2", model_runner=ModelRunner(EngineConfig.from_kwargs(model="smollm2", **KW), smollm2), **KW)
    greedy = SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0, ignore_eos=True)
    full = llm.generate(PROMPT, greedy, use_tqdm=False)[0].outputs[0].text
    words = full.split()
    stops = [" " + words[len(words) // 2], "\x00never"]
    cases = [(stops, False), (stops, True), (stops[1:], False)]  # the last: no stop string is ever hit
    expected = [
        llm.generate(PROMPT, SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0, ignore_eos=True, stop=stop,
                                            include_stop_str_in_output=inc), use_tqdm=False)[0].outputs[0]
        for stop, inc in cases
    ]  # fmt: skip
    assert expected[0].finish_reason == "stop" and expected[0].text == full[: full.find(stops[0])]
    assert expected[2].finish_reason == "length" and expected[2].text == full
    flags = [x for k, v in KW.items() for x in ("--" + k.replace("_", "-"), str(v))]
    with running_server("smollm2", *flags, loaded=smollm2) as srv:

        async def run():
            async with httpx.AsyncClient(timeout=120) as c:
                out = []
                for stop, inc in cases:
                    body = {"model": "smollm2", "prompt": PROMPT, "max_tokens": MAX_TOKENS, "temperature": 0,
                            "ignore_eos": True, "stop": stop, "include_stop_str_in_output": inc}  # fmt: skip
                    streamed = await stream(c, f"{srv.base_url}/v1/completions", body)
                    plain = (await c.post(f"{srv.base_url}/v1/completions", json=body)).json()["choices"][0]
                    out.append((streamed, plain))
                return out

        got = asyncio.run(run())
        state = wait_idle(srv.base_url)
    assert state["num_free_blocks"] == state["num_gpu_blocks"] - 1
    for (streamed, plain), want in zip(got, expected):
        assert streamed.done and streamed.text == want.text and streamed.finish_reason == want.finish_reason
        assert plain["text"] == want.text and plain["finish_reason"] == want.finish_reason
