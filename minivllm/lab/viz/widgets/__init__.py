"""Thin ipywidgets apps over the figure builders (figures in ``minivllm.lab.viz.figures``).

Each app builds its controls and ``go.FigureWidget``s, reruns or re-slices on every change,
and has ``.ui`` (display it, or end a cell with the app itself), ``.state()`` (plain data)
and ``.summary()`` (one line or a few) for notebooks to print under nbval.

- :class:`StepPlayer` (§11.3, §11.5): Play + slider over a finished trace.
- :class:`ConfigExplorer` (§11.7): scheduler settings -> simulator rerun -> Gantt + metrics.
- :class:`RecoveryExplorer` (§11.5): preempt a request yourself, step on, see what comes back.
- :class:`GoodputExplorer` (§11.7): a TPOT SLO slider over a budget sweep's goodput.
"""

from minivllm.lab.viz.widgets.explorer import ConfigExplorer
from minivllm.lab.viz.widgets.goodput import GoodputExplorer
from minivllm.lab.viz.widgets.player import StepPlayer
from minivllm.lab.viz.widgets.recovery_app import RecoveryExplorer

__all__ = ["ConfigExplorer", "GoodputExplorer", "RecoveryExplorer", "StepPlayer"]
