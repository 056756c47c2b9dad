"""The OpenAI server driven by the official ``openai`` Python client (§11.9): what the client sends is accepted,
what the server answers parses into the client's types, greedy text equals HF transformers, errors become the
client's exception classes with the OpenAI error body, and a stream the client closes early frees its KV blocks.

The shapes are those of ``vllm/entrypoints/openai/protocol.py`` and ``serving_completion.py`` / ``serving_chat.py``.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

openai = pytest.importorskip("openai")

from minivllm.serving.serving import FALLBACK_CHAT_TEMPLATE  # noqa: E402
from tests.helpers.hf_reference import hf_greedy  # noqa: E402
from tests.helpers.server import TINY_SERVER_FLAGS, running_server, trace_of, wait_idle  # noqa: E402

PROMPT = "the cat"  # prompts whose greedy continuations vary (many prompts make the tiny model repeat one token)
PROMPTS = ["world", "hello world", "ran far", "cat"]
IDS = [1, 2, 3]
CHAT = [{"role": "user", "content": "hello, the cat"}]
N = 8  # max_tokens of the greedy cases
EOS = 2  # the tiny models' eos_token_id


@pytest.fixture(scope="module")
def server(tiny_qwen2):
    with running_server(tiny_qwen2, *TINY_SERVER_FLAGS) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="EMPTY", max_retries=0, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def model(client) -> str:
    return client.models.list().data[0].id


@pytest.fixture(scope="module")
def tok(tiny_qwen2):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_qwen2)  # what the server loads (minivllm.model.loader)


def chat_ids(tok, messages) -> list[int]:
    """The server's chat prompt: the tiny tokenizer has no template, so FALLBACK_CHAT_TEMPLATE."""
    text = tok.apply_chat_template(
        messages, chat_template=FALLBACK_CHAT_TEMPLATE, add_generation_prompt=True, tokenize=False
    )
    return tok.encode(text, add_special_tokens=False)


@pytest.fixture(scope="module")
def greedy(tiny_qwen2, tok) -> dict:
    """HF greedy references: prompt key -> (text, number of output tokens, finish_reason), cut after EOS as the
    server stops there (``hf_greedy`` generates exactly N tokens, EOS disabled)."""
    keys = [PROMPT, *PROMPTS, tuple(IDS), "chat"]
    ids = [tok.encode(k) if isinstance(k, str) else list(k) for k in keys[:-1]] + [chat_ids(tok, CHAT)]
    out = {}
    for key, new in zip(keys, hf_greedy(tiny_qwen2, ids, N)):
        cut = new[: new.index(EOS) + 1] if EOS in new else new
        out[key] = (tok.decode(cut, skip_special_tokens=True), len(cut), "stop" if EOS in new else "length")
    return out


def test_models_list_is_the_served_model(client, server, tiny_qwen2):
    models = client.models.list().data
    raw = httpx.get(f"{server.base_url}/v1/models").json()["data"]
    assert len(models) == len(raw) == 1
    assert models[0].id == raw[0]["id"] == tiny_qwen2 and models[0].object == "model"
    assert models[0].max_model_len == raw[0]["max_model_len"] == 256  # vLLM's extra field, kept by the client
    with pytest.raises(openai.NotFoundError):  # no /v1/models/{id} route, as in vLLM
        client.models.retrieve("tiny")


def test_completion_equals_hf_greedy_with_usage(client, model, tok, greedy):
    text, n, finish = greedy[PROMPT]
    assert finish == "length"  # the prompt is chosen so that the reference does not stop early
    got = client.completions.create(model=model, prompt=PROMPT, max_tokens=N, temperature=0)
    assert isinstance(got, openai.types.Completion) and got.object == "text_completion"
    assert got.id.startswith("cmpl-") and got.model == model and len(got.choices) == 1
    assert got.choices[0].text == text and got.choices[0].finish_reason == "length"
    num_prompt = len(tok.encode(PROMPT))
    usage = got.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (num_prompt, N, num_prompt + N)


