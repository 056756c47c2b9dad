"""The machine fingerprint of a CPU fit, the local-fit cache and which fit a preset name resolves to (§11.7)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from minivllm.lab.benchmarks import sweep
from minivllm.lab.sim import local_fit
from minivllm.lab.sim.cost_model import CostModel
from minivllm.lab.sim.fingerprint import (
    UNKNOWN,
    Fingerprint,
    cpu_id,
    cpu_info,
    fingerprint_from_meta,
    machine_fingerprint,
)

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 23
model\t\t: 49
model name\t: AMD EPYC 7B12
stepping\t: 0

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: not the first processor
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty $MINIVLLM_CACHE, autofit off, and no warning given yet in this process."""
    monkeypatch.setenv("MINIVLLM_CACHE", str(tmp_path))
    monkeypatch.delenv(local_fit.AUTOFIT_ENV, raising=False)
    monkeypatch.setattr(local_fit, "_warned", set())
    return tmp_path


def other_machine() -> Fingerprint:
    here = machine_fingerprint(1)
    return Fingerprint("Some Other CPU", "GenuineIntel 6/85/7", here.logical_cpus, 1, "cpu", here.torch)


def save_local_fit(overhead_s: float, threads: int = 1) -> CostModel:
    """A local fit of cpu_smollm2 for this machine: the stored one with another overhead."""
    stored = CostModel.from_preset("cpu_smollm2")
    here = local_fit.machine_fingerprint(threads)
    model = CostModel(**{**stored.to_dict(), "overhead_s": overhead_s, "meta": {"fingerprint": here.to_dict()}})
    path = local_fit.local_fit_path("cpu_smollm2", here)
    path.parent.mkdir(parents=True, exist_ok=True)
    model.save(path)
    return model


def test_fingerprint_reads_processor_zero(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO)
    info = cpu_info(str(path))
    assert info["model name"] == "AMD EPYC 7B12"
    fp = machine_fingerprint(1, info=info)
    assert (fp.cpu_model, fp.cpu_id, fp.torch_threads, fp.clock) == ("AMD EPYC 7B12", "AuthenticAMD 23/49/0", 1, "cpu")
    assert machine_fingerprint(2, info=info).clock == "wall"  # CPU time sums threads: wall time at 2
    assert fp.logical_cpus >= 1 and fp.torch  # torch's version, read without importing it
    assert cpu_id({"model name": "x"}) == UNKNOWN  # no CPUID fields (not Linux)
    assert Fingerprint.from_dict(fp.to_dict()) == fp
    assert fp.key() == machine_fingerprint(1, info=info).key() != machine_fingerprint(2, info=info).key()
    with pytest.raises(ValueError, match="clock"):
        machine_fingerprint(1, "gpu")


def test_fingerprint_from_an_older_fits_meta():
    meta = {"machine": "AMD EPYC, 2 CPUs, Linux x86_64", "torch_threads": 1, "clock": "cpu", "torch": "2.13.0+cpu"}
    fp = fingerprint_from_meta(meta)
    assert fp == Fingerprint("AMD EPYC", UNKNOWN, 2, 1, "cpu", "2.13.0+cpu")
    assert fingerprint_from_meta({"source": "published profile"}) is None  # a GPU preset
    stored = fingerprint_from_meta(CostModel.from_preset("cpu_smollm2").meta)
    assert stored is not None and stored.torch_threads == 1 and stored.clock == "cpu"


def test_differences_name_each_field():
    here = Fingerprint("AMD EPYC", "AuthenticAMD 23/49/0", 2, 2, "wall", "2.13.0")
    fit = Fingerprint("AMD EPYC", UNKNOWN, 2, 1, "cpu", "2.13.0")
    diffs = fit.differences(here)
    assert diffs == [
        "CPU id (vendor family/model/stepping): not recorded in the fit, 'AuthenticAMD 23/49/0' here",
        "torch threads: 1 in the fit, 2 here",
        "clock: 'cpu' in the fit, 'wall' here",
    ]
    assert here.differences(here) == []


