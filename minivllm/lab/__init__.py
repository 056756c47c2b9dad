"""The lab wing: everything around the engine that a chapter reader runs, measures or draws.

The simulator (``sim/``), the baselines (``baselines/``), the benchmarks (``benchmarks/``), the figures and widgets
(``viz/``), the exercises (``exercises/``), the command line (``cli/``), the scheduler test bench (``testbench``)
and the metrics tables (``metrics/``: summaries, goodput). The engine never imports this package
(tests/test_import_graph.py).
"""
