"""The CPU cost model fitted where it runs: a local fit cached per machine, and which fit a name resolves to
(§11.7, issue 19).

A stored CPU preset (``cpu_smollm2``) was measured on one machine; on another its step times can be off by
tens of percent (issue 19: decode steps under-priced 16%, prompt steps over-priced 60%). So:

* ``python -m minivllm.lab.sim.calibrate --local`` measures this machine's real ModelRunner steps (one torch
  thread, process CPU time, as the stored fit was measured) and caches the fit at
  ``$MINIVLLM_CACHE/sim/<preset>-<fingerprint key>.json`` (:func:`local_fit_path`).
* :func:`resolve_cost_model` (what ``python -m minivllm bench --mode sim`` uses) returns that local fit when
  one matching this machine's :class:`~minivllm.lab.sim.fingerprint.Fingerprint` is cached; else the stored
  preset, with ONE warning per process naming what differs and the command to run.
* :func:`fit_status` is the same decision as a sentence, for a notebook cell to print.

The first simulated use does not measure by itself: that would put minutes of real model steps (about 5
with SmolLM2 on a 2-core EPYC), and machine-dependent numbers, inside a bench call, a CI test or a notebook
whose stored outputs nbval compares.
Set ``MINIVLLM_SIM_AUTOFIT=1`` to opt in: then a missing local fit is measured (by the command above, in a
subprocess, so its thread setting stays there) before the first use. Vidur profiles each new device once
and reuses the profile in the same way (``vidur/profiling/``, ``data/profiling/compute/<device>/``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from dataclasses import dataclass, field, fields
from pathlib import Path

from minivllm.lab.sim.cost_model import CostModel
from minivllm.lab.sim.fingerprint import Fingerprint, fingerprint_from_meta, machine_fingerprint

AUTOFIT_ENV = "MINIVLLM_SIM_AUTOFIT"
_warned: set[tuple[str, int]] = set()  # (preset, threads) already warned about in this process


class LocalFitWarning(UserWarning):
    """The simulator prices CPU steps with a fit from another machine (or thread count, clock, torch)."""


def cache_dir() -> Path:
    """``$MINIVLLM_CACHE/sim`` (default ``~/.cache/minivllm/sim``), the convention of
    ``minivllm.model.loader.cache_root`` (not imported: it would load torch into the simulator)."""
    root = os.environ.get("MINIVLLM_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "minivllm")
    return Path(root) / "sim"


def local_fit_path(preset: str, fingerprint: Fingerprint) -> Path:
    """``cache_dir()/<preset>-<fingerprint key>.json`` (a model given as a path: its folder's name)."""
    name = re.sub(r"[^\w.-]", "_", Path(preset).name)
    return cache_dir() / f"{name}-{fingerprint.key()}.json"


def load_fit(path: str | Path) -> CostModel:
    """A cached fit, read by this version of CostModel: a field it does not know is dropped when it is off (0,
    empty: a term this fit never modelled), and a ValueError when it is set (the fit cannot be priced here)."""
    d = json.loads(Path(path).read_text())
    known = {f.name for f in fields(CostModel)}
    return CostModel.from_dict({k: v for k, v in d.items() if k in known or v})


def local_fit_command(preset: str = "cpu_smollm2", threads: int = 1) -> str:
    """The one line that measures and caches this machine's fit."""
    model = preset.removeprefix("cpu_")
    extra = "" if model == "smollm2" else f" --model {model}"
    extra += "" if threads == 1 else f" --threads {threads} --clock wall"
    return f"python -m minivllm.lab.sim.calibrate --local{extra}"


@dataclass
class FitResolution:
    """Which fit a preset name stands for on this machine, and why."""

    preset: str
    source: str  # "local" (cached fit of this machine), "stored" (the package's preset) or "given" (not CPU)
    path: str  # the JSON file the cost model is read from ("" for a package preset by name)
    here: Fingerprint | None  # this machine at the wanted threads (None: not a CPU preset)
    fit: Fingerprint | None  # what the chosen fit was measured on
    differences: list[str] = field(default_factory=list)  # fit vs here, when the stored one is used
    command: str = ""  # how to make a local fit

    def cost_model(self) -> CostModel:
        return load_fit(self.path) if self.source == "local" else CostModel.from_preset(self.path or self.preset)

    def message(self) -> str:
        """One paragraph: stored or local, what differs, the command."""
        if self.source == "given":
            return f"{self.preset}: not a CPU fit; used as given."
        assert self.fit is not None
        if self.source == "local":
            return (
                f"{self.preset}: using this machine's local fit {self.path} "
                f"(measured on {self.fit.describe()}; matches this machine)."
            )
        why = "; ".join(self.differences)
        return (
            f"{self.preset}: using the stored fit (measured on {self.fit.describe()}), which differs from this "
            f"machine: {why}. Its step times may be off here by tens of percent. Fit this machine (about 5 minutes, "
            f"cached for later runs): {self.command}"
        )


def resolve(preset: str = "cpu_smollm2", threads: int = 1) -> FitResolution:
    """The fit ``preset`` stands for on this machine simulated at ``threads`` torch threads (no warning)."""
    if preset.endswith(".json"):
        return FitResolution(preset, "given", preset, None, None)
    stored = CostModel.from_preset(preset)  # ValueError for an unknown name
    fit = fingerprint_from_meta(stored.meta)
    if fit is None:
        return FitResolution(preset, "given", "", None, None)
    here = machine_fingerprint(threads)
    path = local_fit_path(preset, here)
    command = local_fit_command(preset, threads)
    differences = fit.differences(here)
    if path.is_file():
        try:
            load_fit(path)
            return FitResolution(preset, "local", str(path), here, here)
        except ValueError as e:  # written by another version of CostModel (JSONDecodeError is a ValueError)
            differences.append(f"the cached local fit {path} cannot be read ({e}); measure it again")
    return FitResolution(preset, "stored", "", here, fit, differences, command)


def fit_status(preset: str = "cpu_smollm2", threads: int = 1) -> str:
    """What :func:`resolve_cost_model` would use here, as a sentence (for a notebook cell to print)."""
    return resolve(preset, threads).message()


def autofit_enabled() -> bool:
    return os.environ.get(AUTOFIT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def run_local_fit(preset: str = "cpu_smollm2", threads: int = 1) -> None:
    """Measure and cache this machine's fit now (the command of :func:`local_fit_command`, in a subprocess)."""
    args = local_fit_command(preset, threads).split()[1:]
    print(f"{AUTOFIT_ENV}: no local fit of {preset} yet; measuring it: {' '.join(args[1:])}", file=sys.stderr)
    subprocess.run([sys.executable, *args], check=True, stdout=sys.stderr)


def resolve_cost_model(preset: str = "cpu_smollm2", threads: int = 1) -> CostModel:
    """The cost model ``preset`` stands for here: this machine's cached local fit, else (measured first when
    ``MINIVLLM_SIM_AUTOFIT=1``) the stored preset with one :class:`LocalFitWarning` per process and preset
    naming what differs and the command to run. Non-CPU presets and .json paths are returned as given."""
    res = resolve(preset, threads)
    if res.source == "stored" and autofit_enabled():
        run_local_fit(preset, threads)
        res = resolve(preset, threads)
    if res.source == "stored" and res.differences and (preset, threads) not in _warned:
        _warned.add((preset, threads))
        warnings.warn(res.message(), LocalFitWarning, stacklevel=2)
    return res.cost_model()
