"""sim_validation: every published run replays, has a source and metrics, and the table is the JSON (issue 19).

No accuracy threshold: this checks the benchmark's bookkeeping, not the cost model.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from minivllm.benchmarks import sim_validation as sv
from minivllm.sim.published_runs import PUBLISHED_RUNS, get_run

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
        assert set(run.metrics) <= set(sv.SIM_METRICS), run.name
        assert all(v > 0 for v in run.metrics.values()), run.name
        assert run.workload.num_requests == len(run.workload.lengths())
        # a setting the source does not state is None and explained
        stated = [run.settings.max_num_seqs, run.settings.max_num_batched_tokens, run.settings.enable_chunked_prefill]
        assert None not in stated or run.settings.notes, run.name


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
        assert r["stand_in"]["preset"] == run.preset
        assert r["stand_in"]["preset_kv_bytes_per_token"] == 4 * r["stand_in"]["run_kv_bytes_per_token"]  # MHA vs GQA


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
    head = next(i for i, line in enumerate(lines) if line.split()[:5] == list(sv.HEADER))
    table = [line.split() for line in lines[head + 1 :] if line.strip()]
    rows = [(r["run"], row) for r in doc["runs"] for row in r["rows"]]
    assert len(table) == len(rows)
    for cells, (name, row) in zip(table, rows):
        assert cells[0] == name and cells[1] == row["metric"]
        assert float(cells[2]) == pytest.approx(row["published"], rel=5e-4)
        assert float(cells[3]) == pytest.approx(row["simulated"], rel=5e-4)
        assert float(cells[4]) == pytest.approx(row["ratio"], abs=5e-4)
    for r in doc["runs"]:  # each run's stand-in and source are printed above the table
        assert f"stand-in preset {r['stand_in']['preset']}" in out and r["source"] in out


def test_bad_arguments_say_what_is_allowed(capsys):
    with pytest.raises(SystemExit):
        sv.main(["--run", "no_such_run"])
    assert "recorded:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sv.main(["--max-requests", "0"])
    assert "--max-requests must be >= 1" in capsys.readouterr().err