def test_streamed_completion_concatenates_to_the_same_text(client, model, tok, greedy):
    text = greedy[PROMPT][0]
    chunks = list(client.completions.create(model=model, prompt=PROMPT, max_tokens=N, temperature=0, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == text
    assert chunks[-1].choices[0].finish_reason == "length"
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1]) and all(c.usage is None for c in chunks)
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("cmpl-")
    stream = client.completions.create(
        model=model, prompt=PROMPT, max_tokens=N, temperature=0, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    *body, last = chunks
    assert last.choices == [] and last.usage.completion_tokens == N
    assert (
        last.usage.prompt_tokens == len(tok.encode(PROMPT)) and last.usage.total_tokens == N + last.usage.prompt_tokens
    )
    assert "".join(c.choices[0].text for c in body) == text and body[-1].choices[0].finish_reason == "length"


def test_chat_completion_equals_the_same_request_sent_by_httpx(client, server, model, greedy):
    got = client.chat.completions.create(model=model, messages=CHAT, max_tokens=N, temperature=0)
    body = {"model": model, "messages": CHAT, "max_tokens": N, "temperature": 0}
    raw = httpx.post(f"{server.base_url}/v1/chat/completions", json=body, timeout=60).json()
    assert got.object == "chat.completion" and got.id.startswith("chatcmpl-")
    message = got.choices[0].message
    assert message.role == "assistant" and message.content == raw["choices"][0]["message"]["content"]
    text, n, finish = greedy["chat"]
    assert message.content == text and got.choices[0].finish_reason == finish and got.usage.completion_tokens == n
    chunks = list(client.chat.completions.create(model=model, messages=CHAT, max_tokens=N, temperature=0, stream=True))
    assert chunks[0].object == "chat.completion.chunk" and chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == text
    assert chunks[-1].choices[0].finish_reason == finish


def test_chat_content_parts_are_joined_as_vllm_does(client, model, greedy):
    parts = [{"type": "text", "text": CHAT[0]["content"]}]
    got = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": parts}], max_tokens=N, temperature=0
    )
    assert got.choices[0].message.content == greedy["chat"][0]
    image = [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]  # only text parts are served
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": image}], max_tokens=N)
    assert e.value.body["param"] == "messages" and "only text content parts" in e.value.message


def test_prompt_as_token_ids_and_a_list_of_prompts(client, model, greedy):
    text, n, finish = greedy[tuple(IDS)]
    got = client.completions.create(model=model, prompt=IDS, max_tokens=N, temperature=0)
    assert got.choices[0].text == text and got.choices[0].finish_reason == finish
    assert (got.usage.prompt_tokens, got.usage.completion_tokens) == (len(IDS), n)
    for many in (PROMPTS[:2], [IDS, IDS]):  # protocol.completion_prompt: one prompt per request
        with pytest.raises(openai.BadRequestError) as e:
            client.completions.create(model=model, prompt=many, max_tokens=N, temperature=0)
        assert e.value.status_code == 400 and e.value.body["param"] == "prompt" and "Batched" in e.value.message


@pytest.mark.parametrize("wrapped", [[PROMPT], "ids"], ids=["text", "ids"])
def test_a_list_of_one_prompt_is_that_prompt(client, model, tok, greedy, wrapped):
    prompt = [tok.encode(PROMPT)] if wrapped == "ids" else wrapped  # vLLM serves a batch of one as one prompt
    got = client.completions.create(model=model, prompt=prompt, max_tokens=N, temperature=0)
    assert got.choices[0].text == greedy[PROMPT][0]


def test_vllm_extras_in_extra_body(client, model, greedy):
    def run(**extra):
        return client.completions.create(model=model, prompt=PROMPT, max_tokens=N, temperature=0.8, extra_body=extra)

    a, b = run(seed=7, top_k=50, min_tokens=2, ignore_eos=True), run(seed=7, top_k=50, min_tokens=2, ignore_eos=True)
    assert a.choices[0].text == b.choices[0].text and a.usage.completion_tokens == N
    assert run(top_k=1, seed=3).choices[0].text == greedy[PROMPT][0]  # top_k is read: top-1 sampling is greedy
    seeds = {run(seed=s, ignore_eos=True).choices[0].text for s in range(7, 11)}
    assert len(seeds) > 1  # seed is read: different seeds give different samples
    with pytest.raises(openai.BadRequestError) as e:  # min_tokens is read: checked against max_tokens
        run(min_tokens=N + 1)
    assert e.value.body["param"] == "min_tokens"
    # the client's own seed parameter is the same field
    top = client.completions.create(
        model=model,
        prompt=PROMPT,
        max_tokens=N,
        temperature=0.8,
        seed=7,
        extra_body={"top_k": 50, "min_tokens": 2, "ignore_eos": True},
    )
    assert top.choices[0].text == a.choices[0].text


