"""A Python replay of what the browser does with a FigureWidget's messages (no browser, no kernel).

plotly's front end (``plotly/package_data/widgetbundle.js``, the anywidget model and view) starts a
view from the model's ``_widget_layout`` / ``_widget_data`` and then applies each ``_py2js_*``
message as a *merge*: for every key of ``relayout_data`` / ``style_data`` it does lodash
``set(obj, key, value)``, or ``unset`` when the value is ``null``; keys the message does not name
stay as they were (``Plotly.relayout`` / ``restyle`` / ``update`` do the same on the plot).
:class:`FrontEnd` records those messages through traitlets, exactly as the comm sends them, and
replays them with the same rules, so a test can ask "what would the browser show now?".
"""

from __future__ import annotations

import math
import re
from copy import deepcopy
from typing import Any

import plotly.graph_objects as go
from plotly.basedatatypes import Undefined

MESSAGES = (
    "_py2js_addTraces",
    "_py2js_deleteTraces",
    "_py2js_moveTraces",
    "_py2js_restyle",
    "_py2js_relayout",
    "_py2js_update",
    "_py2js_removeLayoutProps",
    "_py2js_removeTraceProps",
)


def _path(key: str | tuple) -> list[str | int]:
    """lodash's path syntax: ``"xaxis.range[1]"`` -> ``["xaxis", "range", 1]``."""
    if isinstance(key, tuple):
        return list(key)
    return [int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", key)]


def _set(obj: dict, key: str | tuple, value: Any) -> None:
    *head, last = _path(key)
    for i, part in enumerate(head):
        nxt = head[i + 1] if i + 1 < len(head) else last
        if isinstance(obj, list):
            while len(obj) <= part:
                obj.append(None)
            if obj[part] is None:
                obj[part] = [] if isinstance(nxt, int) else {}
            obj = obj[part]
        else:
            obj = obj.setdefault(part, [] if isinstance(nxt, int) else {})
    if isinstance(obj, list):
        while len(obj) <= last:
            obj.append(None)
    obj[last] = deepcopy(value)


def _unset(obj: dict, key: str | tuple) -> None:
    *head, last = _path(key)
    for part in head:
        try:
            obj = obj[part]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(obj, dict):
        obj.pop(last, None)
    elif isinstance(obj, list) and last < len(obj):
        obj[last] = None


def _merge(obj: dict, data: dict | None) -> None:
    """The model's ``dA`` (and ``Plotly.relayout``): set each key, unset on null."""
    for key, value in (data or {}).items():
        _unset(obj, key) if value is None else _set(obj, key, value)


def _restyle(traces: list[dict], style: dict | None, indexes: list[int] | None) -> None:
    """The model's ``PQ`` (and ``Plotly.restyle``): value i goes to trace indexes[i]; undefined skips."""
    indexes = list(range(len(traces))) if indexes is None else list(indexes)
    for key, values in (style or {}).items():
        values = values if isinstance(values, list) else [values]
        for i, t in enumerate(indexes):
            v = values[i % len(values)]
            if v is None:
                _unset(traces[t], key)
            elif v is not Undefined:
                _set(traces[t], key, v)


class FrontEnd:
    """One browser view of ``fw``, created now (from the state a new view starts from)."""

    def __init__(self, fw: go.FigureWidget) -> None:
        self.layout: dict = deepcopy(fw._widget_layout)
        self.data: list[dict] = deepcopy(fw._widget_data)
        self.messages: list[tuple[str, dict]] = []
        fw.observe(self._on_message, names=list(MESSAGES))

    def _on_message(self, change: dict) -> None:
        msg = change["new"]
        if msg is None:
            return
        name = change["name"]
        self.messages.append((name, msg))
        if name == "_py2js_addTraces":
            self.data.extend(deepcopy(msg["trace_data"]))
        elif name == "_py2js_deleteTraces":
            for i in sorted(msg["delete_inds"], reverse=True):
                del self.data[i]
        elif name == "_py2js_restyle":
            _restyle(self.data, msg["restyle_data"], msg["restyle_traces"])
        elif name == "_py2js_relayout":
            _merge(self.layout, msg["relayout_data"])
        elif name == "_py2js_update":
            _restyle(self.data, msg["style_data"], msg["style_traces"])
            _merge(self.layout, msg["layout_data"])
        elif name == "_py2js_removeLayoutProps":
            for key in msg["remove_props"]:
                _unset(self.layout, key)
        elif name == "_py2js_removeTraceProps":
            for key in msg["remove_props"]:
                _unset(self.data[msg["remove_trace"]], key)
        else:
            raise NotImplementedError(name)

    def annotations(self) -> list[str]:
        """The annotation texts this view shows."""
        return [a.get("text", "") for a in self.layout.get("annotations") or []]


def normalised(obj: Any) -> Any:
    """JSON-like state with ``uid``s and empty containers dropped (``[]`` and absent draw the same)."""
    if hasattr(obj, "tolist"):  # numpy arrays and scalars
        obj = obj.tolist()
    if isinstance(obj, dict):
        out = {k: normalised(v) for k, v in obj.items() if k != "uid"}
        return {k: v for k, v in out.items() if v not in ([], {}, None)}
    if isinstance(obj, list | tuple):
        return [normalised(v) for v in obj]
    if isinstance(obj, float) and math.isnan(obj):
        return "NaN"  # so that equal figures compare equal
    return obj


def python_state(fw: go.FigureWidget) -> tuple[dict, list[dict]]:
    """(layout, traces) of the Python figure, normalised."""
    return normalised(fw._layout_obj._props), normalised(fw._data)  # raw values, as the comm sends them


def view_state(view: FrontEnd) -> tuple[dict, list[dict]]:
    """(layout, traces) the browser view would show, normalised."""
    return normalised(view.layout), normalised(view.data)