def test_cache_round_trip_and_a_matching_local_fit_wins(cache):
    saved = save_local_fit(overhead_s=0.5)
    path = local_fit.local_fit_path("cpu_smollm2", machine_fingerprint(1))
    assert path.parent == cache / "sim" and path.is_file()
    res = local_fit.resolve("cpu_smollm2")
    assert (res.source, res.path) == ("local", str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the local fit gives no warning
        model = local_fit.resolve_cost_model("cpu_smollm2")
    assert model.overhead_s == saved.overhead_s == 0.5
    assert model.meta["fingerprint"] == machine_fingerprint(1).to_dict()
    assert "local fit" in local_fit.fit_status() and str(path) in local_fit.fit_status()
    # a fit at another thread count is another file: at 2 threads the stored preset is used
    assert local_fit.resolve("cpu_smollm2", threads=2).source == "stored"


def test_stored_fit_from_another_machine_warns_once(cache, monkeypatch):
    monkeypatch.setattr(local_fit, "machine_fingerprint", lambda threads=1: other_machine())
    res = local_fit.resolve("cpu_smollm2")
    assert res.source == "stored" and any(d.startswith("CPU model: 'AMD EPYC' in the fit") for d in res.differences)
    with pytest.warns(local_fit.LocalFitWarning) as record:
        model = local_fit.resolve_cost_model("cpu_smollm2")
    message = str(record[0].message)
    assert "CPU model: 'AMD EPYC' in the fit, 'Some Other CPU' here" in message
    assert "python -m minivllm.lab.sim.calibrate --local" in message
    assert model.to_dict() == CostModel.from_preset("cpu_smollm2").to_dict()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        local_fit.resolve_cost_model("cpu_smollm2")
    assert local_fit.fit_status() == res.message()


def test_an_unreadable_cached_fit_is_not_used(cache):
    path = local_fit.local_fit_path("cpu_smollm2", machine_fingerprint(1))
    path.parent.mkdir(parents=True)
    path.write_text('{"name": "cpu_smollm2", "a_field_of_another_version": 1}')  # set: cannot be priced here
    res = local_fit.resolve("cpu_smollm2")
    assert res.source == "stored" and "cannot be read" in res.differences[-1] and str(path) in res.message()
    with pytest.warns(local_fit.LocalFitWarning, match="measure it again"):
        local_fit.resolve_cost_model("cpu_smollm2")


def test_a_cached_fit_with_a_retired_field_left_off_is_still_used(cache):
    save_local_fit(overhead_s=0.5)
    path = local_fit.local_fit_path("cpu_smollm2", machine_fingerprint(1))
    path.write_text(path.read_text().replace('"overhead_s"', '"retired_term_s": 0.0, "overhead_s"'))
    assert local_fit.resolve("cpu_smollm2").source == "local"
    assert local_fit.resolve_cost_model("cpu_smollm2").overhead_s == 0.5


def test_thread_mismatch_names_threads_and_the_command(cache):
    res = local_fit.resolve("cpu_smollm2", threads=2)
    assert "torch threads: 1 in the fit, 2 here" in res.differences
    assert "clock: 'cpu' in the fit, 'wall' here" in res.differences
    assert res.command == "python -m minivllm.lab.sim.calibrate --local --threads 2 --clock wall"


def test_gpu_presets_and_paths_are_used_as_given(cache, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a100 = local_fit.resolve_cost_model("llama2_7b_a100")
        path = tmp_path / "mine.json"
        CostModel(name="mine", overhead_s=1.0).save(path)
        mine = local_fit.resolve_cost_model(str(path))
    assert a100.to_dict() == CostModel.from_preset("llama2_7b_a100").to_dict()
    assert mine.overhead_s == 1.0 and local_fit.resolve(str(path)).source == "given"


def test_autofit_opt_in_measures_then_uses_the_local_fit(cache, monkeypatch):
    calls = []

    def fake_fit(preset: str, threads: int) -> None:  # stands in for the minutes-long measurement
        calls.append((preset, threads))
        save_local_fit(0.7, threads)

    monkeypatch.setattr(local_fit, "run_local_fit", fake_fit)
    with pytest.warns(local_fit.LocalFitWarning):
        local_fit.resolve_cost_model("cpu_smollm2")
    assert calls == []  # off by default
    monkeypatch.setenv(local_fit.AUTOFIT_ENV, "1")
    assert local_fit.resolve_cost_model("cpu_smollm2").overhead_s == 0.7
    assert calls == [("cpu_smollm2", 1)]
    local_fit.resolve_cost_model("cpu_smollm2")
    assert len(calls) == 1  # cached: measured once


def test_bench_sim_prices_with_the_local_fit(cache, monkeypatch, capsys):
    monkeypatch.setattr(local_fit, "machine_fingerprint", lambda threads=1: other_machine())
    argv = ["--mode", "sim", "--workload", "uniform", "--num-prompts", "4", "--no-progress"]
    with pytest.warns(local_fit.LocalFitWarning):  # no local fit yet: the stored one, with the warning
        stored = sweep.main(argv)[0]["metrics"]["duration"]
    save_local_fit(overhead_s=CostModel.from_preset("cpu_smollm2").overhead_s + 1.0)
    local = sweep.main(argv)[0]["metrics"]["duration"]
    assert local > stored + 1.0  # every step costs 1 s more in the local fit


@pytest.fixture
def tiny_long(tmp_path_factory):
    """A tiny random model long enough for the calibration scenes (prompts up to 1,264 tokens)."""
    from tests.helpers.tiny_models import save_tiny_model

    return save_tiny_model(str(tmp_path_factory.mktemp("tiny_long")), "llama", max_position_embeddings=2048)


@pytest.mark.slow
def test_calibrate_local_writes_a_fingerprinted_fit_to_the_cache(cache, tiny_long, monkeypatch, capsys):
    import torch

    from minivllm.lab.sim import calibrate

    scenes = calibrate.calibration_scenes()[:2]  # 20 steps: enough to fit, quick on the tiny model
    monkeypatch.setattr(calibrate, "calibration_scenes", lambda: scenes)
    monkeypatch.setattr(calibrate.os, "getloadavg", lambda: (0.5, 0.5, 0.5))  # a quiet machine
    threads = torch.get_num_threads()
    try:
        calibrate.main(["--local", "--model", tiny_long, "--repeats", "1"])
    finally:
        torch.set_num_threads(threads)
    here = machine_fingerprint(1, "cpu")  # --local: one thread, process CPU time
    path = local_fit.local_fit_path(f"cpu_{Path(tiny_long).name}", here)  # a model path: its folder's name
    assert path.parent == cache / "sim" and path.name.startswith("cpu_tiny_long")
    fit = CostModel.from_preset(str(path))
    assert fit.meta["fingerprint"] == here.to_dict() and fit.meta["clock"] == "cpu"
    assert fit.meta["command"] == f"python -m minivllm.lab.sim.calibrate --local --model {tiny_long} --repeats 1"
    assert fingerprint_from_meta(fit.meta) == here
    out = capsys.readouterr()
    assert f"wrote {path}" in out.out and "busy" not in out.err
    assert fit.meta["load_average_by_scene"] == [0.5, 0.5]  # one per scene
    with pytest.raises(SystemExit):
        calibrate.main(["--local", "--calibrate", "x.json"])


@pytest.mark.slow
def test_calibrate_warns_when_the_machine_was_busy(cache, tiny_long, monkeypatch, capsys):
    import torch

    from minivllm.lab.sim import calibrate

    scenes = calibrate.calibration_scenes()[:2]
    monkeypatch.setattr(calibrate, "calibration_scenes", lambda: scenes)
    monkeypatch.setattr(calibrate.os, "getloadavg", lambda: (3.0, 2.0, 1.0))  # two other processes running
    threads = torch.get_num_threads()
    try:
        calibrate.main(["--local", "--model", tiny_long, "--repeats", "1"])
    finally:
        torch.set_num_threads(threads)
    err = capsys.readouterr().err
    assert "the machine was busy while measuring (1-minute load average up to 3.0" in err
    assert "Measure again when the machine is quiet" in err
