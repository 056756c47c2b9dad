"""The engine's offline entry point: ``LLM`` (``llm.py``), as vLLM's ``vllm/entrypoints/llm.py``.

The HTTP server is the serving wing (``minivllm/serving/``).
"""
