"""Which machine a CPU cost-model fit was measured on, and how it differs from this one (§11.7, issue 19).

A CPU step time depends on the processor (one "AMD EPYC" model-name string covers several generations in a
cloud VM, so the CPUID family / model / stepping is recorded too), on how many torch threads ran the step,
on the clock that timed it (``cpu``: process CPU time, ``wall``: ``time.perf_counter``) and on torch's
kernels (its version). :func:`machine_fingerprint` reads those facts here; a fit made by
:mod:`minivllm.lab.sim.calibrate` stores them in ``meta["fingerprint"]``, and :func:`fingerprint_from_meta`
rebuilds them from an older fit's free-text meta (``machine``, ``torch_threads``, ``clock``, ``torch``).
Vidur keys its profiles the same way, by device and parallelism (``vidur/config/device_sku_config.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from dataclasses import asdict, dataclass, fields
from importlib import metadata
from typing import Any, ClassVar

UNKNOWN = ""  # a fact the fit did not record


def cpu_info(path: str = "/proc/cpuinfo") -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty where the file is missing, e.g. not Linux)."""
    info: dict[str, str] = {}
    try:
        with open(path) as f:
            for line in f:
                if not line.strip():
                    break  # the end of processor 0's block
                key, sep, value = line.partition(":")
                if sep:
                    info[key.strip()] = value.strip()
    except OSError:
        pass
    return info


def cpu_id(info: dict[str, str]) -> str:
    """``vendor family/model/stepping`` (e.g. ``AuthenticAMD 23/49/0``, a Zen 2 EPYC), or UNKNOWN."""
    parts = [info.get(k) for k in ("cpu family", "model", "stepping")]
    if "vendor_id" not in info or any(p is None for p in parts):
        return UNKNOWN
    return f"{info['vendor_id']} {'/'.join(str(p) for p in parts)}"


def torch_version() -> str:
    """torch's version without importing it (the simulator runs without torch loaded)."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return UNKNOWN


def default_clock(threads: int) -> str:
    """The project's measuring protocol: one thread timed in process CPU time (robust to other processes on a
    shared machine; it would sum every thread's time at more), else wall time."""
    return "cpu" if threads == 1 else "wall"


@dataclass(frozen=True)
class Fingerprint:
    """The facts a CPU step time depends on; two fits are interchangeable when all of them are equal."""

    cpu_model: str  # /proc/cpuinfo "model name"
    cpu_id: str  # "vendor family/model/stepping"
    logical_cpus: int  # os.cpu_count()
    torch_threads: int  # torch.get_num_threads() while measuring
    clock: str  # "cpu" (process time) or "wall" (perf_counter)
    torch: str  # torch.__version__

    LABELS: ClassVar[dict[str, str]] = {
        "cpu_model": "CPU model",
        "cpu_id": "CPU id (vendor family/model/stepping)",
        "logical_cpus": "logical CPUs",
        "torch_threads": "torch threads",
        "clock": "clock",
        "torch": "torch version",
    }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Fingerprint:
        names = [f.name for f in fields(cls)]
        missing = [n for n in names if n not in d]
        if missing:
            raise ValueError(f"fingerprint lacks {missing}; it needs {names}.")
        return cls(**{n: d[n] for n in names})

    def key(self) -> str:
        """12 hex digits naming this fingerprint (the cache file's suffix)."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def differences(self, here: Fingerprint) -> list[str]:
        """One line per fact that differs: ``torch threads: 1 in the fit, 2 here``; a fact the fit did not
        record counts as different (it cannot be checked)."""
        out = []
        for name, label in self.LABELS.items():
            mine, theirs = getattr(self, name), getattr(here, name)
            if mine != theirs:
                shown = "not recorded" if mine == UNKNOWN else repr(mine)
                out.append(f"{label}: {shown} in the fit, {theirs!r} here")
        return out

    def describe(self) -> str:
        cpu = self.cpu_model + (f" [{self.cpu_id}]" if self.cpu_id else "")
        threads = f"{self.torch_threads} torch thread{'s' if self.torch_threads != 1 else ''}"
        return f"{cpu}, {self.logical_cpus} CPUs, {threads}, {self.clock} clock, torch {self.torch or '?'}"


def machine_fingerprint(threads: int = 1, clock: str | None = None, info: dict[str, str] | None = None) -> Fingerprint:
    """This machine, measured (or to be simulated) at ``threads`` torch threads with ``clock``
    (default: :func:`default_clock`)."""
    info = cpu_info() if info is None else info
    if clock not in (None, "cpu", "wall"):
        raise ValueError(f"clock must be 'cpu' or 'wall', got {clock!r}.")
    return Fingerprint(
        cpu_model=info.get("model name") or platform.processor() or platform.machine(),
        cpu_id=cpu_id(info),
        logical_cpus=os.cpu_count() or 1,
        torch_threads=threads,
        clock=clock or default_clock(threads),
        torch=torch_version(),
    )


def fingerprint_from_meta(meta: dict[str, Any]) -> Fingerprint | None:
    """A fit's fingerprint: ``meta["fingerprint"]``, else rebuilt from the older free-text fields (``machine``
    = "MODEL NAME, N CPUs, OS ARCH", ``torch_threads``, ``clock``, ``torch``); None for a preset that was not
    measured on a CPU by :mod:`minivllm.lab.sim.calibrate` (the GPU presets)."""
    if "fingerprint" in meta:
        return Fingerprint.from_dict(meta["fingerprint"])
    if "machine" not in meta or "torch_threads" not in meta:
        return None
    parts = [p.strip() for p in str(meta["machine"]).split(",")]
    cpus = next((int(p.split()[0]) for p in parts[1:] if p.endswith("CPUs") and p.split()[0].isdigit()), 0)
    return Fingerprint(
        cpu_model=parts[0],
        cpu_id=UNKNOWN,
        logical_cpus=cpus,
        torch_threads=int(meta["torch_threads"]),
        clock=str(meta.get("clock", "wall")),
        torch=str(meta.get("torch", UNKNOWN)),
    )
