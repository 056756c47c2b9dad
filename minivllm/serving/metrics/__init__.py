"""The server's metrics: the Prometheus exposition (``prometheus``) and the stat loggers (``loggers``), as
vLLM's ``vllm/v1/metrics/prometheus.py`` and ``loggers.py``."""
