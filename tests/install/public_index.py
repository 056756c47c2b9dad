"""Do the student set and the dev set resolve on the public package index alone, on every platform we support?

For each (platform, Python) pair it runs ``uv pip compile`` with ``--python-platform`` / ``--python-version`` /
``--only-binary :all:`` against https://pypi.org/simple only: no configuration file, no ``PIP_*`` / ``UV_*``
setting of this machine (which may point at a local wheel folder), no wheel downloaded (metadata only), nothing
installed. uv, not pip: ``pip install --dry-run --platform X`` evaluates environment markers for the machine it
runs on, not for X (on Linux it asks for torch's ``cuda-bindings`` on macOS and Triton on Windows), so it
cannot check another OS. uv evaluates them for the target and refuses a wheel whose platform tag does not fit.

    python tests/install/public_index.py            # the whole matrix, a table, exit 1 on any conflict
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHONS = ("3.11", "3.12", "3.13")  # 3.10: end of life (2026-10); transformers 5.21+ and ipykernel 7.4 need 3.11
SETS = {"student": "requirements.txt", "dev": "requirements-dev.txt"}
# uv's target names; Linux targets are manylinux_2_28 (glibc 2.28: any Linux of 2019 or later)
PLATFORMS = {
    "linux-x86_64": "x86_64-unknown-linux-gnu",
    "linux-aarch64": "aarch64-unknown-linux-gnu",
    "macos-arm64": "aarch64-apple-darwin",  # macOS 14 (MACOSX_DEPLOYMENT_TARGET below): torch 2.13's minimum
    "windows-x86_64": "x86_64-pc-windows-msvc",
}
MACOS = "14.0"


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
    """This process's environment without pip's or uv's settings (a certificate authority kept)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    if os.environ.get("PIP_CERT") and "SSL_CERT_FILE" not in env:
        env["SSL_CERT_FILE"] = os.environ["PIP_CERT"]
    env["MACOSX_DEPLOYMENT_TARGET"] = MACOS
    return env


def pinned(text: str) -> dict[str, str]:
    """``name==version`` lines of a compiled requirements file."""
    return {m[1].lower(): m[2] for m in re.finditer(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)", text, re.M)}


def resolve(set_name: str, platform: str, python: str, cache: str, timeout: float = 600) -> Resolution:
    with tempfile.TemporaryDirectory(prefix="minivllm-resolve-") as tmp:
        out = Path(tmp) / "resolved.txt"
        cmd = [sys.executable, "-m", "uv", "pip", "compile", str(ROOT / SETS[set_name]), "--quiet", "--no-config"]
        cmd += ["--index-url", "https://pypi.org/simple", "--only-binary", ":all:", "--no-header"]
        cmd += ["--python-version", python, "--python-platform", PLATFORMS[platform]]
        cmd += ["--cache-dir", cache, "--output-file", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=public_env(), timeout=timeout, cwd=ROOT)
        if proc.returncode != 0 or not out.is_file():
            lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
            return Resolution(platform, python, set_name, False, {}, "\n".join(lines[-12:]))
        return Resolution(platform, python, set_name, True, pinned(out.read_text()), "")


def resolve_all(workers: int = 8) -> list[Resolution]:
    """Every (set, platform, Python), several at a time (they wait on the network, not the CPU), one cache."""
    jobs = [(s, p, v) for s in SETS for p in PLATFORMS for v in PYTHONS]
    with tempfile.TemporaryDirectory(prefix="minivllm-uv-cache-") as cache:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda job: resolve(*job, cache=cache), jobs))


def table(results: list[Resolution]) -> str:
    rows = [f"{'set':8} {'platform':15} {'python':6} {'result':8} torch / triton / transformers / packages"]
    for r in results:
        if r.ok:
            p = r.packages
            what = f"torch {p.get('torch')}, triton {p.get('triton', '-')}, transformers {p.get('transformers')}"
            what += f", {len(p)} packages"
        else:
            what = next((ln for ln in r.error.splitlines() if "unsatisfiable" in ln or "error" in ln.lower()), "")
        rows.append(f"{r.set_name:8} {r.platform:15} {r.python:6} {'resolves' if r.ok else 'FAILS':8} {what[:140]}")
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
