"""A model runner that fails on purpose: tests inject faults with it (the engine has no fault hook).

``FaultyRunner(inner, fault)`` runs ``inner.execute_model`` and then ``fault(scheduler_output)``; whatever
``fault`` raises is the runner's own failure to the engine, which rolls the step back
(``minivllm.core.rollback``: a ``RequestError`` names the requests it belongs to, anything else fails the
whole step's requests). Every other attribute is the inner runner's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minivllm.core.output import ModelRunnerOutput, SchedulerOutput

Fault = Callable[[SchedulerOutput], None]


class FaultyRunner:
    """Wraps a runner; ``fault`` (may be set or cleared between steps) runs after each ``execute_model``."""

    def __init__(self, inner: Any, fault: Fault | None = None) -> None:
        self.inner, self.fault = inner, fault

    def execute_model(self, scheduler_output: SchedulerOutput) -> ModelRunnerOutput:
        result = self.inner.execute_model(scheduler_output)
        if self.fault is not None:
            self.fault(scheduler_output)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def inject(engine: Any, fault: Fault | None = None) -> FaultyRunner:
    """Wrap ``engine``'s runner (once) in a FaultyRunner running ``fault``; returns the wrapper."""
    runner = engine.model_runner
    if not isinstance(runner, FaultyRunner):
        runner = engine.model_runner = FaultyRunner(runner)
    runner.fault = fault
    return runner
