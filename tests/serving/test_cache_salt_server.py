"""The OpenAI server's ``cache_salt`` body field (vLLM 0.9+, sent in ``extra_body``): a non-empty string or a
400 naming the field; requests share prefix-cache blocks only within one salt (§11.5, §11.9)."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers.server import TINY_SERVER_FLAGS, running_server, trace_of, wait_idle

PROMPT = [3 + t % 50 for t in range(70)]  # 4 full blocks of 16 and 6 more tokens


@pytest.fixture(scope="module")
def server(tiny_qwen2):
    with running_server(tiny_qwen2, *TINY_SERVER_FLAGS) as srv:
        yield srv


@pytest.mark.parametrize("endpoint", ["completions", "chat/completions"])
@pytest.mark.parametrize("salt", ["", 7, ["a"], {"k": "v"}])
def test_a_bad_cache_salt_is_a_400_naming_the_field(server, endpoint, salt):
    body = {"prompt": "x"} if endpoint == "completions" else {"messages": [{"role": "user", "content": "x"}]}
    resp = httpx.post(f"{server.base_url}/v1/{endpoint}", json={**body, "max_tokens": 2, "cache_salt": salt})
    err = resp.json()["error"]
    assert resp.status_code == 400 and err["param"] == "cache_salt" and err["type"] == "invalid_request_error"
    assert "cache_salt must be a non-empty string" in err["message"], err["message"]


def test_requests_share_cached_blocks_only_within_a_salt(server):
    url = server.base_url

    def complete(salt):
        body = {"prompt": PROMPT, "max_tokens": 3, "temperature": 0.0}
        if salt is not None:
            body["cache_salt"] = salt
        resp = httpx.post(f"{url}/v1/completions", json=body, timeout=60)
        assert resp.status_code == 200, resp.text
        req_id = resp.json()["id"]
        return trace_of(url, req_id)["requests"][req_id]["num_cached_tokens"], resp.json()["choices"][0]["text"]

    first = complete("tenant-a")
    other, plain, again = complete("tenant-b"), complete(None), complete("tenant-a")
    assert [first[0], other[0], plain[0]] == [0, 0, 0]  # nobody hits another tenant's blocks
    assert again[0] == 64  # the same tenant hits every full block
    assert len({t for _, t in (first, other, plain, again)}) == 1  # the salt never changes the tokens
    wait_idle(url)
