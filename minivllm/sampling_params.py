"""SamplingParams: how one request wants its tokens chosen and when it stops.

Mirrors ``vllm/sampling_params.py`` (the fields minivllm uses, same names and
defaults). Invalid values raise ``ValueError`` naming the field and the allowed
range, at the API boundary (§11.4: the request carries these into the engine).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SamplingParams:
    """Per-request sampling and stopping rules.

    temperature == 0 means greedy. ``top_k`` of 0 or -1 means "all tokens" (vLLM
    accepts -1; 0 is accepted here too). ``seed`` gives the request its own
    generator, so its samples do not depend on what else is in the batch.
    """

    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    seed: int | None = None
    ignore_eos: bool = False
    stop_token_ids: list[int] = field(default_factory=list)
    min_tokens: int = 0
    guided_choice: list[str] | None = None  # §11.4.4: the output must be exactly one of these

    def __post_init__(self) -> None:
        self.stop_token_ids = list(self.stop_token_ids or [])
        self._verify()

    def _verify(self) -> None:
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}.")
        if self.temperature < 0.0:
            raise ValueError(f"temperature must be non-negative, got {self.temperature}.")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}.")
        if self.top_k < -1:
            raise ValueError(f"top_k must be -1 (disable), 0 (disable) or at least 1, got {self.top_k}.")
        if self.guided_choice is not None:
            if not isinstance(self.guided_choice, (list, tuple)):
                raise ValueError(f"guided_choice must be a list of strings, got {type(self.guided_choice).__name__}.")
            if self.ignore_eos:
                raise ValueError("guided_choice ends the output with EOS, so ignore_eos must be False.")
            self.guided_choice = list(self.guided_choice)
        if self.min_tokens < 0:
            raise ValueError(f"min_tokens must be greater than or equal to 0, got {self.min_tokens}.")
        if self.min_tokens > self.max_tokens:
            raise ValueError(
                f"min_tokens must be less than or equal to max_tokens={self.max_tokens}, got {self.min_tokens}."
            )

    @property
    def greedy(self) -> bool:
        """True when sampling is argmax (temperature 0)."""
        return self.temperature == 0.0
