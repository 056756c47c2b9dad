"""What a caller gets back for one request (vLLM: ``vllm/outputs.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RequestOutput:
    """What a caller sees of one request (``vllm.outputs.RequestOutput``, one completion)."""

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    token_ids: list[int] = field(default_factory=list)
    text: str = ""
    finished: bool = False
    finish_reason: str | None = None
    stop_reason: int | str | None = None
