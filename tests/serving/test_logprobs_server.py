"""The OpenAI server's ``logprobs`` (completions: an int k) and ``logprobs`` + ``top_logprobs`` (chat), in the
shapes vLLM 0.8.5's server returns, streamed and not, and vLLM's extra field ``prompt_logprobs`` (not streamed);
their numbers are the engine's (``CompletionOutput.logprobs``, checked against HF in tests/sample/test_logprobs.py).
Out-of-range values are a 400 naming the field (§11.9)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from minivllm.sampling_params import SamplingParams
from tests.helpers.server import TINY_SERVER_FLAGS, running_server, stream, wait_idle

PROMPT = "the cat sat on the mat"
CHAT = [{"role": "user", "content": "hello world, the dog"}]
K = 3
TOL = 1e-5


@pytest.fixture(scope="module")
def server(tiny_qwen2):
    with running_server(tiny_qwen2, *TINY_SERVER_FLAGS) as srv:
        yield srv


@pytest.fixture(scope="module")
def offline(tiny_qwen2):
    from minivllm import LLM

    return LLM(model=tiny_qwen2, max_model_len=256, num_gpu_blocks=256)


def offline_logprobs(offline, prompt_ids, max_tokens):
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True, logprobs=K)
    out = offline.generate({"prompt_token_ids": prompt_ids}, params, use_tqdm=False)[0].outputs[0]
    return out.token_ids, out.logprobs


def test_completion_logprobs_have_openais_shape_and_the_engines_numbers(server, offline):
    body = {"prompt": PROMPT, "max_tokens": 6, "temperature": 0.0, "ignore_eos": True, "logprobs": K}
    resp = httpx.post(f"{server.base_url}/v1/completions", json=body, timeout=60)
    assert resp.status_code == 200, resp.text
    lp = resp.json()["choices"][0]["logprobs"]
    assert set(lp) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"}
    tok = offline.get_tokenizer()
    ids, expected = offline_logprobs(offline, tok.encode(PROMPT), 6)
    assert lp["tokens"] == tok.convert_ids_to_tokens(ids)  # vLLM 0.8.5: the tokenizer's tokens
    for got, token, position in zip(lp["token_logprobs"], ids, expected):
        assert abs(got - position[token].logprob) < TOL
    for top, position in zip(lp["top_logprobs"], expected):
        names = tok.convert_ids_to_tokens(list(position))
        assert set(top) == set(names) and len(top) <= K + 1  # the sampled token and the top K
        for name, p in zip(names, position.values()):
            assert abs(top[name] - p.logprob) < TOL
    lengths = [len(t) for t in lp["tokens"]]
    assert lp["text_offset"] == [sum(lengths[:i]) for i in range(len(lengths))]
    wait_idle(server.base_url)


def test_chat_logprobs_have_openais_shape(server, offline):
    body = {"messages": CHAT, "max_tokens": 5, "temperature": 0.0, "ignore_eos": True, "logprobs": True,
            "top_logprobs": K}  # fmt: skip
    resp = httpx.post(f"{server.base_url}/v1/chat/completions", json=body, timeout=60)
    assert resp.status_code == 200, resp.text
    content = resp.json()["choices"][0]["logprobs"]["content"]
    assert len(content) == 5
    for entry in content:
        assert set(entry) == {"token", "logprob", "bytes", "top_logprobs"}
        assert entry["bytes"] == list(entry["token"].encode("utf-8"))
        assert len(entry["top_logprobs"]) == K
        # vLLM 0.8.5 lists the position's dict in order: the sampled token first (greedy: also the most likely)
        assert entry["top_logprobs"][0] == {k: entry[k] for k in ("token", "logprob", "bytes")}
        values = [t["logprob"] for t in entry["top_logprobs"]]
        assert values == sorted(values, reverse=True) and all(v <= 0.0 for v in values)
    plain = {**body, "logprobs": False, "top_logprobs": 0}
    resp = httpx.post(f"{server.base_url}/v1/chat/completions", json=plain, timeout=60)
    assert resp.json()["choices"][0]["logprobs"] is None
    wait_idle(server.base_url)


@pytest.mark.parametrize("chat", [False, True])
def test_streamed_logprobs_equal_the_whole_answers(server, chat):
    url = server.base_url
    if chat:
        endpoint, body = "chat/completions", {"messages": CHAT, "logprobs": True, "top_logprobs": K}
    else:
        endpoint, body = "completions", {"prompt": PROMPT, "logprobs": K}
    body = {**body, "max_tokens": 8, "temperature": 0.0, "ignore_eos": True}

    async def run():
        async with httpx.AsyncClient(timeout=60) as c:
            return await stream(c, f"{url}/v1/{endpoint}", body), await c.post(f"{url}/v1/{endpoint}", json=body)

    streamed, whole = asyncio.run(run())
    assert streamed.status == 200 and whole.status_code == 200
    chunks = [ch["logprobs"] for c in streamed.chunks for ch in c.get("choices", []) if ch.get("logprobs")]
    expected = whole.json()["choices"][0]["logprobs"]
    if chat:
        assert [e for c in chunks for e in c["content"]] == expected["content"]
    else:
        for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
            assert [x for c in chunks for x in c[key]] == expected[key], key
    wait_idle(url)


@pytest.mark.parametrize("chat", [False, True])
def test_prompt_logprobs_are_the_engines(server, offline, chat):
    """vLLM's extra field ``prompt_logprobs``: per choice for completions, beside ``choices`` for chat."""
    url = server.base_url
    body = {"max_tokens": 2, "temperature": 0.0, "prompt_logprobs": 2}
    body |= {"messages": CHAT} if chat else {"prompt": PROMPT}
    resp = httpx.post(f"{url}/v1/{'chat/completions' if chat else 'completions'}", json=body, timeout=60)
    assert resp.status_code == 200, resp.text
    answer = resp.json()
    got = answer["prompt_logprobs"] if chat else answer["choices"][0]["prompt_logprobs"]
    if chat:
        assert "prompt_logprobs" not in answer["choices"][0]
        assert got[0] is None and len(got) > 5  # the chat template's tokens count too
        return
    tok = offline.get_tokenizer()
    ids = tok.encode(PROMPT)
    params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=2)
    expected = offline.generate({"prompt_token_ids": ids}, params, use_tqdm=False)[0].prompt_logprobs
    assert got[0] is None and expected is not None and len(got) == len(expected) == len(ids)
    for position, reference in zip(got[1:], expected[1:]):
        assert reference is not None and set(position) == {str(t) for t in reference}  # JSON keys are strings
        for t, lp in reference.items():
            entry = position[str(t)]
            assert abs(entry["logprob"] - lp.logprob) < TOL
            assert (entry["rank"], entry["decoded_token"]) == (lp.rank, lp.decoded_token)
    wait_idle(url)


