"""HTTP entry points (§11.9): the OpenAI-compatible server (``server``), its engine thread (``async_engine``),
the live demo page (``demo_routes``, ``static/``) and the serving benchmark client (``bench_serve``).

Mirrors ``vllm/entrypoints/openai/`` and ``benchmarks/benchmark_serving.py``.
"""
