"""The import graph stays clean: every arrow runs down the layer order (LAYERS), no cycle between subpackages,
nothing outside cli/ imports cli/, fabricbench's own modules imported at module top (at most MAX_LOCAL inside
functions), and neither `import fabricbench` nor the CLI's start imports torch.

    pytest -q tests/house/test_imports.py

A "subpackage" is a first-level name under fabricbench/ (measuring, fabrics, cli, errors.py ...). Every import
counts for the graph, at module top or inside a function: an import moved into a function still ties the two.
So does a module named in a string ("fabricbench.studying.machine" as a child program): the layer test reads
those too, since a lower layer that starts a higher one's module depends on it as much as an import does.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import roots

ROOT = roots.ROOT / "fabricbench"
PKG = "fabricbench"
# Own modules imported inside a function; each one left says why in a comment (a cycle inside a subpackage,
# or a package __init__ that stays light). Imports of torch, transformers, deepspeed, matplotlib and pandas are
# not counted: they stay inside functions on purpose.
MAX_LOCAL = 40
# The entry point may import the CLI; nothing else outside cli/ may.
CLI_IMPORTERS_ALLOWED = {"__main__.py"}
# The layer order, top first (docs/layout.md): a subpackage imports (or names) only its own layer's and lower
# layers' subpackages. Within a layer an arrow is allowed where it makes no cycle (advising uses studying's
# machinery); fabricbench/__init__.py, the lazy facade over every layer, is outside the order.
LAYERS = [
    {"__main__", "cli"},
    {"advising", "studying"},
    {"qualifying", "relating"},
    {"training"},
    {"measuring"},
    {"jobs", "topology", "reporting", "importing", "exporting", "references", "cluster"},
    {"results"},
    {"fabrics", "files", "collectives"},
    {"declare", "errors", "exitcodes", "dtypes", "gpus", "hostload", "masking", "outputs", "procs", "progress",
     "registry", "sizes", "tempdirs", "lazy", "statistics"},  # leaf modules
]
LEVEL = {unit: len(LAYERS) - i for i, layer in enumerate(LAYERS) for unit in layer}


def _module(path: Path) -> list[str]:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imported(path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The absolute module names an import statement names (relative ones resolved)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not node.level:
        return [node.module or ""]
    base = _module(path)
    if path.name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - node.level + 1]
    return [".".join(base + ([node.module] if node.module else []))]


def _unit(name: str) -> str | None:
    """The subpackage a dotted module name names ("fabricbench.studying.machine" -> "studying"), if it exists."""
    parts = name.split(".")
    if parts[0] != PKG or len(parts) < 2:
        return None
    return parts[1] if (ROOT / parts[1]).is_dir() or (ROOT / f"{parts[1]}.py").is_file() else None


def _named_in_strings(tree: ast.AST) -> list[tuple[str, int]]:
    """(subpackage, line) of each own module named in a string constant that is not a docstring."""
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            unit = _unit(n.value.strip())
            if unit is not None and re.fullmatch(r"[\w.]+", n.value.strip()):
                out.append((unit, n.lineno))
    return out


def _arrows() -> list[tuple[str, str, str]]:
    """(from, to, 'file:line') for every own import and every own module named in a string, between two
    different subpackages (the root facade fabricbench/__init__.py left out)."""
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        src_unit = rel.parts[0].removesuffix(".py")
        if src_unit == "__init__":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for name in _imported(path, node):
                    names = [name] if name != PKG else [f"{PKG}.{a.name}" for a in node.names]
                    out += [(src_unit, u, f"{rel}:{node.lineno}") for u in map(_unit, names)
                            if u is not None and u != src_unit]
        out += [(src_unit, u, f"{rel}:{line}") for u, line in _named_in_strings(tree) if u != src_unit]
    return out


def _upward(arrows: list[tuple[str, str, str]]) -> list[str]:
    """The arrows that run up the layer order, and the subpackages no layer names."""
    bad = []
    for src, dst, where in arrows:
        missing = [u for u in (src, dst) if u not in LEVEL]
        if missing:
            bad.append(f"{where}: {', '.join(missing)} is in no layer (add it to LAYERS)")
        elif LEVEL[dst] > LEVEL[src]:
            bad.append(f"{where}: {src} -> {dst}")
    return bad


def _scan() -> tuple[dict[str, set[str]], list[str], list[str]]:
    """(subpackage -> the subpackages it imports, 'file:line' of every own import inside a function,
    'file:line' of every import of fabricbench.cli from outside cli/)."""
    edges: dict[str, set[str]] = defaultdict(set)
    local: list[str] = []
    cli_users: list[str] = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        src_unit = rel.parts[0].removesuffix(".py")
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        in_function = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                       for n in ast.walk(f)}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for name in _imported(path, node):
                parts = name.split(".")
                if parts[0] != PKG:
                    continue
                targets = [parts[1]] if len(parts) > 1 else [a.name for a in node.names]  # `from fabricbench import x`
                where = f"{rel}:{node.lineno}"
                if id(node) in in_function:
                    local.append(where)
                for dst in targets:
                    if dst == "cli" and src_unit != "cli" and str(rel) not in CLI_IMPORTERS_ALLOWED:
                        cli_users.append(where)
                    if dst != src_unit and dst != "__init__" and src_unit != "__init__" and (
                            (ROOT / dst).is_dir() or (ROOT / f"{dst}.py").is_file()):
                        edges[src_unit].add(dst)
    return edges, local, cli_users


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one subpackage (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            visit(v)
    return groups


def test_the_scan_sees_the_graph():
    # guards the checks below against passing on an empty scan: the graph has its known layers
    edges, _, _ = _scan()
    assert {"measuring", "fabrics", "results", "cli"} <= set(edges)
    assert "fabrics" in edges["measuring"] and "results" in edges["topology"]
    assert "cli" in edges["__main__"]


def test_no_cycle_between_subpackages():
    edges, _, _ = _scan()
    cycles = _cycles(edges)
    assert not cycles, "subpackages that import each other (directly or around a ring): " + "; ".join(
        " <-> ".join(g) + " [" + ", ".join(f"{a}->{b}" for a in g for b in sorted(edges[a]) if b in g) + "]"
        for g in cycles)


def test_every_arrow_runs_down_the_layer_order():
    arrows = _arrows()
    assert len({(a, b) for a, b, _ in arrows}) > 80  # the scan sees the graph (118 arrows at its writing)
    bad = _upward(arrows)
    assert not bad, "arrows that run up the layer order (LAYERS, top first): " + "; ".join(bad)


def test_every_subpackage_is_in_a_layer():
    units = {p.name.removesuffix(".py") for p in ROOT.iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.name != "__init__.py")}
    assert units == set(LEVEL), (f"in no layer: {sorted(units - set(LEVEL))}; "
                                 f"in LAYERS but gone: {sorted(set(LEVEL) - units)}")


def test_the_layer_check_finds_an_arrow_up(tmp_path, monkeypatch):
    # a fake package: results imports studying inside a function, and jobs names studying's module in a string
    pkg = tmp_path / PKG
    for sub in ("results", "studying", "jobs"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "results" / "kinds.py").write_text('"""fabricbench.studying is named here: a docstring."""\n'
                                              "def f():\n    from fabricbench.studying import units\n")
    (pkg / "jobs" / "configs.py").write_text('PROGRAM = ("fabricbench.studying.machine",)\n'
                                             "from fabricbench.results import kinds\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", pkg)
    assert sorted(_upward(_arrows())) == ["jobs/configs.py:1: jobs -> studying", "results/kinds.py:3: results -> studying"]


def test_the_cycle_check_finds_a_ring():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}}) == []


def test_nothing_outside_cli_imports_cli():
    _, _, cli_users = _scan()
    assert not cli_users, ("the library imports the CLI (move what it needs into the library; the CLI only maps "
                           "flags): " + ", ".join(cli_users))


def test_own_modules_are_imported_at_module_top():
    _, local, _ = _scan()
    assert len(local) <= MAX_LOCAL, (f"{len(local)} imports of fabricbench's own modules inside functions "
                                     f"(at most {MAX_LOCAL}): " + ", ".join(local))


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT.parent), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, *args, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_import_fabricbench_does_not_import_torch():
    r = _python("import sys, fabricbench; print(sorted(m for m in ('torch', 'numpy', 'fabricbench.measuring') "
                "if m in sys.modules))")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_fabricbench_help_does_not_import_torch():
    # -X importtime lists every module imported, whoever imported it (a lazy import shows up too)
    r = _python("import sys; sys.argv = ['fabricbench', '--help']; from fabricbench.cli import main; main()",
                "-X", "importtime")
    assert r.returncode == 0, r.stderr
    assert "sweep" in r.stdout
    imported = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    assert "fabricbench.cli" in imported  # the listing is real
    assert not {m for m in imported if m == "torch" or m.startswith("torch.")}
    from fabricbench.cli import COMMANDS

    commands = {target.partition(":")[0] for target, _ in COMMANDS.values()}
    assert not imported & commands, "--help loaded a command module"
    # the option types, the hint mapping and the closed-pipe sink load with the group (light: click and the
    # standard library)
    light = {"fabricbench.cli.types", "fabricbench.cli.option_type", "fabricbench.cli.path_types",
             "fabricbench.cli.hints", "fabricbench.cli.pipes", "fabricbench.cli.commands"}
    assert {m for m in imported if m.startswith("fabricbench.cli.")} <= light


def test_every_command_loads_without_torch():
    # `fabricbench sweep --help` (and every other command) starts without torch: the command modules and all
    # they import at their top leave torch to the functions that run on ranks
    r = _python("import importlib, json, sys\n"
                "from fabricbench.cli import COMMANDS\n"
                "for target, _ in COMMANDS.values():\n"
                "    importlib.import_module(target.partition(':')[0])\n"
                "print(json.dumps([len(COMMANDS), sorted(m for m in sys.modules if m.split('.')[0] == 'torch')]))")
    assert r.returncode == 0, r.stderr
    count, torch_modules = json.loads(r.stdout)
    assert count >= 10 and torch_modules == []


@pytest.mark.parametrize("bad", ["from fabricbench.cli.train import train", "import fabricbench.cli"])
def test_the_scan_sees_a_cli_import_inside_a_function(tmp_path, monkeypatch, bad):
    # the checks read every import, also one moved into a function: a fake package proves it
    pkg = tmp_path / PKG
    (pkg / "cli").mkdir(parents=True)
    (pkg / "studying").mkdir()
    for p in (pkg / "__init__.py", pkg / "cli" / "__init__.py", pkg / "studying" / "__init__.py"):
        p.write_text("")
    (pkg / "cli" / "train.py").write_text("from fabricbench.studying import units\n")
    (pkg / "studying" / "units.py").write_text(f"def f():\n    {bad}\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", pkg)
    edges, local, cli_users = _scan()
    assert cli_users == ["studying/units.py:2"] and local == ["studying/units.py:2"]
    assert _cycles(edges) == [["cli", "studying"]]


def test_the_library_calls_stay_functions_once_their_packages_are_imported():
    # the packages are studying/ and advising/: importing them cannot replace fabricbench.study / .advise
    import inspect

    import fabricbench
    import fabricbench.advising.api  # noqa: F401
    import fabricbench.studying.runner  # noqa: F401

    assert inspect.isfunction(fabricbench.study) and inspect.isfunction(fabricbench.advise)


def _module_edges() -> dict[str, set[str]]:
    """Module -> the fabricbench modules it imports: every import, at the top, inside a function or under
    TYPE_CHECKING alike (a type-only arrow is still a circle a reader has to untie). `from pkg import mod`
    points at mod; `from pkg import name` at pkg. The facade, fabricbench/__init__.py, is left out: it names
    every public name (lazily at run time, under TYPE_CHECKING for type checkers) and imports nothing else, so
    a module that calls `fabricbench.relate(...)` makes no circle a reader has to untie."""
    files = {".".join(_module(p)): p for p in ROOT.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        if mod == PKG:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for base in _imported(path, node):
                subs = [f"{base}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) else []
                for name in [s for s in subs if s in files] + ([base] if not subs or any(s not in files for s in subs)
                                                                else []):
                    while name and name not in files:
                        name = name.rpartition(".")[0]
                    if name and name != mod:
                        edges[mod].add(name)
    return edges


def test_no_circle_between_modules():
    edges = _module_edges()
    assert {"fabricbench.measuring.devices", "fabricbench.results.schema"} <= edges["fabricbench.measuring.api"] | \
        edges["fabricbench.measuring.devices"] | {"fabricbench.results.schema"}  # the scan sees the modules
    assert "fabricbench.qualifying.units" in edges["fabricbench.qualifying.checks.common"]
    cycles = _cycles(edges)
    assert not cycles, "modules that import each other (directly or around a ring, type-only imports " \
        "included): " + "; ".join(" <-> ".join(g) for g in cycles)
