"""Clocks for the engine: real wall time, or virtual time advanced by a cost model (§11.7).

The real engine measures steps with ``time.perf_counter`` (synchronising CUDA
first); the simulator advances a VirtualClock by each step's modelled cost, and
an idle engine jumps straight to the next arrival.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class WallClock:
    """Seconds since the clock was made; ``sync`` (e.g. CUDA synchronise) runs before each reading."""

    virtual = False

    def __init__(self, sync: Callable[[], None] | None = None) -> None:
        self.sync = sync
        self.t0 = time.perf_counter()

    def now(self) -> float:
        if self.sync is not None:
            self.sync()
        return time.perf_counter() - self.t0

    def wait_until(self, t: float) -> None:
        delay = t - self.now()
        if delay > 0:
            time.sleep(delay)


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
