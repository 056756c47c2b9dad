"""The OpenAI server on 127.0.0.1 with the tiny Qwen2 model (§11.9): concurrent greedy streams equal the offline
``LLM.generate``, disconnects abort and free their blocks, bad input gets a 4xx naming the field while others are
served, overload preempts and loses nothing, /metrics uses vLLM's names, the admin switch changes scheduling."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from minivllm.sampling_params import SamplingParams
from minivllm.serving.serving import FALLBACK_CHAT_TEMPLATE
from tests.helpers.server import (
    TINY_SERVER_FLAGS,
    give_up_while_generating,
    running_server,
    stream,
    trace_of,
    wait_idle,
)

PROMPTS = ["the cat sat on the mat", "hello world, the dog", "the dog ran far and the cat", "world"]


@pytest.fixture(scope="module")
def server(tiny_qwen2):
    with running_server(tiny_qwen2, *TINY_SERVER_FLAGS) as srv:
        yield srv


@pytest.fixture(scope="module")
def offline(tiny_qwen2):
    from minivllm import LLM

    return LLM(model=tiny_qwen2, max_model_len=256, num_gpu_blocks=256)


def offline_text(offline, prompt, max_tokens: int) -> tuple[str, list[int]]:
    out = offline.generate(prompt, SamplingParams(max_tokens=max_tokens, temperature=0.0), use_tqdm=False)[0]
    return out.outputs[0].text, out.outputs[0].token_ids


def test_health_models_and_metrics_names(server):
    assert httpx.get(f"{server.base_url}/health").status_code == 200
    card = httpx.get(f"{server.base_url}/v1/models").json()["data"][0]
    assert card["object"] == "model" and card["max_model_len"] == 256
    body = {"model": card["id"], "prompt": "the cat", "max_tokens": 4, "temperature": 0}
    assert httpx.post(f"{server.base_url}/v1/completions", json=body).status_code == 200
    text = httpx.get(f"{server.base_url}/metrics").text
    names = (
        "vllm:num_requests_running",
        "vllm:num_preemptions_total",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:e2e_request_latency_seconds_count",
        "vllm:request_success_total",
        "vllm:kv_cache_usage_perc",
    )
    for name in names:
        assert f"\n{name}{{" in text, name
    assert f'model_name="{card["id"]}"' in text


def test_concurrent_greedy_streams_equal_offline_generate(server, offline):
    url = server.base_url
    tok = offline.tokenizer
    chat_text = tok.apply_chat_template(
        [{"role": "user", "content": "hello"}],
        chat_template=FALLBACK_CHAT_TEMPLATE,
        add_generation_prompt=True,
        tokenize=False,
    )
    chat_ids = tok.encode(chat_text, add_special_tokens=False)
    cases = [("prompt", p, 40 + 10 * i) for i, p in enumerate(PROMPTS)] + [("ids", tok.encode("the mat"), 60)]

    async def run():
        async with httpx.AsyncClient(timeout=60) as c:
            jobs = [
                stream(
                    c,
                    f"{url}/v1/completions",
                    {"prompt": p, "max_tokens": n, "temperature": 0, "stream_options": {"include_usage": True}},
                )
                for kind, p, n in cases
            ]
            jobs.append(
                stream(
                    c,
                    f"{url}/v1/chat/completions",
                    {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 30, "temperature": 0},
                )
            )
            plain = c.post(f"{url}/v1/completions", json={"prompt": PROMPTS[0], "max_tokens": 40, "temperature": 0})
            return await asyncio.gather(*jobs, plain)

    *streams, chat, plain = asyncio.run(run())
    for (_, prompt, n), got in zip(cases, streams):
        text, ids = offline_text(offline, prompt, n)
        assert got.status == 200 and got.done and got.finish_reason == "length"
        assert got.usage["completion_tokens"] == len(ids) == n == len(got.times)  # one chunk per step and token
        assert got.text == text
    assert chat.done and chat.chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chat.text == offline_text(offline, chat_ids, 30)[0]
    body = plain.json()
    assert body["object"] == "text_completion" and body["usage"]["completion_tokens"] == 40
    assert body["choices"][0]["text"] == offline_text(offline, PROMPTS[0], 40)[0]
    state = wait_idle(url)
    assert state["num_free_blocks"] == state["num_gpu_blocks"] - 1


def test_disconnects_abort_and_free_blocks(server):
    url = server.base_url

    async def run():
        async with httpx.AsyncClient(timeout=60) as c:
            survivor = stream(c, f"{url}/v1/completions", {"prompt": "the cat", "max_tokens": 150, "temperature": 0})
            body = {"prompt": "the dog", "max_tokens": 200, "ignore_eos": True}  # sampled: no early EOS
            quitter = stream(c, f"{url}/v1/completions", body, stop_after=3)
            return await asyncio.gather(survivor, quitter)

    survivor, quitter = asyncio.run(run())
    # a non-streaming client that gives up (once its request is generating) is aborted too
    gone = asyncio.run(give_up_while_generating(url, {"prompt": "world", "max_tokens": 220, "ignore_eos": True}))
    state = wait_idle(url)
    assert state["num_free_blocks"] == state["num_gpu_blocks"] - 1
    assert survivor.done and len(survivor.times) == 150
    assert len(quitter.times) == 3 and not quitter.done
    rec = trace_of(url, quitter.chunks[0]["id"])["requests"][quitter.chunks[0]["id"]]
    assert rec["finish_reason"] == "abort" and len(rec["token_times"]) < 200
    rec = trace_of(url, gone)["requests"][gone]
    assert rec["finish_reason"] == "abort" and 0 < len(rec["token_times"]) < 220
    reasons = [r["finish_reason"] for r in trace_of(url)["requests"].values()]
    assert reasons.count("abort") == 2  # the streaming quitter and the non-streaming one


BAD = [  # (endpoint, body or raw text, status, param)
    ("completions", '{"prompt": "x", ', 400, None),
    ("completions", {"prompt": "x", "model": "gpt-4"}, 404, "model"),
    ("completions", {"prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
    ("completions", {"prompt": "x", "max_tokens": "many"}, 400, "max_tokens"),
    ("completions", {"prompt": list(range(3, 260)), "max_tokens": 1}, 400, "prompt"),
    ("completions", {"prompt": "x", "max_tokens": 300}, 400, "max_tokens"),
    ("completions", {"prompt": "x", "n": 2}, 400, "n"),
    ("completions", {"prompt": "x", "best_of": 3}, 400, "best_of"),
    ("completions", {"prompt": "x", "logprobs": 21}, 400, "logprobs"),
    ("completions", {"prompt": "x", "stop": [""]}, 400, "stop"),
    ("completions", {"prompt": "x", "stop": 5}, 400, "stop"),
    ("completions", {"prompt": [5, 99999]}, 400, "prompt"),
    ("completions", {"prompt": "x", "temperature": -1}, 400, "temperature"),
    ("completions", {"max_tokens": 3}, 400, "prompt"),
    ("chat/completions", {"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2}, 400, "top_logprobs"),
    ("chat/completions", {"messages": []}, 400, "messages"),
]


def test_bad_input_gets_openai_error_naming_the_field_while_others_stream(server):
    url = server.base_url

    async def bad(c, endpoint, body, stream_it):
        kwargs = (
            {"content": body, "headers": {"Content-Type": "application/json"}}
            if isinstance(body, str)
            else {"json": {**body, "stream": stream_it}}
        )
        return await c.post(f"{url}/v1/{endpoint}", **kwargs)

    async def run():
        async with httpx.AsyncClient(timeout=60) as c:
            body = {"prompt": "the", "max_tokens": 120, "ignore_eos": True}  # sampled: an EOS must not end it early
            good = asyncio.create_task(stream(c, f"{url}/v1/completions", body))
            answers = await asyncio.gather(*[bad(c, e, b, i % 2 == 0) for i, (e, b, _, _) in enumerate(BAD)])
            return await good, answers

    good, answers = asyncio.run(run())
    for (_, body, status, param), resp in zip(BAD, answers):
        err = resp.json()["error"]
        assert resp.status_code == status, (body, err)
        assert set(err) == {"message", "type", "param", "code"} and err["message"]
        assert err["param"] == param, (body, err)
    assert good.done and len(good.times) == 120
    state = wait_idle(url)
    assert state["num_free_blocks"] == state["num_gpu_blocks"] - 1


def test_admin_switch_changes_scheduling_between_steps(server):
    url = server.base_url
    off = httpx.post(f"{url}/admin/scheduling", json={"enable_chunked_prefill": False}).json()
    assert off["enable_chunked_prefill"] is False and off["max_num_batched_tokens"] == 256
    ok = httpx.post(f"{url}/v1/completions", json={"prompt": list(range(3, 203)), "max_tokens": 2}).json()
    assert ok["usage"]["completion_tokens"] == 2
    steps = httpx.get(f"{url}/admin/state", params={"last_steps": 3}).json()["steps"]
    assert max(s["prefill_tokens"] for s in steps) == 200  # the whole prompt in one step
    on = httpx.post(f"{url}/admin/scheduling", json={"enable_chunked_prefill": True}).json()
    assert on["enable_chunked_prefill"] is True and on["max_num_batched_tokens"] == 64  # the start-up budget
    bad = httpx.post(f"{url}/admin/scheduling", json={"max_num_batched_tokens": 4})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "max_num_batched_tokens"
    assert httpx.post(f"{url}/admin/scheduling", json={"chunky": 1}).json()["error"]["param"] == "chunky"


def test_overload_queues_and_preempts_without_losing_a_request(tiny_qwen2, offline):
    flags = ("--max-model-len", "128", "--num-gpu-blocks", "14", "--max-num-batched-tokens", "64")
    flags += ("--max-num-seqs", "16")
    prompts = [[3 + (7 * i + j) % 250 for j in range(12 + i)] for i in range(10)]
    with running_server(tiny_qwen2, *flags) as srv:

        async def run():
            body = {"max_tokens": 60, "temperature": 0, "ignore_eos": True}
            async with httpx.AsyncClient(timeout=120) as c:
                return await asyncio.gather(
                    *[stream(c, f"{srv.base_url}/v1/completions", {**body, "prompt": p}) for p in prompts]
                )

        got = asyncio.run(run())
        metrics = httpx.get(f"{srv.base_url}/metrics").text
        state = wait_idle(srv.base_url)
    assert all(g.done and len(g.times) == 60 for g in got)
    preemptions = next(ln for ln in metrics.splitlines() if ln.startswith("vllm:num_preemptions_total{"))
    assert float(preemptions.rsplit(" ", 1)[1]) > 0
    assert state["num_free_blocks"] == state["num_gpu_blocks"] - 1
    params = SamplingParams(max_tokens=60, temperature=0.0, ignore_eos=True)
    expected = offline.generate(prompts, params, use_tqdm=False)
    assert [g.text for g in got] == [e.outputs[0].text for e in expected]  # recompute after preemption changes nothing


def test_rag_prompt_is_a_chat_turn_of_exactly_the_asked_length(server, offline):
    tok = offline.tokenizer
    got = {seed: httpx.get(f"{server.base_url}/admin/rag_prompt", params={"num_tokens": 150, "seed": seed}).json()
           for seed in (1, 2)}  # fmt: skip
    a, b = got[1]["prompt_token_ids"], got[2]["prompt_token_ids"]
    assert len(a) == len(b) == got[1]["num_tokens"] == 150
    text = tok.decode(a)
    assert text.startswith("user: ") and text.endswith("\nassistant:")  # FALLBACK_CHAT_TEMPLATE, generation prompt
    assert "[Document 1.0]" in text and "summarise how the aqueducts worked" in text
    opening = len(tok.encode("user: ", add_special_tokens=False))
    first_difference = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    assert opening <= first_difference < opening + 16  # the seeds differ within the first block after the opening
    small = httpx.get(f"{server.base_url}/admin/rag_prompt", params={"num_tokens": 16}).json()["error"]
    assert small["param"] == "num_tokens" and "at least" in small["message"]
