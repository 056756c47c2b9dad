"""Seeded workloads: repeatability, published length statistics, arrivals, files, errors (§11.1, §11.7)."""

from __future__ import annotations

import numpy as np
import pytest

from minivllm.lab.sim.workload import WORKLOAD_KINDS, LengthSpec, Workload, arrival_times, make_workload

# (kind, prompt mean, prompt median, output mean, output median): Azure LLM inference trace 2023, Sarathi-Serve
MEAN_MEDIAN = [
    ("azure_conv", 1155, 1020, 211, 129),
    ("azure_code", 2048, 1469, 27.9, 13),
    ("sharegpt", 2340, 1730, 439, 415),
]


def test_same_seed_same_workload_and_different_seed_differs():
    kwargs = dict(rate=5.0, arrival="bursty", burstiness=2.0, shared_prefix_len=8, num_prefix_groups=2)
    a, b = make_workload("azure_conv", 20, seed=3, **kwargs), make_workload("azure_conv", 20, seed=3, **kwargs)
    c = make_workload("azure_conv", 20, seed=4, **kwargs)
    assert a == b
    assert [r.arrival_time for r in a.requests] != [r.arrival_time for r in c.requests]
    assert [r.prompt_token_ids for r in a.requests] != [r.prompt_token_ids for r in c.requests]
    assert a.params["seed"] == 3 and a.params["burstiness"] == 2.0 and a.name == "azure_conv"


@pytest.mark.parametrize("kind, p_mean, p_median, o_mean, o_median", MEAN_MEDIAN)
def test_lognormal_fits_match_the_published_mean_and_median(kind, p_mean, p_median, o_mean, o_median):
    dist = WORKLOAD_KINDS[kind]
    rng = np.random.default_rng(0)
    for spec, mean, median in ((dist.prompt, p_mean, p_median), (dist.output, o_mean, o_median)):
        assert spec.mean == pytest.approx(mean) and spec.quantile(0.5) == pytest.approx(median)
        draws = spec.sample(rng, 20_000)
        assert draws.min() >= 1
        assert draws.mean() == pytest.approx(mean, rel=0.05)
        assert np.median(draws) == pytest.approx(median, rel=0.03, abs=1)


def test_arxiv_fit_matches_the_published_median_and_p90():
    dist, rng = WORKLOAD_KINDS["arxiv_summarization"], np.random.default_rng(1)
    for spec, median, p90 in ((dist.prompt, 7059, 12985), (dist.output, 208, 371)):
        draws = spec.sample(rng, 20_000)
        assert np.median(draws) == pytest.approx(median, rel=0.03)
        assert np.percentile(draws, 90) == pytest.approx(p90, rel=0.03)


def test_stats_of_a_generated_workload():
    w = make_workload("uniform", 500, rate=10.0, seed=2, vocab_size=1000)
    s = w.stats()
    prompts = [r.prompt_len for r in w.requests]
    assert s["num_requests"] == 500 and s["prompt_mean"] == pytest.approx(np.mean(prompts))
    assert s["prompt_median"] == pytest.approx(np.median(prompts))
    assert s["output_p90"] == pytest.approx(np.percentile([r.output_len for r in w.requests], 90))
    assert s["mean_rate"] == pytest.approx(10.0, rel=0.1)
    assert all(32 <= p <= 512 for p in prompts) and all(3 <= t < 1000 for r in w.requests for t in r.prompt_token_ids)
    assert all(r.sampling_params.ignore_eos and r.sampling_params.temperature == 0.0 for r in w.requests)


def test_poisson_and_bursty_gaps():
    rng = np.random.default_rng(5)
    poisson = np.diff(arrival_times(20_001, 4.0, "poisson", 1.0, rng))
    bursty = np.diff(arrival_times(20_001, 4.0, "bursty", 3.0, rng))
    assert poisson.mean() == pytest.approx(0.25, rel=0.03) and poisson.std() / poisson.mean() == pytest.approx(
        1, rel=0.05
    )
    assert bursty.mean() == pytest.approx(0.25, rel=0.1)
    assert bursty.std() / bursty.mean() == pytest.approx(3.0, rel=0.15)  # CV = burstiness
    gamma_one = np.diff(arrival_times(20_001, 4.0, "bursty", 1.0, rng))  # burstiness 1 = Poisson
    assert gamma_one.std() / gamma_one.mean() == pytest.approx(1, rel=0.05)


@pytest.mark.parametrize("rate, arrival", [(None, "poisson"), (float("inf"), "bursty"), (3.0, "all_at_once")])
def test_all_at_once(rate, arrival):
    w = make_workload("short_decode", 6, rate=rate, arrival=arrival)
    assert [r.arrival_time for r in w.requests] == [0.0] * 6


