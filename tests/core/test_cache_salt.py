"""cache_salt (vLLM 0.9+): a per-request salt in the first block's hash, so requests with different salts
(tenants) never share prefix-cache blocks, and requests with the same salt do (§11.5)."""

from __future__ import annotations

import pytest

from minivllm.core.kv_cache_manager import KVCacheManager
from minivllm.core.kv_cache_utils import hash_block_tokens, hash_request_tokens
from minivllm.lab.testbench import make_request, make_scheduler, run_steps

PROMPT = [t % 11 for t in range(70)]  # 4 full blocks of 16 and 6 more tokens


def admitted(kv: KVCacheManager, req_id: str, salt: str | None) -> int:
    """Admit a request of PROMPT as the waiting loop does; returns its prefix-hit tokens."""
    req = make_request(req_id, PROMPT, cache_salt=salt)
    computed, num_computed = kv.get_computed_blocks(req)
    kv.allocate_slots(req, req.num_tokens - num_computed, computed)
    return num_computed


def test_the_salt_goes_into_the_first_block_only():
    salted = hash_request_tokens(hash, 16, PROMPT, cache_salt="tenant-a")
    plain = hash_request_tokens(hash, 16, PROMPT)
    assert salted[0] == hash_block_tokens(hash, None, PROMPT[:16], ("tenant-a",))
    assert [h.extra_keys for h in salted] == [("tenant-a",), None, None, None]
    # Later blocks carry no salt, yet differ from the unsalted chain: they hang from a salted parent.
    assert all(s != p for s, p in zip(salted, plain))
    assert salted[1] == hash_block_tokens(hash, salted[0].hash_value, PROMPT[16:32])


@pytest.mark.parametrize("algo", ["builtin", "sha256"])
def test_two_salts_never_hit_each_others_blocks_and_the_same_salt_does(algo):
    kv = KVCacheManager(num_gpu_blocks=40, block_size=16, max_model_len=512, caching_hash_algo=algo)
    assert admitted(kv, "a1", "tenant-a") == 0
    assert admitted(kv, "b1", "tenant-b") == 0  # same tokens, other tenant: no hit
    assert admitted(kv, "plain", None) == 0  # unsalted: no hit on either tenant
    assert admitted(kv, "a2", "tenant-a") == 64  # same tenant: every full block
    assert admitted(kv, "b2", "tenant-b") == 64
    assert admitted(kv, "plain2", None) == 64
    owners = {b.block_id for r in ("a1", "b1", "plain") for b in kv.req_to_blocks[r][:4]}
    assert len(owners) == 12  # three tenants, four full blocks each: nothing shared


def test_blocks_filled_by_decoding_keep_the_salt():
    # A request whose hashes were never computed at admission (e.g. caching turned on by allocate_slots
    # alone) gets them from cache_full_blocks: the first one must be salted there too.
    kv = KVCacheManager(num_gpu_blocks=20, block_size=16, max_model_len=512)
    req = make_request("a", PROMPT, cache_salt="s")
    kv.allocate_slots(req, req.num_tokens)
    assert kv.req_to_block_hashes["a"] == hash_request_tokens(hash, 16, PROMPT, cache_salt="s")


def test_the_scheduler_shares_blocks_only_within_a_salt():
    s = make_scheduler(enable_prefix_caching=True, max_num_batched_tokens=128)
    arrivals = [
        (0, make_request("a1", PROMPT, cache_salt="a")),
        (3, make_request("b1", PROMPT, cache_salt="b")),
        (3, make_request("a2", PROMPT, cache_salt="a")),
    ]
    reqs = [r for _, r in arrivals]
    for _ in run_steps(s, arrivals=arrivals):
        pass
    assert [r.num_cached_tokens for r in reqs] == [0, 0, 64]
