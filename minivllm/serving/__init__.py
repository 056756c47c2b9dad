"""The serving wing (§11.9): the OpenAI-compatible HTTP server around the engine.

The server (``server``, ``serving``, ``protocol``), its engine thread (``async_engine``, ``detokenizer``), its
guards (``admin_guard``, ``body_limit``), the live demo page (``demo_routes``, ``demo_chats``, ``state_snapshot``,
``static/``) and its metrics (``metrics/``: Prometheus exposition and loggers). Mirrors ``vllm/entrypoints/openai/``
and ``vllm/v1/metrics/``. The engine never imports this package (tests/test_import_graph.py).
"""
