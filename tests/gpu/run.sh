#!/usr/bin/env bash
# The GPU check, in one command, from the repository root:   bash tests/gpu/run.sh
# Sections and their time budgets (7.6 min on an H200, model loads included) are in tests/gpu/gpu_check.py.
# Writes $OUT/gpu_report.json and $OUT/gpu_summary.txt (OUT defaults to /tmp/minivllm-gpu).
# Without CUDA, or with --dry-run, it runs the same sections on CPU-sized inputs (CUDA tests skip).
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" TOKENIZERS_PARALLELISM=false
exec python tests/gpu/gpu_check.py "$@"
