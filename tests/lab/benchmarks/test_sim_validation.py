"""sim_validation: every published run replays within its target, with a source, metrics and term shares (issue 19).

The accuracy test replays every run whole (a few seconds); the bookkeeping tests use each run's first requests.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from minivllm.lab.benchmarks import sim_validation as sv
from minivllm.lab.sim.cost_model import CostModel
from minivllm.lab.sim.generation import GENERATIONS
from minivllm.lab.sim.published_runs import PUBLISHED_RUNS, get_run

MAX_REQUESTS = 24  # the ShareGPT runs' first 24 requests keep the test fast


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    path = tmp_path_factory.mktemp("simval") / "out.json"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        sv.main(["--max-requests", str(MAX_REQUESTS), "--output-json", str(path)])
    return buf.getvalue(), json.loads(path.read_text())


def test_every_run_has_a_source_settings_and_published_metrics():
    assert PUBLISHED_RUNS and len({r.name for r in PUBLISHED_RUNS}) == len(PUBLISHED_RUNS)
    for run in PUBLISHED_RUNS:
        assert run.source.strip() and run.model and run.gpu and run.tensor_parallel_size >= 1
        assert run.metrics, run.name
        assert run.client in ("benchmark_latency", "benchmark_serving", "inference_perf"), run.name
        assert run.engine_generation in GENERATIONS and run.generation_notes.strip(), run.name
        assert all(v > 0 for v in run.metrics.values()), run.name
        assert run.workload.num_requests == len(run.workload.lengths())
        # a setting the source does not state is None and explained
        stated = [run.settings.max_num_seqs, run.settings.max_num_batched_tokens, run.settings.enable_chunked_prefill]
        assert None not in stated or run.settings.notes, run.name


def test_both_engine_generations_are_replayed():
    assert {r.engine_generation for r in PUBLISHED_RUNS} == set(GENERATIONS)


def test_staged_constant_rate_arrivals_and_shared_prefixes():
    """inference-perf's constant load: evenly spaced arrivals, stage after stage; a system prompt per group."""
    run = get_run("inference_sim_codegen_llama2_7b_h100")
    times = run.workload.arrival_times()
    seconds = [s for _, s in run.workload.stages]
    assert len(times) == run.workload.num_requests == 5 * seconds[0] + 10 * seconds[1]
    assert times[1] - times[0] == pytest.approx(0.2) and times[-1] - times[-2] == pytest.approx(0.1)
    w = sv.build_workload(run, 32000, max_requests=25)
    measured = [r for r in w.requests if r.request_id.startswith("req-")]
    assert len(measured) == 25 == w.params["num_requests"]
    ids = [r.prompt_token_ids for r in measured]
    k = run.workload.shared_prefix_len
    assert all(len(p) == run.workload.prompt_len for p in ids)
    assert ids[0][:k] == ids[10][:k] != ids[1][:k] and ids[0][k:] != ids[10][k:]  # group i % 10


def test_the_client_cycles_its_prompt_pool_after_a_warm_up_pass():
    """inference-perf's shared_prefix data: num_groups x num_prompts_per_group prompts drawn once, request i sends
    prompt i % 100; the replay sends the pool once first (uncounted), so every counted request repeats a whole
    earlier prompt and finds it in the prefix cache, as the published run's did after its first 100."""
    run = get_run("inference_sim_codegen_llama2_7b_h100")
    assert run.workload.num_distinct_prompts == 100
    w = sv.build_workload(run, 32000, max_requests=150)
    warm = [r for r in w.requests if r.request_id.startswith("warm-")]
    measured = [r for r in w.requests if r.request_id.startswith("req-")]
    assert len(warm) == 100 == w.params["warm_up"] and len(measured) == 150
    assert max(r.arrival_time for r in warm) < min(r.arrival_time for r in measured) == pytest.approx(100 / 5.0)
    assert len({tuple(r.prompt_token_ids) for r in warm}) == 100  # 100 distinct prompts
    for i, r in enumerate(measured):  # each a whole repeat of the pool's prompt i % 100
        assert r.prompt_token_ids == warm[i % 100].prompt_token_ids
    result = sv.replay(run, max_requests=150)
    assert result["num_requests"] == 150 and result["num_warm_up_requests"] == 100
    # a whole-prompt hit leaves one block to compute: the engine's first token comes in about one step, and
    # the server's own work (the fastest published first token less the fastest simulated) is the rest of TTFT
    assert 0 < result["intake_per_request_s"] < run.first_token_s
    lambda320 = get_run("lambda_sharegpt320_llama3_8b_a100")  # no pool: every prompt its own, no warm-up
    plain = sv.build_workload(lambda320, 32000, max_requests=5)
    assert [r.request_id for r in plain.requests] == [f"req-{i}" for i in range(5)]


