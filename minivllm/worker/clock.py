"""The engine's clock (§11.7): what it must do, and the real one.

The real engine measures steps with ``time.perf_counter`` (synchronising CUDA first). A runner may
bring its own clock (the simulator's :class:`minivllm.lab.sim.clock.VirtualClock`), which the engine then
uses; anything with ``now()`` and ``wait_until(t)`` will do.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol


class Clock(Protocol):
    """Seconds on some clock; ``wait_until`` returns once ``now() >= t`` (sleeping, or jumping there)."""

    virtual: bool

    def now(self) -> float: ...

    def wait_until(self, t: float) -> None: ...


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
