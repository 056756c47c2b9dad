"""/admin is only for the instructor's own pages (minivllm.serving.admin_guard): JSON bodies only, localhost
Host and Origin names unless widened, an optional token, a switch to turn it off, and bounded values."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers.server import running_server

FLAGS = ("--max-model-len", "256", "--num-gpu-blocks", "64", "--max-num-batched-tokens", "64", "--max-num-seqs", "8")


@pytest.fixture(scope="module")
def server(tiny_qwen2):
    with running_server(tiny_qwen2, *FLAGS) as srv:
        yield srv.base_url


def post(url: str, body: str, content_type: str | None = "application/json", **headers: str) -> httpx.Response:
    if content_type is not None:
        headers["Content-Type"] = content_type
    return httpx.post(f"{url}/admin/scheduling", content=body, headers=headers)


def scheduling(url: str) -> dict:
    return httpx.get(f"{url}/admin/scheduling").json()


def test_only_json_bodies_change_settings(server):
    before = scheduling(server)
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None):
        resp = post(server, '{"max_num_seqs": 2}', content_type)
        assert resp.status_code == 415, (content_type, resp.text)
        assert "application/json" in resp.json()["error"]["message"]
    assert scheduling(server) == before
    assert post(server, '{"max_num_seqs": 4}').json()["max_num_seqs"] == 4
    assert post(server, '{"max_num_seqs": 8}').json()["max_num_seqs"] == 8


def test_foreign_host_and_origin_are_refused(server):
    port = server.rsplit(":", 1)[1]
    rebound = post(server, '{"max_num_seqs": 2}', Host=f"evil.example:{port}")  # DNS rebinding
    assert rebound.status_code == 403 and "evil.example" in rebound.json()["error"]["message"]
    assert httpx.get(f"{server}/admin/state", headers={"Host": "evil.example"}).status_code == 403
    cross = post(server, '{"max_num_seqs": 2}', Origin="http://evil.example")
    assert cross.status_code == 403 and "Origin" in cross.json()["error"]["message"]
    same = post(server, '{"max_num_seqs": 8}', Origin=f"http://localhost:{port}")
    assert same.status_code == 200
    assert httpx.post(f"{server}/v1/completions", json={"prompt": "the", "max_tokens": 2}).status_code == 200


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ('{"max_num_batched_tokens": 1000000}', "max_num_batched_tokens"),  # [1, max(64, 256)]
        ('{"max_num_batched_tokens": 0}', "max_num_batched_tokens"),
        ('{"max_num_seqs": 9}', "max_num_seqs"),  # at most what the server started with
        ('{"max_num_seqs": true}', "max_num_seqs"),
        ('{"long_prefill_token_threshold": 257}', "long_prefill_token_threshold"),
        ('{"enable_chunked_prefill": "no"}', "enable_chunked_prefill"),
    ],
)
def test_values_are_bounded_by_what_the_server_started_with(server, body, param):
    before = scheduling(server)
    resp = post(server, body)
    assert resp.status_code == 400 and resp.json()["error"]["param"] == param, resp.text
    assert scheduling(server) == before


def test_admin_token_and_allowed_hosts(tiny_qwen2):
    with running_server(tiny_qwen2, *FLAGS, "--admin-token", "s3cret", "--allowed-hosts", "demo.lan") as srv:
        url = srv.base_url
        assert httpx.get(f"{url}/admin/state").status_code == 401
        assert httpx.get(f"{url}/admin/state", headers={"Authorization": "Bearer wrong"}).status_code == 401
        auth = {"Authorization": "Bearer s3cret"}
        assert httpx.get(f"{url}/admin/state", headers=auth).status_code == 200
        assert httpx.get(f"{url}/admin/state", headers={**auth, "Host": "demo.lan:8000"}).status_code == 200
        assert post(url, '{"max_num_seqs": 2}', **auth).json()["max_num_seqs"] == 2
        assert httpx.get(f"{url}/health").status_code == 200  # the OpenAI API needs no admin token


def test_disable_admin(tiny_qwen2):
    with running_server(tiny_qwen2, *FLAGS, "--disable-admin") as srv:
        resp = httpx.get(f"{srv.base_url}/admin/scheduling")
        assert resp.status_code == 404 and "--disable-admin" in resp.json()["error"]["message"]
        assert post(srv.base_url, '{"max_num_seqs": 2}').status_code == 404
        assert httpx.post(f"{srv.base_url}/v1/completions", json={"prompt": "the", "max_tokens": 2}).status_code == 200


def test_admin_trace_is_paginated_and_bounded(server):
    for i in range(5):
        httpx.post(f"{server}/v1/completions", json={"prompt": "the cat", "max_tokens": 2, "user": str(i)})
    first = httpx.get(f"{server}/admin/trace", params={"limit": 2}).json()
    assert len(first["requests"]) == 2 and first["next_offset"] == 2 and first["total"] >= 5
    pages, offset = [], 0
    while offset is not None:
        page = httpx.get(f"{server}/admin/trace", params={"limit": 2, "offset": offset}).json()
        pages += list(page["requests"])
        offset = page["next_offset"]
    assert len(pages) == first["total"] == len(set(pages))
    assert httpx.get(f"{server}/admin/trace", params={"limit": 5000}).json()["error"]["param"] == "limit"
    assert httpx.get(f"{server}/admin/state", params={"last_steps": 10**6}).json()["error"]["param"] == "last_steps"