BAD = [  # (endpoint, body, param, words)
    ("completions", {"prompt": "x", "logprobs": 21}, "logprobs", "logprobs must be in [0, 20]"),
    ("completions", {"prompt": "x", "logprobs": -1}, "logprobs", "logprobs must be in [0, 20]"),
    ("chat/completions", {"messages": CHAT, "logprobs": True, "top_logprobs": 21}, "top_logprobs", "[0, 20]"),
    ("chat/completions", {"messages": CHAT, "logprobs": True, "top_logprobs": -1}, "top_logprobs", "[0, 20]"),
    ("chat/completions", {"messages": CHAT, "top_logprobs": 2}, "top_logprobs", "`logprobs` must be set to true"),
    ("completions", {"prompt": "x", "prompt_logprobs": 21}, "prompt_logprobs", "prompt_logprobs"),  # streamed: never
]


@pytest.mark.parametrize(("endpoint", "body", "param", "words"), BAD)
@pytest.mark.parametrize("stream_it", [False, True])
def test_out_of_range_logprobs_are_a_400_naming_the_field(server, endpoint, body, param, words, stream_it):
    resp = httpx.post(f"{server.base_url}/v1/{endpoint}", json={**body, "stream": stream_it}, timeout=60)
    err = resp.json()["error"]
    assert resp.status_code == 400 and err["param"] == param and err["type"] == "invalid_request_error"
    assert words in err["message"], err["message"]


@pytest.mark.parametrize("endpoint", ["completions", "chat/completions"])
def test_prompt_logprobs_are_not_streamed(server, endpoint):
    body = {"prompt": "x"} if endpoint == "completions" else {"messages": CHAT}
    resp = httpx.post(f"{server.base_url}/v1/{endpoint}", json={**body, "prompt_logprobs": 1, "stream": True})
    err = resp.json()["error"]
    assert resp.status_code == 400 and err["param"] == "prompt_logprobs"
    assert err["message"] == "`prompt_logprobs` are not available when `stream=True`."


def test_the_openai_client_reads_them_and_they_equal_hf(server, tiny_qwen2):
    """The official client parses both shapes; the numbers equal HF's log-softmax of the tiny model (fp32)."""
    openai = pytest.importorskip("openai")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_qwen2)
    hf = AutoModelForCausalLM.from_pretrained(tiny_qwen2, dtype=torch.float32).eval()
    with openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="EMPTY", max_retries=0, timeout=60) as client:
        model = client.models.list().data[0].id
        extra = {"ignore_eos": True}
        completion = client.completions.create(
            model=model, prompt=PROMPT, max_tokens=5, temperature=0.0, logprobs=2, extra_body=extra
        ).choices[0]
        chat = client.chat.completions.create(
            model=model, messages=CHAT, max_tokens=3, temperature=0.0, logprobs=True, top_logprobs=2, extra_body=extra
        ).choices[0]
    assert completion.logprobs is not None and chat.logprobs is not None and chat.logprobs.content is not None
    ids = tok.convert_tokens_to_ids(completion.logprobs.tokens)
    prompt = tok.encode(PROMPT)
    with torch.inference_mode():
        ref = hf(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1].float().log_softmax(dim=-1)
    for token_id, got, top, row in zip(ids, completion.logprobs.token_logprobs, completion.logprobs.top_logprobs, ref):
        assert got is not None and abs(got - row[token_id].item()) < 1e-4
        assert top is not None and all(abs(v - row[tok.convert_tokens_to_ids(t)].item()) < 1e-4 for t, v in top.items())
    assert [len(entry.top_logprobs) for entry in chat.logprobs.content] == [2, 2, 2]
    wait_idle(server.base_url)
