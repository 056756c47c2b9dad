"""Do the student set and the dev set resolve on the public package index alone, on every platform we support?

Runs ``pip install --dry-run`` for each (platform, Python) pair with ``--platform`` / ``--python-version`` /
``--only-binary=:all:`` against https://pypi.org/simple only: no configuration file, no ``PIP_*`` setting of
this machine (which may point at a local wheel folder), nothing installed. It uses a current pip, set up in a
throw-away venv first: a pip that reads the index's separate metadata files (PEP 658) resolves torch without
downloading its wheels (Debian's venv brings pip 23, which fetched every wheel and took minutes per pair).
Resolving the dev set (which includes the student set) also proves the student set resolves; the student set
alone is resolved too, so a report names the set that broke.

    python tests/install/public_index.py            # the whole matrix, a table, exit 1 on any conflict
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import venv
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
SETS = {"student": ("requirements.txt",), "dev": ("requirements-dev.txt",)}


def _manylinux(arch: str) -> list[str]:
    """pip does not widen ``manylinux_2_28`` to the older glibc tags, so every one is named (glibc 2.17-2.35)."""
    return [f"manylinux_2_{m}_{arch}" for m in range(35, 16, -1)] + [f"manylinux2014_{arch}"]


PLATFORMS = {
    "linux-x86_64": _manylinux("x86_64"),
    "linux-aarch64": _manylinux("aarch64"),
    "macos-arm64": ["macosx_14_0_arm64"],  # pip widens macOS tags itself (11.0-14.0, universal2)
    "windows-x86_64": ["win_amd64"],
}


@dataclass
class Resolution:
    platform: str
    python: str
    set_name: str
    ok: bool
    packages: dict[str, str]
    error: str

    @property
    def label(self) -> str:
        return f"{self.set_name} / {self.platform} / Python {self.python}"


def public_env() -> dict[str, str]:
    """This process's environment without pip settings, and with no pip configuration file."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # pip then reads no configuration file at all
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def current_pip(folder: str) -> str:
    """A Python whose pip is the index's newest, in a new venv under ``folder``."""
    venv.create(folder, with_pip=True)
    python = str(Path(folder) / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))
    cmd = [python, "-m", "pip", "install", "--quiet", "--upgrade", "pip", "--index-url", "https://pypi.org/simple"]
    if os.environ.get("PIP_CERT"):
        cmd += ["--cert", os.environ["PIP_CERT"]]
    subprocess.run(cmd, check=True, env=public_env(), timeout=300)
    return python


def resolve(python_exe: str, set_name: str, platform: str, python: str, timeout: float = 900) -> Resolution:
    with tempfile.TemporaryDirectory(prefix="minivllm-resolve-") as tmp:
        report = Path(tmp) / "report.json"
        cmd = [python_exe, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
        cmd += ["--index-url", "https://pypi.org/simple", "--only-binary=:all:", "--python-version", python]
        cmd += [arg for tag in PLATFORMS[platform] for arg in ("--platform", tag)]
        cmd += ["--target", str(Path(tmp) / "target"), "--report", str(report)]
        if os.environ.get("PIP_CERT"):  # a machine whose TLS goes through its own certificate authority
            cmd += ["--cert", os.environ["PIP_CERT"]]
        for req in SETS[set_name]:
            cmd += ["-r", str(ROOT / req)]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=public_env(), timeout=timeout, cwd=ROOT)
        if proc.returncode != 0 or not report.is_file():
            lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
            return Resolution(platform, python, set_name, False, {}, "\n".join(lines[-12:]))
        items = json.loads(report.read_text())["install"]
        packages = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in items}
        return Resolution(platform, python, set_name, True, packages, "")


def resolve_all(workers: int = 8) -> list[Resolution]:
    """Every (set, platform, Python), several pip processes at a time (they wait on the network, not the CPU)."""
    jobs = [(s, p, v) for s in SETS for p in PLATFORMS for v in PYTHONS]
    with tempfile.TemporaryDirectory(prefix="minivllm-pip-") as tmp, ThreadPoolExecutor(max_workers=workers) as pool:
        python_exe = current_pip(tmp)
        return list(pool.map(lambda job: resolve(python_exe, *job), jobs))


def table(results: list[Resolution]) -> str:
    rows = [f"{'set':8} {'platform':15} {'python':6} {'result':8} torch / triton / packages"]
    for r in results:
        if r.ok:
            torch, triton = r.packages.get("torch"), r.packages.get("triton", "-")
            what = f"torch {torch}, triton {triton}, {len(r.packages)} packages"
        else:
            what = r.error.splitlines()[-1] if r.error else "no report"
        rows.append(f"{r.set_name:8} {r.platform:15} {r.python:6} {'resolves' if r.ok else 'FAILS':8} {what}")
    return "\n".join(rows)


def main() -> int:
    results = resolve_all()
    print(table(results))
    failed = [r for r in results if not r.ok]
    for r in failed:
        print(f"\n--- {r.label}\n{r.error}")
    print(f"\n{len(results) - len(failed)} of {len(results)} resolve on the public index")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
