"""The package's layering (design.md, "Layout"): each layer imports only the layers below it.

Read from the source with ast, so a new import that climbs a layer, a function-local import that
dodges a cycle, or a new function over the length limit fails here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LEAVES = {"errors", "calibration", "arrays", "procs"}
FACE = {"simulate", "result", "plots", "failures", "__init__"}
ALLOWED = {
    "leaf": set(),
    "config": {"leaf"},
    "step": {"leaf", "config"},
    "engine": {"leaf", "step"},
    "congestion": {"leaf", "config"},
    "network": {"leaf", "config", "step", "congestion"},
    "reliability": {"leaf", "config"},
    "face": {"leaf", "config", "step", "engine", "congestion", "network", "reliability"},
    "sweep": {"leaf", "config", "step", "engine", "network", "face"},
    "cli": {"leaf", "config", "step", "network", "reliability", "face", "sweep"},
}
"""Layer -> the layers it may import (besides its own modules)."""
LOCAL_IMPORTS = {("simulator/result.py", "simulator.plots"),
                 ("simulator/network/maxmin.py", "simulator.network.waterfill")}
"""Function-local project imports that are not cycles: Result's plot methods load matplotlib only
when a figure is asked for; the max-min solve loads its compiled kernel (numba) on the first
solve, so that ``import simulator`` stays free of numba."""
MAX_FUNCTION_LINES = 120
"""No function over this many lines, the compiled fluid kernel included (issue 17): its step is
one Numba function per phase, compiled without reference counting (simulator/congestion/
kernel.py)."""


def _layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "simulator":
        return "outside"
    if len(parts) == 1 or parts[1] in FACE:
        return "face"
    if parts[1] in LEAVES:
        return "leaf"
    return parts[1]


def _modules(folder: str):
    for path in sorted((ROOT / folder).rglob("*.py")):
        rel = path.relative_to(ROOT)
        yield rel.as_posix(), ".".join(rel.with_suffix("").parts), ast.parse(path.read_text())


def _imports(tree: ast.AST):
    """(module imported, at module level?) for every import of a project module."""
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from simulator import congestion`` imports the subpackage
            names = [f"simulator.{a.name}" for a in node.names] if node.module == "simulator" \
                else [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            yield name, id(node) in top or _in_type_checking(tree, node)


def _in_type_checking(tree, node) -> bool:
    for stmt in tree.body:
        if isinstance(stmt, ast.If) and getattr(stmt.test, "id", "") == "TYPE_CHECKING":
            if any(n is node for n in ast.walk(stmt)):
                return True
    return False


def test_each_layer_imports_only_the_layers_below_it():
    bad = []
    for path, module, tree in _modules("simulator"):
        here = _layer(module)
        for name, _ in _imports(tree):
            there = _layer(name)
            if there in ("outside", here):
                continue
            if there not in ALLOWED[here]:
                bad.append(f"{path} ({here}) imports {name} ({there})")
    assert not bad, "\n".join(bad)


def test_workloads_and_topologies_never_import_the_simulator():
    bad = [f"{path} imports {name}" for folder in ("workloads", "topologies")
           for path, _, tree in _modules(folder) for name, _ in _imports(tree)
           if name.split(".")[0] in ("simulator", "validation")]
    assert not bad, "\n".join(bad)


def test_no_function_local_project_imports():
    bad = []
    for folder in ("simulator", "validation"):
        for path, _, tree in _modules(folder):
            for name, top in _imports(tree):
                if not top and name.split(".")[0] in ("simulator", "workloads", "topologies",
                                                      "validation") \
                        and (path, name) not in LOCAL_IMPORTS:
                    bad.append(f"{path}: {name}")
    assert not bad, "function-local imports:\n" + "\n".join(bad)


def test_only_the_engine_imports_simpy():
    users = {path for path, module, tree in _modules("simulator")
             for name, _ in _imports(tree) if name.split(".")[0] == "simpy"}
    assert users and all(p.startswith("simulator/engine/") for p in users), users


@pytest.mark.parametrize("folder", ["simulator", "workloads", "topologies", "validation"])
def test_functions_stay_short(folder):
    over = {}
    for path, _, tree in _modules(folder):
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    over[f"{path}:{node.name}"] = n
    assert not over, over


def test_importing_the_package_loads_neither_numba_nor_dask():
    code = ("import sys, simulator; from simulator import Scenario, simulate; "
            "print(sorted(m for m in ('numba', 'dask', 'distributed') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_the_congestion_package_loads_its_kernel_on_first_use():
    code = ("import sys; from simulator import congestion; a = 'numba' in sys.modules; "
            "congestion.simulate_fluid; print(a, 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.split() == ["False", "True"]
