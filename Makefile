# The test loops (README "Tests"). Each target is the exact command; run it from the repository root in the venv.
# Times measured on this repository's 2-core AMD EPYC dev machine, shared (load average ~12 at the time), with
# /usr/bin/time -f "%e s wall %U+%S s cpu": CPU time is what a quiet laptop's wall time approaches.
#   core       CPU ~4 s    wall ~15 s    scheduler, KV cache, rollback (fake runner), trace and metrics, the import
#                                        graph, the loops themselves; no model and no torch import (a run of these
#                                        paths fails if anything imports torch: tests/helpers/torch_free.py)
#   fast       see the report  everything in tests/ but the `slow` tests; no notebooks
#   notebooks  see the report  the chapter notebooks under strict nbval (chapters/conftest.py loads nbval)
#   lint, types                ruff, mypy
#   all        what .ci/run runs after the set-up (CI=true there: the hypothesis `ci` profile, 1,000 examples)
# Hypothesis: the `dev` profile (100 examples per property) unless CI=true or --hypothesis-profile ci.

PYTEST = python -m pytest

.PHONY: core fast notebooks lint types all

core:
	$(PYTEST) tests/core tests/lab/metrics tests/serving/metrics tests/test_import_graph.py tests/test_loops.py --ignore=tests/core/test_rollback.py

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
