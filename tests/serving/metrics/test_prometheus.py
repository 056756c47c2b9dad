"""The Prometheus page: it parses, uses vLLM's names, labels and buckets, and its numbers add up (§11.9)."""

from __future__ import annotations

import math

import pytest

from minivllm.metrics.trace import EngineTrace
from minivllm.serving.metrics.prometheus import (
    ITERATION_TOKENS_BUCKETS,
    REQUEST_LATENCY_BUCKETS,
    TPOT_BUCKETS,
    TTFT_BUCKETS,
    escape_label,
    prometheus_text,
)
from tests.helpers.prometheus import parse, value
from tests.helpers.traces import hand_trace  # the same hand-built trace, numbers checked in test_summary


def buckets(families, name) -> list[tuple[float, float]]:
    return [
        (float(lab["le"].replace("Inf", "inf")), v) for n, lab, v in families[name]["samples"] if n.endswith("_bucket")
    ]


def test_names_types_and_labels_are_vllms():
    fams = parse(prometheus_text(hand_trace(), model_name="smollm2", engine=1))
    expected = {
        "gauge": ["num_requests_running", "num_requests_waiting", "gpu_cache_usage_perc", "kv_cache_usage_perc"],
        "counter": [
            "num_preemptions_total",
            "prompt_tokens_total",
            "generation_tokens_total",
            "request_success_total",
            "gpu_prefix_cache_queries_total",
            "gpu_prefix_cache_hits_total",
            "prefix_cache_queries_total",
            "prefix_cache_hits_total",
        ],
        "histogram": [
            "time_to_first_token_seconds",
            "time_per_output_token_seconds",
            "e2e_request_latency_seconds",
            "request_queue_time_seconds",
            "iteration_tokens_total",
        ],
    }
    for kind, names in expected.items():
        for name in names:
            assert fams[f"vllm:{name}"]["type"] == kind and fams[f"vllm:{name}"]["help"]
    for fam in fams.values():
        for _, labels, _ in fam["samples"]:
            assert labels["model_name"] == "smollm2" and labels["engine"] == "1"


def test_values_by_hand():
    fams = parse(prometheus_text(hand_trace()))
    # gauges: the last step (running 0, waiting 0, kv 0.125)
    assert value(fams, "vllm:num_requests_running") == 0 and value(fams, "vllm:num_requests_waiting") == 0
    assert value(fams, "vllm:gpu_cache_usage_perc") == value(fams, "vllm:kv_cache_usage_perc") == 0.125
    assert value(fams, "vllm:num_preemptions_total") == 1
    assert value(fams, "vllm:prompt_tokens_total") == 10 + 20 + 5  # requests that produced a token
    assert value(fams, "vllm:generation_tokens_total") == 7
    reasons = {r: value(fams, "vllm:request_success_total", finished_reason=r) for r in ("stop", "length", "abort")}
    assert reasons == {"stop": 1, "length": 2, "abort": 1}
    # prefix cache: queries = prompts of A, B, C at admission; hits = B's 8 tokens
    for prefix in ("vllm:gpu_prefix_cache", "vllm:prefix_cache"):
        assert value(fams, f"{prefix}_queries_total") == 35 and value(fams, f"{prefix}_hits_total") == 8


