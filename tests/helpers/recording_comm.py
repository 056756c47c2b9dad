"""A stand-in for the comm a widget opens: it records the open message's state and every update sent after it,
as the browser would receive them (no kernel, no browser)."""

from __future__ import annotations

from copy import deepcopy

import comm
import numpy as np
import pytest


class RecordingComm:
    """What ``comm.create_comm`` hands ipywidgets: ``messages[0]`` is the open message's state, then the state of
    every ``update`` message sent."""

    def __init__(self, data: dict, buffers=None, **kwargs) -> None:
        self.comm_id, self.kernel = f"c{id(self)}", object()  # a kernel: ipywidgets sends only with one
        self.messages: list[dict] = [_with_buffers(data, buffers)]

    def send(self, data=None, buffers=None, **kwargs) -> None:
        if data.get("method") == "update":
            self.messages.append(_with_buffers(data, buffers))

    def on_msg(self, callback) -> None:
        pass

    def close(self, *args, **kwargs) -> None:
        pass


def _with_buffers(data: dict, buffers) -> dict:
    """The message's state with each binary buffer back in its place, as numbers (the browser puts a DataView
    there; plotly's model reads it with the ``dtype`` beside it)."""
    state = deepcopy(data["state"])
    for path, buf in zip(data.get("buffer_paths", []), buffers or []):
        *head, last = path
        parent = state
        for key in head:
            parent = parent[key]
        parent[last] = np.frombuffer(bytes(buf), dtype=parent["dtype"]).tolist()
    return state


def record_comms(monkeypatch: pytest.MonkeyPatch) -> list[RecordingComm]:
    """Every comm opened from now on (the test's ``monkeypatch`` undoes it), in order."""
    made: list[RecordingComm] = []

    def create_comm(**kwargs):
        made.append(RecordingComm(**kwargs))
        return made[-1]

    monkeypatch.setattr(comm, "create_comm", create_comm)
    return made


def figure_comms(made: list[RecordingComm]) -> list[RecordingComm]:
    """The comms of FigureWidgets (their open state holds a figure)."""
    return [c for c in made if "_widget_data" in c.messages[0]]
