"""Virtual time for the simulator (§11.7): advanced by each step's modelled cost, and an idle engine
jumps straight to the next arrival. It satisfies :class:`minivllm.worker.clock.Clock`."""

from __future__ import annotations


class VirtualClock:
    """Time that only moves when told to: by a step's modelled cost, or to the next arrival."""

    virtual = True

    def __init__(self, start: float = 0.0) -> None:
        self.t = start

    def now(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        if dt < 0:
            raise ValueError(f"a clock cannot go back: dt={dt}")
        self.t += dt

    def wait_until(self, t: float) -> None:
        self.t = max(self.t, t)
