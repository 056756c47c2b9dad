"""A throw-away JupyterLab for browser tests, and the widget cells of a chapter notebook.

``running_lab(root)`` starts ``jupyter lab`` on 127.0.0.1 (a free port, a random token) with its config,
data, runtime, settings and workspace folders under a temporary directory, so nothing of the user's
Jupyter set-up is read or written; its log (kernels included) is kept for the test to read.

``widget_notebook(src, dst, app)`` writes the cells a notebook's widget apps (or its ``app``-th one
alone) need: every code cell that builds or drives an app (``minivllm.lab.viz.widgets``, ``ipywidgets``,
``FigureWidget``), and, going back, every earlier cell that defines a name they use. A first cell moves
the kernel to the notebook's own folder and records every traceback a widget callback prints
(``_BROWSER_TEST_ERRORS``).
"""

from __future__ import annotations

import ast
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import nbformat

WIDGET_MARKERS = ("minivllm.lab.viz.widgets", "ipywidgets", "FigureWidget")

PRELUDE = """\
# written by tests/helpers/jupyterlab.py: run from the notebook's folder, record widget callback errors
import os
import traceback

os.chdir(FOLDER)
_BROWSER_TEST_ERRORS = []
_browser_test_showtraceback = get_ipython().showtraceback


def _browser_test_record(*args, **kwargs):
    import sys
    import plotly.graph_objects as go

    text, tb = traceback.format_exc(), sys.exc_info()[2]
    while tb is not None:  # name the figure whose handler raised
        owner = tb.tb_frame.f_locals.get("self")
        if isinstance(owner, go.FigureWidget):
            text += f"\\n(in the FigureWidget titled {owner.layout.title.text!r})"
            break
        tb = tb.tb_next
    _BROWSER_TEST_ERRORS.append(text)
    return _browser_test_showtraceback(*args, **kwargs)


get_ipython().showtraceback = _browser_test_record
"""

# JupyterLab settings: every cell in the DOM (no windowing, so off-screen plots get a size), no news.
SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


def _names(source: str) -> tuple[set[str], set[str], set[str]]:
    """(names a cell defines, names it reads before defining them, names it binds to a call's result
    at top level, e.g. ``app = StepPlayer(trace)``); whatever the cell itself defines is not "read"."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython magics: treat the cell as defining and reading nothing
        return set(), set(), set()
    defined, used = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (defined if isinstance(node.ctx, ast.Store) else used).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
    made = {
        t.id
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    if tree.body and isinstance(tree.body[-1], ast.Expr) and not isinstance(tree.body[-1].value, ast.Call):
        made.add("<displayed>")  # the cell shows its last value (``app.ui``, a FigureWidget)
    return defined, used - defined, made


def app_cells(cells: list[str]) -> list[int]:
    """Indexes of the cells that build a widget app: they mention a widget module and bind or show a value."""
    return [i for i, src in enumerate(cells) if any(m in src for m in WIDGET_MARKERS) and _names(src)[2]]


def widget_cells(cells: list[str], app: int | None = None) -> list[int]:
    """Indexes of the code cells (sources given) that the widget apps need, in notebook order: the cells
    that build an app (:func:`app_cells`), the later cells that drive one (they read its name), and every
    earlier cell that defines a name a kept cell reads. With ``app`` (an index into :func:`app_cells`), only
    that app and what it needs: no other app's cell is kept, so no other widget is shown before it."""
    info = [_names(src) for src in cells]
    builders = app_cells(cells)
    chosen = builders if app is None else [builders[app]]
    apps: set[str] = set()
    keep: set[int] = set()
    for i in range(len(cells)):
        defined, used, made = info[i]
        if i in chosen:
            keep.add(i)
            apps |= made - {"<displayed>"}
        elif i not in builders and used & apps:
            keep.add(i)
    for i in sorted(keep, reverse=True):  # pull in the earlier cells that define what a kept cell reads
        need = set(info[i][1])
        for j in range(i - 1, -1, -1):
            if info[j][0] & need and (j in chosen or j not in builders):
                if j not in keep:
                    keep.add(j)
                    need |= info[j][1]
                need -= info[j][0]
    return sorted(keep)


def widget_notebook(src: Path, dst: Path, app: int | None = None) -> int:
    """Write ``dst``: the prelude and the cells ``src``'s widget apps need (``app``: that one app only).
    Returns how many were kept."""
    nb = nbformat.read(src, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    kept = [code[i] for i in widget_cells([c.source for c in code], app)]
    out = nbformat.v4.new_notebook(metadata=nb.metadata)
    out.cells = [nbformat.v4.new_code_cell(PRELUDE.replace("FOLDER", repr(str(src.parent))))]
    out.cells += [nbformat.v4.new_code_cell(c.source) for c in kept]
    nbformat.write(out, dst)
    return len(kept)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Lab:
    url: str
    token: str
    log: Path

    def page(self, notebook: str) -> str:
        """The URL that opens ``notebook`` (relative to the root) in a fresh workspace."""
        return f"{self.url}/lab/tree/{notebook}?reset&token={self.token}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def end_sessions(self) -> None:
        """Shut down every notebook session and its kernel (a closed page leaves them running)."""
        auth = {"token": self.token}
        for s in httpx.get(f"{self.url}/api/sessions", params=auth).json():
            httpx.delete(f"{self.url}/api/sessions/{s['id']}", params=auth)


@contextmanager
def running_lab(root: Path, home: Path, timeout: float = 300.0) -> Iterator[Lab]:
    """``jupyter lab`` serving ``root``, its Jupyter folders under ``home``; stopped (SIGTERM, then KILL) on exit.
    ``timeout`` only guards against a hang: /api/status answers in ~5 s on a quiet machine."""
    dirs = {name: home / name for name in ("config", "data", "runtime", "settings", "workspaces", "ipython", "home")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    for rel, value in SETTINGS.items():
        path = dirs["settings"] / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(dirs["config"]),
        JUPYTER_DATA_DIR=str(dirs["data"]),
        JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
        JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
        JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]),
        IPYTHONDIR=str(dirs["ipython"]),
        TOKENIZERS_PARALLELISM="false",
        TQDM_DISABLE="1",
    )
    port, token = free_port(), secrets.token_hex(16)
    log = home / "jupyterlab.log"
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]  # fmt: skip
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # containers and CI runners
        cmd.append("--allow-root")
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=root)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/api/status", params={"token": token}, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"jupyter lab did not answer in {timeout:.0f} s:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
        yield Lab(url, token, log)
    finally:
        proc.send_signal(signal.SIGTERM)  # the server shuts its kernels down on SIGTERM
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
