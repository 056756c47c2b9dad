# The test loops (README "Tests"). Each target is the exact command; run it from the repository root in the venv.
# Measured on this repository's 2-core AMD EPYC dev machine, shared with other jobs, with
# /usr/bin/time -f "%e s wall %U+%S s cpu" (CPU time is what a quiet machine's wall time approaches):
#   core       3.3 s CPU, 3.9 s wall (load 6); 10 s CPU with CI=true. 182 tests: scheduler, KV cache, config, trace and metrics, the import graph, the loops themselves. No model and no
#              torch import: a run of these paths fails whatever imports torch (tests/helpers/torch_free.py).
#   fast       171 s CPU, 619 s wall (load 11-13): 822 passed, 11 skipped, 51 slow deselected; no notebooks.
#   notebooks  184 s CPU, 197 s wall (load 2-9): 255 cells under strict nbval (chapters/conftest.py loads nbval).
#   lint       0.1 s CPU (ruff, cached).   types: 67 s CPU cold cache, 0.8 s warm (mypy).
#   all        lint, types, then every test and notebook: what .ci/run runs (with CI=true: hypothesis `ci`).
# Hypothesis: the `dev` profile (100 examples per property) unless CI=true or --hypothesis-profile ci (1,000).

PYTEST = python -m pytest

.PHONY: core fast notebooks lint types all gpu-wheels

core:
	$(PYTEST) tests/core tests/lab/metrics tests/serving/metrics tests/test_import_graph.py tests/test_loops.py

fast:
	$(PYTEST) -m "not slow" tests

notebooks:
	$(PYTEST) chapters

lint:
	ruff check . && ruff format --check .

types:
	mypy

all: lint types
	$(PYTEST)

# The wheels the GPU machine lacks (no registry there), for Python 3.12, into .whl/ (ignored); carry .whl.
gpu-wheels:
	bash tests/gpu/fetch_wheels.sh
