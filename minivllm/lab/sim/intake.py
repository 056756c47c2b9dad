"""When the engine sees a request: the API server's serial intake in front of it (§11.7, issue 19).

A request sent to an OpenAI-compatible server is parsed, validated and tokenised by one Python process
before the engine core can schedule it (vLLM's ``vllm/entrypoints/openai/serving_completion.py`` then
``AsyncLLM`` / V0's ``MQLLMEngineClient``). That work is serial and costs ``per_request_s`` per request.
One event loop runs every request handler that is ready before it runs the continuations that hand the
requests on, so requests that arrive while the intake is busy reach the engine together, when the
intake's queue drains:

    a burst of N requests at t = 0  ->  all N reach the engine at N x per_request_s
    requests spaced wider than per_request_s  ->  each one per_request_s after it arrived

This is what the published ShareGPT runs show (``minivllm/lab/sim/published_runs.py``): with 320 requests
sent at once, the first tokens of the whole run come ~1.2 s (A100 host) / ~0.8 s (H100 host) after the
start, and from then on one prefill step apart. An offline ``LLM.generate`` has no intake
(``per_request_s`` = 0). Latencies are still measured from the client's send time (the arrival).
"""

from __future__ import annotations

from collections.abc import Sequence


def intake_times(arrivals: Sequence[float], per_request_s: float) -> list[float]:
    """The time each request reaches the engine; ``arrivals`` sorted ascending (seconds)."""
    if per_request_s < 0:
        raise ValueError(f"intake_per_request_s must be >= 0, got {per_request_s}.")
    if any(b < a for a, b in zip(arrivals, arrivals[1:])):
        raise ValueError("intake_times needs the arrival times sorted ascending.")
    ready: list[float] = []
    start = 0  # first request of the current busy period
    busy_until = float("-inf")
    for i, t in enumerate(arrivals):
        if t > busy_until:  # the intake was idle: the previous busy period's requests go on together
            ready += [busy_until] * (i - start)
            start, busy_until = i, t
        busy_until += per_request_s
    ready += [busy_until] * (len(arrivals) - start)
    return ready
