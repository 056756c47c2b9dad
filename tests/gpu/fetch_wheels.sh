#!/usr/bin/env bash
# Fetch, here, the pure-Python wheels the GPU machine lacks into .whl/ (git-ignored); tests/gpu/run.sh installs
# them there offline (no registry is reachable from it). That machine has Python 3.12, torch 2.11, triton 3.6,
# transformers 5.17 and the rest of its image, but not plotly (the instructor section's Gantt figure) and, on a
# bare image, not hypothesis (tests/conftest.py imports it). All are py3-none-any: one download fits every
# platform. Run from the repository root: `bash tests/gpu/fetch_wheels.sh` (or `make gpu-wheels`); then carry .whl.
set -euo pipefail
cd "$(dirname "$0")/../.."
WHEELS=(hypothesis==6.155.2 sortedcontainers==2.4.0 plotly==7.1.0 narwhals==2.29.0 packaging==26.4)
rm -rf .whl && mkdir -p .whl
"${PYTHON:-python3}" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation py \
  --abi none --platform any -d .whl "${WHEELS[@]}"
ls .whl | grep -c '\.whl$' | xargs -I{} echo "{} wheels in .whl ($(du -sh .whl | cut -f1)); carry .whl to the GPU machine"
