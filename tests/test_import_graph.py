"""The package's import graph: the engine imports neither wing (lab, serving), no cycle between modules or
between folders, and core/ stays torch-free and imports only the data types.

Every import counts, including those inside functions and under ``TYPE_CHECKING``: a lazy import hides a
cycle from Python, not from a reader.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "minivllm"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def imported(name: str, path: Path) -> set[str]:
    """The minivllm modules that ``name`` imports (a ``from pkg import mod`` counts as ``pkg.mod``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).strip(".")
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


GRAPH = {name: imported(name, path) for name, path in MODULES.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


WINGS = ("minivllm.lab", "minivllm.serving")  # the lab and the server around the engine
ENTRY_POINTS = {"minivllm.__main__"}  # ``python -m minivllm``: dispatches to the lab's CLI


def wing(name: str) -> str:
    """``minivllm.lab.sim.run`` -> ``minivllm.lab``; every other module (bar the entry point) is the engine's."""
    return next((w for w in WINGS if name == w or name.startswith(w + ".")), "engine")


def folder(name: str) -> str:
    """``minivllm.core.scheduler`` -> ``minivllm.core``, ``minivllm.lab.sim.run`` -> ``minivllm.lab.sim``: a
    wing's folders count one level down; root modules are their own folder."""
    depth = 3 if wing(name) != "engine" else 2
    return ".".join(name.split(".")[:depth])


def test_no_module_imports_itself_through_others():
    assert cycles(GRAPH) == []


def test_no_two_folders_import_each_other():
    folders: dict[str, set[str]] = {}
    for name, targets in GRAPH.items():
        for target in targets:
            if folder(name) != folder(target) and "minivllm" not in (name, target):
                folders.setdefault(folder(name), set()).add(folder(target))
    assert cycles(folders) == []


def test_the_engine_imports_neither_wing():
    """The engine (everything outside minivllm/lab and minivllm/serving) imports neither the lab nor the server;
    the server imports the engine only, never the lab."""
    engine = [n for n in GRAPH if wing(n) == "engine" and n not in ENTRY_POINTS]
    assert "minivllm.engine.llm_engine" in engine and "minivllm.lab.sim.run" not in engine
    crossing = {(n, t) for n in engine for t in GRAPH[n] if wing(t) != "engine"}
    assert crossing == set()
    serving = [n for n in GRAPH if wing(n) == "minivllm.serving"]
    assert serving and {(n, t) for n in serving for t in GRAPH[n] if wing(t) == "minivllm.lab"} == set()


def test_the_core_is_pure_python():
    """core/ (scheduler, KV cache manager, block pool) imports no torch and nothing outside core/ except the
    data types at the package root: it runs and tests in milliseconds."""
    allowed = {"minivllm.config", "minivllm.request", "minivllm.sampling_params"}
    core = [name for name in MODULES if name.startswith("minivllm.core")]
    assert "minivllm.core.scheduler" in core
    for name in core:
        tree = ast.parse(MODULES[name].read_text())
        roots = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        roots |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "torch" not in roots, name
        outside = {t for t in GRAPH[name] if not t.startswith("minivllm.core") and t not in allowed}
        assert not outside, (name, outside)