def test_histograms_by_hand():
    fams = parse(prometheus_text(hand_trace()))
    ttft = dict(buckets(fams, "vllm:time_to_first_token_seconds"))  # observations 1.0, 1.5, 2.0
    assert (ttft[0.75], ttft[1.0], ttft[2.5], ttft[math.inf]) == (0, 1, 3, 3)
    assert value(fams, "vllm:time_to_first_token_seconds_sum") == pytest.approx(4.5)
    assert value(fams, "vllm:time_to_first_token_seconds_count") == 3
    tpot = dict(buckets(fams, "vllm:time_per_output_token_seconds"))  # per output batch: 0.2, 0.2, 1.4, 0.1
    assert (tpot[0.075], tpot[0.15], tpot[0.3], tpot[1.0], tpot[2.5]) == (0, 1, 3, 3, 4)
    assert value(fams, "vllm:time_per_output_token_seconds_sum") == pytest.approx(1.9)
    e2e = dict(buckets(fams, "vllm:e2e_request_latency_seconds"))  # A 2.8, B 1.6, C 2.0, D (abort) 0.5
    assert (e2e[0.5], e2e[1.5], e2e[2.0], e2e[2.5], e2e[5.0]) == (1, 1, 3, 3, 4)
    queue = dict(buckets(fams, "vllm:request_queue_time_seconds"))  # A 0.5, B 0.5, C 1.0 (D never scheduled)
    assert (queue[0.3], queue[0.5], queue[1.0], queue[math.inf]) == (0, 2, 3, 3)
    iteration = dict(buckets(fams, "vllm:iteration_tokens_total"))  # 10, 13, 7 scheduled tokens
    assert (iteration[8], iteration[16], iteration[math.inf]) == (1, 3, 3)
    assert value(fams, "vllm:iteration_tokens_total_sum") == 30


def test_buckets_are_vllms_cumulative_and_end_in_inf():
    fams = parse(prometheus_text(hand_trace()))
    assert TTFT_BUCKETS[0] == 0.001 and TTFT_BUCKETS[-1] == 2560.0 and len(TTFT_BUCKETS) == 22
    assert TPOT_BUCKETS[-1] == 80.0 and REQUEST_LATENCY_BUCKETS[-1] == 7680.0 and ITERATION_TOKENS_BUCKETS[-1] == 16384
    bounds = {
        "vllm:time_to_first_token_seconds": TTFT_BUCKETS,
        "vllm:time_per_output_token_seconds": TPOT_BUCKETS,
        "vllm:e2e_request_latency_seconds": REQUEST_LATENCY_BUCKETS,
        "vllm:request_queue_time_seconds": REQUEST_LATENCY_BUCKETS,
        "vllm:iteration_tokens_total": ITERATION_TOKENS_BUCKETS,
    }
    for name, fam in fams.items():
        if fam["type"] != "histogram":
            continue
        bs = buckets(fams, name)
        if name in bounds:
            assert [b for b, _ in bs] == [float(x) for x in bounds[name]] + [math.inf]
        counts = [c for _, c in bs]
        assert counts == sorted(counts) and bs[-1][0] == math.inf
        assert counts[-1] == value(fams, f"{name}_count")


def test_label_values_are_escaped():
    name = 'my "model"\\v2\nnew'
    text = prometheus_text(hand_trace(), model_name=name)
    assert escape_label(name) == 'my \\"model\\"\\\\v2\\nnew' and escape_label(name) in text
    fams = parse(text)
    assert {lab["model_name"] for f in fams.values() for _, lab, _ in f["samples"]} == {name}


def test_empty_trace_still_parses():
    fams = parse(prometheus_text(EngineTrace()))
    assert value(fams, "vllm:num_requests_running") == 0 and value(fams, "vllm:kv_cache_usage_perc") == 0
    assert value(fams, "vllm:time_to_first_token_seconds_count") == 0
    assert value(fams, "vllm:request_success_total", finished_reason="abort") == 0


def test_prometheus_client_parses_it_when_installed():
    parser = pytest.importorskip("prometheus_client.parser")  # optional: not in requirements.txt
    fams = {f.name: f for f in parser.text_string_to_metric_families(prometheus_text(hand_trace(), model_name='a"b'))}
    assert fams["vllm:num_preemptions"].type == "counter" and fams["vllm:kv_cache_usage_perc"].type == "gauge"
    assert fams["vllm:time_to_first_token_seconds"].type == "histogram"
    assert {s.labels["model_name"] for f in fams.values() for s in f.samples} == {'a"b'}