def test_recorded_lengths_match_the_sources_totals():
    """Lambda's result files: total_input_tokens 65,578 and total_output_tokens 65,374 (A100) / 65,331 (H100)."""
    a100, h100 = get_run("lambda_sharegpt320_llama3_8b_a100"), get_run("lambda_sharegpt320_llama3_8b_h100")
    for run, out_total in ((a100, 65374), (h100, 65331)):
        assert len(run.workload.prompt_lens) == len(run.workload.output_lens) == 320
        assert sum(run.workload.prompt_lens) == 65578 and sum(run.workload.output_lens) == out_total
        assert all(o >= 1 for _, o in run.workload.lengths())


def test_every_run_replays_with_one_row_per_published_metric(replayed):
    _, doc = replayed
    assert [r["run"] for r in doc["runs"]] == [r.name for r in PUBLISHED_RUNS]
    for r in doc["runs"]:
        run = get_run(r["run"])
        assert r["num_requests"] == min(MAX_REQUESTS, run.workload.num_requests)
        assert [row["metric"] for row in r["rows"]] == list(run.metrics)
        for row in r["rows"]:
            assert row["published"] == run.metrics[row["metric"]]
            assert row["simulated"] > 0
            assert row["ratio"] == pytest.approx(row["simulated"] / row["published"], rel=1e-12)
        assert r["preset"] == run.preset and r["preset"].endswith(run.gpu[:4].lower())  # the run's model and GPU
        kv_heads = 8 if "Llama-3" in run.model else 32  # Llama-3-8B's GQA: 8 KV heads; Llama-2-7B: 32
        assert r["kv_bytes_per_token"] == 2 * 32 * kv_heads * 128 * 2
        assert r["engine_generation"] == run.engine_generation and r["num_scheduler_steps"] == run.num_scheduler_steps
        assert sum(r["term_shares"].values()) == pytest.approx(1.0)
        # serial host work always shows; V1 overlaps it, so only the GPU terms must carry time
        assert min(v for k, v in r["term_shares"].items() if k != "host" or run.engine_generation != "v1") > 0


def test_ratios_come_from_the_right_simulated_metric():
    """Each published name maps to the summary key with that statistic and unit."""
    run = get_run("lambda_sharegpt320_llama3_8b_h100")
    result = sv.replay(run, max_requests=12)
    by_metric = {row["metric"]: row for row in result["rows"]}
    assert by_metric["median_tpot_ms"]["simulated"] > 1.0  # milliseconds, not seconds
    assert by_metric["mean_ttft_s"]["simulated"] < 60.0  # seconds, not milliseconds
    assert by_metric["median_e2e_s"]["simulated"] >= by_metric["median_ttft_s"]["simulated"]
    fixed = sv.replay(get_run("vllm_latency_llama3_8b_a100"))
    (row,) = fixed["rows"]
    assert row["metric"] == "latency_avg_ms" and 100 < row["simulated"] < 10_000  # 128 decode steps, in ms


def test_printed_table_matches_the_json(replayed):
    out, doc = replayed
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:7] == list(sv.HEADER))
    table = [line.split() for line in lines[head + 1 :] if line.strip()]
    rows = [(r["run"], row) for r in doc["runs"] for row in r["rows"]]
    assert len(table) == len(rows)
    for cells, (name, row) in zip(table, rows):
        run = next(r for r in doc["runs"] if r["run"] == name)
        assert cells[0] == name and cells[1] == sv.generation_label(run) and cells[2] == row["metric"]
        assert float(cells[3]) == pytest.approx(row["published"], rel=5e-4)
        assert float(cells[4]) == pytest.approx(row["simulated"], rel=5e-4)
        assert float(cells[5]) == pytest.approx(row["ratio"], abs=5e-4)
        if "not_comparable" in row:
            assert cells[-2:] == ["not", "comparable"] and f"{row['metric']}: {row['not_comparable']}" in out
        else:
            assert cells[-1] == "OUTSIDE" if not row["ok"] else cells[-1] != "OUTSIDE"
    for r in doc["runs"]:  # each run's preset, term shares and source are printed above the table
        assert f"preset {r['preset']}" in out and r["source"] in out and "busy time by term: host" in out
        assert f"engine generation: {sv.generation_label(r)}: {r['generation_notes']}" in out


def test_bad_arguments_say_what_is_allowed(capsys):
    with pytest.raises(SystemExit):
        sv.main(["--run", "no_such_run"])
    assert "recorded:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sv.main(["--max-requests", "0"])
    assert "--max-requests must be >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sv.main(["--engine-generation", "v2"])
    err = capsys.readouterr().err
    assert "--engine-generation" in err and "v0.6-multistep, v1" in err
    with pytest.raises(SystemExit):
        sv.main(["--num-scheduler-steps", "4"])
    assert "--num-scheduler-steps needs --engine-generation" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sv.main(["--engine-generation", "v1", "--num-scheduler-steps", "4"])
    assert "--num-scheduler-steps: num_scheduler_steps must be 1" in capsys.readouterr().err