def bad_request(call, param: str) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as e:
        call()
    err = e.value
    assert set(err.body) == {"message", "type", "param", "code"} and err.body["param"] == param == err.param
    assert err.body["message"] in err.message and err.status_code == err.response.status_code
    return err


def test_errors_are_the_clients_exception_types_with_the_openai_body(client, model):
    def make(stream=False, **kw):
        return lambda: client.completions.create(**{"model": model, "prompt": PROMPT, "stream": stream, **kw})

    err = bad_request(make(max_tokens=300), "max_tokens")
    assert isinstance(err, openai.BadRequestError) and err.status_code == 400
    assert "maximum context length is 256 tokens" in err.body["message"] and err.type == "invalid_request_error"
    err = bad_request(make(stream=True, temperature=-1), "temperature")
    assert isinstance(err, openai.BadRequestError) and "non-negative" in err.body["message"]
    err = bad_request(make(model="gpt-4"), "model")
    assert isinstance(err, openai.NotFoundError) and err.status_code == 404 and err.code == "model_not_found"
    err = bad_request(make(n=2), "n")
    assert isinstance(err, openai.BadRequestError) and "n must be 1" in err.body["message"]
    chat = bad_request(lambda: client.chat.completions.create(model=model, messages=CHAT, n=2, stream=True), "n")
    assert isinstance(chat, openai.BadRequestError)


def test_async_client_concurrent_streams_equal_their_own_greedy_text(server, model, greedy):
    async def plain(c, prompt):
        return (await c.completions.create(model=model, prompt=prompt, max_tokens=N, temperature=0)).choices[0].text

    async def streamed(c, prompt):
        stream = await c.completions.create(model=model, prompt=prompt, max_tokens=N, temperature=0, stream=True)
        return "".join([chunk.choices[0].text async for chunk in stream])

    async def run():
        async with openai.AsyncOpenAI(base_url=f"{server.base_url}/v1", api_key="EMPTY", max_retries=0) as c:
            texts = await asyncio.gather(*[plain(c, p) for p in PROMPTS])
            got = zip(texts, await asyncio.gather(*[streamed(c, p) for p in PROMPTS]))  # 4 streams at once
            quitter = await c.completions.create(
                model=model, prompt=PROMPT, max_tokens=200, stream=True, extra_body={"ignore_eos": True}
            )
            await anext(quitter)
            request_id = (await anext(quitter)).id
            await quitter.close()  # the async client's close aborts the request too
            return got, request_id

    got, quitter = asyncio.run(run())
    for prompt, (text, streamed_text) in zip(PROMPTS, got):
        assert streamed_text == text == greedy[prompt][0], prompt
    state = wait_idle(server.base_url)
    assert state["num_free_blocks"] == state["num_gpu_blocks"] - 1
    assert trace_of(server.base_url, quitter)["requests"][quitter]["finish_reason"] == "abort"


def test_streams_closed_by_the_client_abort_and_free_blocks(client, server, model):
    body = dict(model=model, max_tokens=200, stream=True, extra_body={"ignore_eos": True})
    streams = [client.completions.create(prompt=PROMPT, **body), client.chat.completions.create(messages=CHAT, **body)]
    ids = []
    for stream in streams:
        ids.append([next(stream), next(stream)][-1].id)
        stream.close()  # closes the HTTP response: the server sees the disconnect
    state = wait_idle(server.base_url)
    assert state["num_free_blocks"] == state["num_gpu_blocks"] - 1
    for request_id in ids:
        rec = trace_of(server.base_url, request_id)["requests"][request_id]
        assert rec["finish_reason"] == "abort" and len(rec["token_times"]) < 200
