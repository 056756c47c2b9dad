"""A grammar still compiling (§11.4.4): ``is_ready()`` says no the first ``ready_after`` times it is asked (its
request stays WAITING_FOR_FSM), then yes; it allows tokens 1, 2 and 3."""

from __future__ import annotations


class SlowGrammar:
    error = None

    def __init__(self, ready_after: int) -> None:
        self.calls, self.ready_after = 0, ready_after

    def is_ready(self) -> bool:
        self.calls += 1
        return self.calls > self.ready_after

    def allowed_token_ids(self) -> list[int]:
        return [1, 2, 3]

    def accept_token(self, token_id: int) -> None:
        pass