def test_max_model_len_clamps_prompt_plus_output():
    w = make_workload("arxiv_summarization", 200, max_model_len=2048, shared_prefix_len=100)
    assert all(1 <= r.output_len and r.prompt_len + r.output_len <= 2048 for r in w.requests)
    assert max(r.prompt_len for r in w.requests) > 1500 and min(r.prompt_len for r in w.requests) > 100


def test_shared_prefix_groups():
    w = make_workload("uniform", 9, shared_prefix_len=32, num_prefix_groups=3, seed=1)
    by_group: dict[int, set[tuple[int, ...]]] = {}
    for r in w.requests:
        by_group.setdefault(r.prefix_group, set()).add(tuple(r.prompt_token_ids[:32]))
    assert sorted(by_group) == [0, 1, 2] and all(len(p) == 1 for p in by_group.values())
    assert len({next(iter(p)) for p in by_group.values()}) == 3
    assert all(r.prompt_len >= 33 for r in w.requests)


def test_rag_burst_chats_first_then_long_prompts_among_them():
    w = make_workload("rag_burst", 10, rate=8.0, seed=4, num_chats=4, burst_delay=0.3)
    chats = [r for r in w.requests if r.request_id.startswith("chat-")]
    longs = [r for r in w.requests if r.request_id.startswith("long-")]
    assert len(chats) == 4 and len(longs) == 6
    assert min(r.arrival_time for r in longs) == pytest.approx(max(r.arrival_time for r in chats) + 0.3)
    assert all(16 <= r.prompt_len <= 64 and 128 <= r.output_len <= 256 for r in chats)
    assert all(2048 <= r.prompt_len <= 8192 and r.output_len <= 64 for r in longs)
    small = make_workload("rag_burst", 4, long_prompt_len=(300, 400), output_len=50)
    assert [r.request_id for r in small.requests] == ["chat-0", "chat-1", "long-0", "long-1"]
    assert all(300 <= r.prompt_len <= 400 for r in small.requests[2:]) and small.requests[0].output_len == 50
    assert small.requests[2].arrival_time == 0.5  # all at once: chats at 0, long prompts burst_delay later


@pytest.mark.parametrize("suffix", [".json", ".csv"])
def test_save_load_round_trip(tmp_path, suffix):
    w = make_workload(
        "rag_burst",
        6,
        rate=2.5,
        seed=7,
        shared_prefix_len=4,
        num_prefix_groups=2,
        long_prompt_len=LengthSpec.uniform(100, 200),
    )
    w.requests[1].priority = 3
    plain = make_workload("azure_code", 5, rate=1.0, seed=1)
    for workload in (w, plain):
        path = tmp_path / f"w{suffix}"
        workload.save(path)
        assert Workload.load(path) == workload
    with pytest.raises(ValueError, match=r"\.json or \.csv"):
        w.save(tmp_path / "w.txt")


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        (("chat", 4), {}, r"unknown workload kind 'chat'; allowed: azure_conv, azure_code, sharegpt"),
        (("uniform", 0), {}, r"num_requests must be an int >= 1; got 0"),
        (("uniform", 4), {"rate": 0.0}, r"rate must be None \(all at once\) or > 0"),
        (("uniform", 4), {"rate": -1.0}, r"rate must be"),
        (("uniform", 4), {"rate": 1.0, "burstiness": 0.0}, r"burstiness must be finite and > 0"),
        (("uniform", 4), {"arrival": "gamma"}, r"arrival must be one of poisson, bursty, all_at_once; got 'gamma'"),
        (("uniform", 4), {"seed": -1}, r"seed must be an int >= 0"),
        (("uniform", 4), {"num_prefix_groups": 0}, r"num_prefix_groups must be an int >= 1"),
        (("uniform", 4), {"max_model_len": 10, "shared_prefix_len": 9}, r"max_model_len must be None or an int >="),
        (
            ("uniform", 4),
            {"num_chats": 2},
            r"unknown override 'num_chats' for kind 'uniform'; allowed: prompt_len, output_len\.$",
        ),
        (("uniform", 4), {"prompt_len": (5, 2)}, r"prompt_len must be an int >= 1, a \(low, high\) pair"),
        (("rag_burst", 4), {"num_chats": 5}, r"num_chats must be an int in 0\.\.num_requests \(4\)"),
        (("rag_burst", 4), {"burst_delay": -1}, r"burst_delay must be >= 0 seconds"),
    ],
)
def test_bad_arguments_name_the_parameter_and_range(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_workload(*args, **kwargs)
