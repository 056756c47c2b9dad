#!/usr/bin/env bash
# The GPU check, in one command, from the repository root:   bash tests/gpu/run.sh   (--dry-run: CPU sizes)
# Fits the GPU machine as it is (Python 3.12, torch 2.11, triton 3.6, transformers 5.17, no registry): the
# wheels it lacks come in .whl/ (fetched here by `bash tests/gpu/fetch_wheels.sh`, carried) and are installed
# offline into /tmp, outside the image. The whole check, this start-up included, stays within 300 s: sections
# and budgets are in tests/gpu/gpu_check.py. It writes $OUT/gpu_report.json, $OUT/gpu_summary.txt and
# $OUT/gpu_check.log after every section (OUT defaults to /tmp/minivllm-gpu), so a cut-off run still reports.
set -uo pipefail
export MINIVLLM_GPU_CHECK_START="${MINIVLLM_GPU_CHECK_START:-$(date +%s.%N)}"  # the 300 s count from here
cd "$(dirname "$0")/../.."
PY="${PYTHON:-python3}"
if compgen -G ".whl/*.whl" >/dev/null; then
  SITE="${TMPDIR:-/tmp}/minivllm-gpu-site-$$"  # this run's own: runs side by side never share one
  rm -rf "$SITE"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
    --target "$SITE" .whl/*.whl || { echo "could not install the carried wheels in .whl/" >&2; exit 2; }
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
exec "$PY" tests/gpu/gpu_check.py "$@"