def test_every_published_run_replays_within_its_target():
    """Issue 19's targets: every metric within 15% of the published value, TTFT within 25%. Every comparable row
    meets them: the vLLM 0.6 runs replayed with their own recorded lengths (Lambda's with their 10-step bursts)
    and the V1 runs (issue 32: inference-perf's 100-prompt pool replayed, so repeats hit the prefix cache as they
    did), which come closer priced as V1 than as 0.6 (the host term overlapped, not added). SGLang's 10-step run
    meets TTFT and TPOT only with its bursts; its median E2E rests on stand-in lengths and is marked not
    comparable (printed with its ratio, not counted by --check)."""
    results = [sv.replay(run) for run in PUBLISHED_RUNS]
    outside = [(r["run"], row["metric"], round(row["ratio"], 3)) for r in results for row in sv.counted(r)]
    assert not outside, outside
    skipped = [(r["run"], row["metric"]) for r in results for row in r["rows"] if "not_comparable" in row]
    assert skipped == [("sglang_vllm060_multistep10_llama31_8b_a100", "median_e2e_s")]  # none else skipped
    assert all(not get_run(name).recorded_lengths for name, _ in skipped)  # only where the lengths are missing
    for r in (r for r in results if r["engine_generation"] == "v1"):
        assert all(row["ok"] for row in r["rows"]), r["rows"]
        as_v06 = sv.replay(get_run(r["run"]), engine_generation="v0.6-multistep")
        for row, serial in zip(r["rows"], as_v06["rows"]):
            if "e2e" in row["metric"]:
                assert abs(row["ratio"] - 1) < serial["ratio"] - 1, (r["run"], row["metric"], serial["ratio"])
    online = [r for r in results if r["num_scheduler_steps"] > 1 and get_run(r["run"]).workload.request_rate]
    assert online  # arrivals spread over time: a request waits for the burst under way
    for r in online:
        single = sv.replay(get_run(r["run"]), engine_generation="v0.6-multistep", num_scheduler_steps=1)
        ttft = {row["metric"]: row for row in r["rows"]}["median_ttft_s"]
        ttft_single = {row["metric"]: row for row in single["rows"]}["median_ttft_s"]
        assert ttft["ok"] and ttft_single["ratio"] < 0.5  # new requests wait for the burst's end, as published
        assert {row["metric"]: row for row in r["rows"]}["median_tpot_ms"]["ok"]
    for r in results:
        for row in r["rows"]:
            assert row["ok"] == (abs(row["ratio"] - 1) <= (0.25 if "ttft" in row["metric"] else 0.15))
        # no term hides another: host, linear and KV reads each carry a real share of a serving run
        if get_run(r["run"]).client == "benchmark_serving":  # the vLLM 0.6 runs: host work is serial
            assert r["term_shares"]["host"] > 0 and r["term_shares"]["linear"] > 0.05, r["term_shares"]
            if r["num_requests"] >= 320 and get_run(r["run"]).workload.request_rate is None:  # 320 at once
                assert r["term_shares"]["kv_read"] > 0.05 and r["term_shares"]["host"] > 0.01, r["term_shares"]


def test_check_counts_comparable_rows_only(capsys):
    """--check exits 1 on a comparable row outside its band; a row marked not comparable is printed with its ratio
    and reason but never makes --check fail."""
    row = {"metric": "median_e2e_s", "published": 1.0, "simulated": 2.0, "ratio": 2.0, "ok": False}
    assert sv.counted({"rows": [row]}) == [row]
    assert sv.counted({"rows": [{**row, "not_comparable": "why"}]}) == []
    sv.main(["--run", "sglang_vllm060_multistep10_llama31_8b_a100", "--check"])  # whole: its TPOT is inside
    out = capsys.readouterr().out
    assert "not comparable (printed, not checked): median_e2e_s: " in out and "outside the target" not in out


def test_the_intake_and_the_zero_output_rule_follow_the_published_run():
    run = get_run("lambda_sharegpt320_llama3_8b_a100")
    result = sv.replay(run, max_requests=40)
    # the burst's intake: the fastest published first token less the first prefill step, over 320 requests
    assert 2e-3 < result["intake_per_request_s"] < run.first_token_s / 320
    assert result["mean_intake_wait_s"] == pytest.approx(40 * result["intake_per_request_s"], rel=1e-9)
    trace_like = type("T", (), {})()
    rec = type("R", (), {"arrival_time": 0.0, "finish_time": 2.0, "ttft": 1.0})
    trace_like.requests = {"req-0": rec(), "req-1": rec()}
    m = sv.client_metrics(run, trace_like, [0, 3])
    assert m["mean_ttft_s"] == 0.5 and m["median_tpot_ms"] == pytest.approx(500.0)  # TTFT 0: no text ever came
    assert sv.intake_per_request(get_run("vllm_latency_llama3_8b_a100"), CostModel()) == 0.0  # offline: none
