"""Issue 30, findings 1-8: what one valid-looking request could do to everyone else, now refused or bounded.

Oversized lists and chats are refused with a 400 naming the field and the allowed range before pydantic,
the chat template or the tokenizer sees them; lone surrogates are refused in every text field; a stop token
ends the text as vLLM's does (``stop_reason`` the id, its text left out); the server's flags are checked at
start-up; ``/admin/trace`` offsets are bounded; ``/demo/chats`` is bounded and behind the admin token; the
access log shows no poll and no token."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import httpx
import pytest

from minivllm.serving.lifecycle import AccessLogFilter
from tests.helpers.server import TINY_SERVER_FLAGS, running_server, stream

JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def server(tiny_qwen2):
    with running_server(tiny_qwen2, *TINY_SERVER_FLAGS) as srv:
        yield srv


def empty_messages(n: int) -> list[dict]:
    return [{"role": "user", "content": ""}] * n


OVERSIZED = [  # (endpoint, body, param, words of the message)
    ("completions", {"prompt": "the cat", "min_tokens": 2, "stop_token_ids": [5] * 1_000_000}, "stop_token_ids",
     "has 1000000 entries; this server allows 0 to 256 (--max-stop-token-ids)"),
    ("completions", {"prompt": "the cat", "stop": ["zz"] * 300_000}, "stop",
     "has 300000 strings; this server allows 0 to 64 (--max-stop-strings)"),
    ("completions", {"prompt": "the cat", "stop": ["x" * 1000]}, "stop", "allows 1 to 256 (--max-stop-string-len)"),
    ("completions", {"prompt": [5] * 5000}, "prompt", "has 5000 token ids; this server allows 1 to 255"),
    ("chat/completions", {"messages": empty_messages(200_000)}, "messages",
     "has 200000 messages; this server allows 1 to"),
    ("chat/completions", {"messages": [{"role": "user", "content": "a" * 400_000}]}, "messages",
     "characters (roles and contents); this model's maximum context length is 256 tokens; this server allows"),
]  # fmt: skip


@pytest.mark.parametrize(("endpoint", "body", "param", "words"), OVERSIZED)
def test_oversized_lists_and_chats_are_refused_before_the_template_or_the_tokenizer(
    server, endpoint, body, param, words, monkeypatch
):
    """Findings 1-3: 1M stop ids (+139 ms per engine step), 300k stop strings (+55 ms per step), 200k empty
    messages (templated and tokenized for 10-60 s) were all accepted or refused only after the work."""
    tok = server.engine.engine.tokenizer
    calls = []
    monkeypatch.setattr(tok, "apply_chat_template", lambda *a, **k: calls.append("template"), raising=False)
    monkeypatch.setattr(tok, "encode", lambda *a, **k: calls.append("encode"), raising=False)
    resp = httpx.post(f"{server.base_url}/v1/{endpoint}", content=json.dumps(body), headers=JSON, timeout=60)
    err = resp.json()["error"]
    assert resp.status_code == 400 and err["param"] == param and words in err["message"], err
    assert err["type"] == "invalid_request_error" and calls == []


def test_the_message_cap_fits_the_model(server):
    """The default cap: max_model_len (256) / the tokens one more message adds to the templated chat."""
    from minivllm.serving.server import template_tokens_per_message

    resp = httpx.post(f"{server.base_url}/v1/chat/completions", json={"messages": empty_messages(100_000)})
    high = int(resp.json()["error"]["message"].split("allows 1 to ")[1].split(" ")[0])
    per = template_tokens_per_message(server.engine.engine.tokenizer)
    assert per >= 1 and high == 256 // per


TEXT_FIELDS = [  # a lone surrogate in each text field: a 400 naming it
    ("completions", {"prompt": "the cat", "stop": ["a\ud800"]}, "stop"),
    ("completions", {"prompt": "the cat", "stop": "\udfff"}, "stop"),
    ("completions", {"prompt": "the \ud800 cat"}, "prompt"),
    ("completions", {"prompt": "the cat", "model": "m\ud800"}, "model"),
    ("completions", {"prompt": "the cat", "user": "\ud800"}, "user"),
    ("completions", {"prompt": "the cat", "guided_choice": ["a", "\ud800"]}, "guided_choice"),
    ("completions", {"prompt": "the cat", "cache_salt": "\ud800"}, "cache_salt"),
    ("chat/completions", {"messages": [{"role": "user", "content": "hi \ud800"}]}, "messages"),
    ("chat/completions", {"messages": [{"role": "us\ud800er", "content": "hi"}]}, "messages"),
    ("chat/completions", {"messages": [{"role": "user", "content": [{"type": "text", "text": "\ud800"}]}]}, "messages"),
]


@pytest.mark.parametrize(("endpoint", "body", "param"), TEXT_FIELDS)
def test_lone_surrogates_are_refused_in_every_text_field(server, endpoint, body, param):
    """Finding 8: lone surrogates were accepted in ``stop`` only (and model/user went through unchecked)."""
    resp = httpx.post(f"{server.base_url}/v1/{endpoint}", content=json.dumps(body), headers=JSON, timeout=60)
    err = resp.json()["error"]
    assert resp.status_code == 400 and err["param"] == param and "not valid Unicode" in err["message"], err


PROMPT = [5, 17, 42, 99, 7]


@pytest.fixture(scope="module")
def greedy_ids(tiny_qwen2) -> list[int]:
    """The tiny model's greedy output ids for "the cat" (offline, the same weights as the server's)."""
    from minivllm import LLM, SamplingParams

    llm = LLM(model=tiny_qwen2, max_num_batched_tokens=64, max_num_seqs=4, max_model_len=256, num_gpu_blocks=64)
    params = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)
    prompt = {"prompt_token_ids": PROMPT}
    return list(llm.generate([prompt], params, use_tqdm=False)[0].outputs[0].token_ids)


@pytest.mark.parametrize("include", [False, True])
def test_a_stop_token_gives_vllm_stop_reason_and_text(server, greedy_ids, include):
    """Finding 8: ``stop_reason`` was always null and the text kept the stop token's text; vLLM returns the id
    and leaves its text out (unless include_stop_str_in_output), streamed or not."""
    tok = server.engine.engine.tokenizer
    k = next(i for i in range(3, len(greedy_ids)) if greedy_ids[i] not in greedy_ids[:i])
    stop_id = greedy_ids[k]
    want = tok.decode(greedy_ids[: k + 1 if include else k], skip_special_tokens=True)
    body = {"prompt": PROMPT, "max_tokens": 12, "temperature": 0, "ignore_eos": True, "stop_token_ids": [stop_id]}
    body["include_stop_str_in_output"] = include
    choice = httpx.post(f"{server.base_url}/v1/completions", json=body, timeout=60).json()["choices"][0]
    assert (choice["text"], choice["finish_reason"], choice["stop_reason"]) == (want, "stop", stop_id)

    async def streamed():
        async with httpx.AsyncClient(timeout=60) as c:
            return await stream(c, f"{server.base_url}/v1/completions", body)

    got = asyncio.run(streamed())
    assert got.done and got.text == want and got.chunks[-1]["choices"][0]["stop_reason"] == stop_id
    chat = {"messages": [{"role": "user", "content": "the cat"}], "max_tokens": 6, "temperature": 0, "stop": "the"}
    choice = httpx.post(f"{server.base_url}/v1/chat/completions", json=chat, timeout=60).json()["choices"][0]
    assert choice["stop_reason"] == ("the" if choice["finish_reason"] == "stop" else None)


def test_admin_offsets_are_bounded(server):
    """Finding 7: ``/admin/trace?offset=10**30`` was a plain-text 500 (itertools.islice refuses it)."""
    resp = httpx.get(f"{server.base_url}/admin/trace", params={"offset": 10**30})
    err = resp.json()["error"]
    assert resp.status_code == 400 and err["param"] == "offset" and "[0, 2147483647]" in err["message"]
    assert httpx.get(f"{server.base_url}/admin/trace", params={"offset": 2**31 - 1}).json()["requests"] == {}


@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [
        ("--max-request-body-bytes", "0", "--max-request-body-bytes must be at least 1, got 0."),
        ("--max-stop-token-ids", "-1", "--max-stop-token-ids must be at least 0, got -1."),
        ("--port", "70000", "--port must be in [0, 65535], got 70000."),
        ("--max-trace-steps", "0", "--max-trace-steps must be at least 2, got 0."),
    ],
)
def test_bad_server_flags_are_refused_at_start_up(capsys, flag, value, words):
    """Finding 7: ``--max-request-body-bytes 0`` started, then answered everything (/health too) with a
    plain-text 500. Now the flags are checked before the model loads (the model named here does not exist)."""
    from minivllm.serving.server import main

    with pytest.raises(SystemExit) as info:
        main(["--model", "/nonexistent/model", flag, value])
    assert info.value.code == 2 and words in capsys.readouterr().err


def record(path: str, status: int = 200, method: str = "GET") -> logging.LogRecord:
    args = ("127.0.0.1:5000", method, path, "1.1", status)
    return logging.LogRecord("uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d', args, None)


def test_the_access_log_has_no_polls_and_no_token():
    """Finding 7 and the terminal: 531 of 567 lines were /admin/state polls; ``?admin_token=`` was logged."""
    f = AccessLogFilter()
    assert not f.filter(record("/admin/state?last_steps=50"))
    assert not f.filter(record("/health"))
    assert f.filter(record("/admin/state", status=401))  # a failure is still shown
    page = record("/?admin_token=s3cret&x=1")
    assert f.filter(page) and "s3cret" not in page.getMessage() and "admin_token=***&x=1" in page.getMessage()
    post = record("/admin/scheduling?admin_token=t", method="POST")
    assert f.filter(post) and post.getMessage().count("***") == 1


DEMO = (*TINY_SERVER_FLAGS, "--admin-token", "tok", "--demo-max-connections", "1", "--demo-max-answers", "2")
AUTH = {"Authorization": "Bearer tok"}


def chats_body(repeat: bool) -> dict:
    chat = {"messages": [{"role": "user", "content": "the cat"}], "max_tokens": 4, "ignore_eos": True}
    return {"chats": [chat, chat], "repeat": repeat}


def test_demo_chats_are_bounded_and_need_the_admin_token(tiny_qwen2):
    """Finding 5: ``/demo/chats`` with ``repeat`` needed no token and held 16 engine slots per connection
    forever: four connections raised another user's TTFT from 0.13 s to 32-36 s."""
    with running_server(tiny_qwen2, *DEMO) as srv:
        url = f"{srv.base_url}/demo/chats"
        resp = httpx.post(url, json=chats_body(False))
        assert resp.status_code == 401 and resp.json()["error"]["code"] == "unauthorized"

        async def scene() -> tuple[list[str], int, dict]:
            async with httpx.AsyncClient(timeout=60, headers=AUTH) as c:
                async with c.stream("POST", url, json=chats_body(True)) as first:
                    assert first.status_code == 200
                    lines = first.aiter_lines()
                    assert (await anext(lines)).startswith("data: ")  # the first stream is open
                    second = await c.post(url, json=chats_body(False))  # one connection at most
                    rest = [line async for line in lines if line]
                return rest, second.status_code, second.json()

        rest, status, body = asyncio.run(scene())
        assert status == 429 and "allows 1 at once (--demo-max-connections)" in body["error"]["message"]
        # With repeat, each chat stops after its second answer and the stream ends with [DONE].
        answers = {(e["chat"], e["answer"]) for e in map(json.loads, (x[6:] for x in rest[:-1]))}
        assert rest[-1] == "data: [DONE]" and answers == {(0, 0), (0, 1), (1, 0), (1, 1)}
        again = httpx.post(url, json=chats_body(False), headers=AUTH, timeout=60)  # the slot was given back
        assert again.status_code == 200 and again.text.endswith("data: [DONE]\n\n")
        state = httpx.get(f"{srv.base_url}/admin/state", headers=AUTH).json()
        assert state["num_unfinished"] == 0 and state["num_free_blocks"] == state["num_gpu_blocks"] - 1


def test_the_demo_page_sends_the_admin_token_to_demo_chats():
    """The page opened as /?admin_token=T must carry T on /demo/chats too (guarded like /admin/*), or its chats
    get 401 on a server started with --admin-token."""
    js = (Path(__file__).resolve().parents[2] / "minivllm" / "serving" / "static" / "demo.js").read_text()
    call = js[js.index('fetch("/demo/chats"') - 200 : js.index('fetch("/demo/chats"') + 200]
    assert "Authorization" in call and "ADMIN_TOKEN" in call, call
