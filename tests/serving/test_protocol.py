"""The HTTP boundary without a model (issue 13, finding 8): strict types, finite numbers, valid Unicode,
``max_completion_tokens: 0``, stop ids against the vocabulary, ``guided_choice`` served, unknown fields logged,
and the OpenAI error shape for every error (bad bodies, 404, 405), on a bare FastAPI app."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("fastapi")

from fastapi import FastAPI  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from minivllm.serving.protocol import (  # noqa: E402
    APIError,
    ChatCompletionRequest,
    CompletionRequest,
    Limits,
    build_sampling_params,
    check_text,
    completion_prompt,
    ignored_fields,
    install_error_handlers,
)

LIMITS = Limits(max_model_len=256, vocab_size=320)
JSON = {"Content-Type": "application/json"}


def make_app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/v1/completions")
    async def completions(req: CompletionRequest) -> dict:
        ids = [3, 4, 5] if isinstance(req.prompt, str) else list(req.prompt)
        if isinstance(req.prompt, str):
            check_text(req.prompt, "prompt")
        p = build_sampling_params(req, len(ids), LIMITS, "prompt", 16)
        return {"max_tokens": p.max_tokens, "guided_choice": p.guided_choice, "stop_token_ids": p.stop_token_ids}

    @app.post("/v1/chat/completions")
    async def chat(req: ChatCompletionRequest) -> dict:
        return {"max_tokens": build_sampling_params(req, 3, LIMITS, "messages", None).max_tokens}

    @app.get("/fails")
    async def fails() -> dict:
        raise APIError("The model `\ud800` does not exist.", param="model", status=404)

    return app


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(make_app())


def error(resp) -> dict:
    body = resp.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    return body["error"]


MSG = [{"role": "user", "content": "hi"}]
BAD = [  # (endpoint, raw JSON body, param, words the message must contain)
    ("completions", '{"prompt": "x", "max_tokens": true}', "max_tokens", "valid integer, got True"),
    ("completions", '{"prompt": "x", "max_tokens": 2.0}', "max_tokens", "valid integer, got 2.0"),
    ("completions", '{"prompt": [5, true]}', "prompt", "list of token ids (integers >= 0), got True"),
    ("completions", '{"prompt": [5, 1.5]}', "prompt", "got 1.5 in the list"),
    ("completions", '{"prompt": "x", "seed": true}', "seed", "valid integer"),
    ("completions", '{"prompt": "x", "seed": 18446744073709551616}', "seed", "seed must be None or in [-9223372"),
    ("completions", '{"prompt": "x", "top_k": 1.5}', "top_k", "valid integer"),
    ("completions", '{"prompt": "x", "min_tokens": false}', "min_tokens", "valid integer"),
    ("completions", '{"prompt": "x", "ignore_eos": 1}', "ignore_eos", "valid boolean"),
    ("completions", '{"prompt": "x", "stream": "yes"}', "stream", "valid boolean"),
    ("completions", '{"prompt": "x", "temperature": NaN}', "temperature", "finite number, got nan"),
    ("completions", '{"prompt": "x", "temperature": Infinity}', "temperature", "finite number, got inf"),
    ("completions", '{"prompt": "x", "temperature": true}', "temperature", "valid number, got True"),
    ("completions", '{"prompt": "x", "top_p": -Infinity}', "top_p", "finite number"),
    ("completions", '{"prompt": "x", "presence_penalty": NaN}', "presence_penalty", "finite number"),
    (
        "completions",
        '{"prompt": "x", "stop_token_ids": [320]}',
        "stop_token_ids",
        "stop_token_ids entry 320 is out of range; allowed 0..319.",
    ),
    ("completions", '{"prompt": "x", "stop_token_ids": [true]}', "stop_token_ids", "valid integer"),
    ("completions", '{"prompt": "x", "stop_token_ids": ["a"]}', "stop_token_ids", "valid integer"),
    ("completions", '{"prompt": "x", "stop_token_ids": [-1]}', "stop_token_ids", "integers >= 0), got -1"),
    ("completions", '{"prompt": "\\ud800"}', "prompt", "prompt is not valid Unicode"),
    ("completions", '{"prompt": "x", "guided_choice": []}', "guided_choice", "at least 1 choice"),
    ("completions", '{"prompt": "x", "guided_choice": ["a", ""]}', "guided_choice", "non-empty strings"),
    ("completions", '{"prompt": "x", "guided_choice": ["\\udfff"]}', "guided_choice", "not valid Unicode"),
    ("completions", '{"prompt": "x", "guided_choice": "yes"}', "guided_choice", "valid list"),
    ("completions", '{"prompt": "x", "guided_choice": ["a"], "ignore_eos": true}', "guided_choice", "ignore_eos"),
    (
        "completions",
        '{"prompt": "x", "guided_choice": [' + ", ".join(['"c"'] * 1025) + "]}",
        "guided_choice",
        "at most 1024 choices, got 1025",
    ),
    ("chat/completions", '{"messages": [{"role": "user", "content": "\\ud800"}]}', "messages", "not valid Unicode"),
    ("chat/completions", '{"messages": [{"role": "\\ud800", "content": "x"}]}', "messages", "not valid Unicode"),
    (
        "chat/completions",
        '{"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0}',
        "max_completion_tokens",
        "max_completion_tokens must be at least 1, got 0.",
    ),
    (
        "chat/completions",
        '{"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0, "max_tokens": 5}',
        "max_completion_tokens",
        "must be at least 1, got 0.",
    ),
    (
        "chat/completions",
        '{"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": true}',
        "max_completion_tokens",
        "valid integer",
    ),
    (
        "chat/completions",
        '{"messages": [{"role": "user", "content": "x"}], "logprobs": 0}',
        "logprobs",
        "valid boolean",
    ),
]


@pytest.mark.parametrize(("endpoint", "body", "param", "words"), BAD)
def test_bad_values_get_a_400_naming_the_field(client, endpoint, body, param, words):
    resp = client.post(f"/v1/{endpoint}", content=body, headers=JSON)
    err = error(resp)
    assert resp.status_code == 400 and err["param"] == param and err["type"] == "invalid_request_error", err
    assert words in err["message"], err["message"]


def test_good_values_pass_through(client):
    body = {
        "prompt": [5, 6],
        "temperature": 1,
        "top_p": 0.5,
        "seed": 2**64 - 1,
        "guided_choice": ["yes", "no"],
        "stop_token_ids": [0, 319],
    }
    resp = client.post("/v1/completions", json=body)
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"max_tokens": 16, "guided_choice": ["yes", "no"], "stop_token_ids": [0, 319]}
    chat = {"messages": MSG, "max_completion_tokens": 7, "max_tokens": 3}
    assert client.post("/v1/chat/completions", json=chat).json() == {"max_tokens": 7}
    assert client.post("/v1/chat/completions", json={"messages": MSG, "max_tokens": 3}).json() == {"max_tokens": 3}


def test_guided_choice_reaches_sampling_params():
    req = CompletionRequest(prompt="x", guided_choice=["positive", "negative"])
    assert build_sampling_params(req, 3, LIMITS, "prompt", 16).guided_choice == ["positive", "negative"]


@pytest.mark.parametrize(
    ("body", "headers", "words"),
    [
        ('{"prompt": "x", ', JSON, "Malformed JSON body"),
        (
            '{"prompt": "x"}',
            {"Content-Type": "text/plain"},
            "not JSON: send a JSON object with Content-Type: application/json",
        ),
        ('{"prompt": "x"}', {"Content-Type": "application/x-www-form-urlencoded"}, "not JSON"),
        ("", JSON, "The request body is empty"),
        ("[1, 2]", JSON, "must be a JSON object, got list"),
        ('"prompt"', JSON, "must be a JSON object, got str"),
        (b'{"prompt": "\xff"}', JSON, "error parsing the body: UnicodeDecodeError"),
        ("{}", JSON, "prompt: Field required"),
    ],
)
def test_body_parse_errors_are_openai_errors(client, body, headers, words):
    resp = client.post("/v1/completions", content=body, headers=headers)
    err = error(resp)
    assert resp.status_code == 400 and err["type"] == "invalid_request_error" and words in err["message"], err


def test_unknown_routes_and_methods_are_openai_errors(client):
    resp = client.post("/v1/embeddings", json={})
    err = error(resp)
    assert resp.status_code == 404 and "/v1/embeddings" in err["message"] and err["code"] == "not_found"
    resp = client.get("/v1/completions")
    err = error(resp)
    assert resp.status_code == 405 and err["code"] == "method_not_allowed"
    assert "Method GET is not allowed on '/v1/completions'; allowed: POST." == err["message"]
    assert resp.headers["allow"] == "POST"


def test_an_error_quoting_a_lone_surrogate_still_renders(client):
    resp = client.get("/fails")
    assert resp.status_code == 404 and error(resp) == {
        "message": "The model `\ud800` does not exist.",
        "type": "invalid_request_error",
        "param": "model",
        "code": "model_not_found",
    }


def test_check_text_and_completion_prompt_refuse_lone_surrogates_before_the_tokenizer():
    class Tokenizer:
        def encode(self, text):
            raise AssertionError("the tokenizer must not see it")

    with pytest.raises(APIError, match="prompt is not valid Unicode") as info:
        completion_prompt(CompletionRequest.model_construct(prompt="ok \ud800"), Tokenizer())
    assert info.value.param == "prompt"
    check_text("caf\u00e9 \U0001f600", "prompt")  # real non-ASCII text is fine


def test_unknown_fields_are_accepted_and_logged_once_as_ignored(client, caplog):
    body = {"prompt": "x", "frobnicate": 1, "best_effort": True}
    with caplog.at_level(logging.WARNING, logger="minivllm.entrypoints"):
        assert client.post("/v1/completions", json=body).status_code == 200
    ignored = [r for r in caplog.records if "were present in the request but ignored" in r.getMessage()]
    assert len(ignored) == 1 and "frobnicate" in ignored[0].getMessage() and "best_effort" in ignored[0].getMessage()
    chat = ChatCompletionRequest(messages=[{"role": "user", "content": "x", "name": "bob"}], zzz=1)
    assert ignored_fields(chat) == {"zzz", "messages.name"}
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="minivllm.entrypoints"):
        client.post("/v1/completions", json={"prompt": "x"})
    assert not caplog.records
