"""The seams between cli/ and the library are typed: no library function the CLI imports takes
**kwargs, except the few listed with why. A function counts whether a cli module imports it by name
(`from fabricbench.x import f`) or calls it through a module (`fabricbench.relate(...)`, `files.f(...)`
after `from fabricbench import files`). A command hands the library its config object (TrainConfig,
StudyConfig, SweepConfig, CompareConfig, SimaiOptions), never a bag of keywords.

    python3 -m pytest -q tests/house/test_seams.py
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
from roots import ROOT

CLI = ROOT / "fabricbench" / "cli"
ALLOWED = {  # (module, name): why its **kwargs are no seam
    ("fabricbench.files", "dumps"): "json.dumps's own keywords (indent, sort_keys), passed through",
    ("fabricbench.declare", "shared"): "a declaration's words a second command says its own way (help, ...)",
}


def _library(module: str) -> bool:
    return (module == "fabricbench" or module.startswith("fabricbench.")) and not module.startswith("fabricbench.cli")


def _is_module(dotted: str) -> bool:
    parent = dotted.rpartition(".")[0]  # find_spec looks inside a package only: a module's name is no folder
    if parent and not (_is_module(parent) and hasattr(importlib.import_module(parent), "__path__")):
        return False
    return importlib.util.find_spec(dotted) is not None


def _bound_modules(tree: ast.AST) -> dict[str, str]:
    """Each name a cli file binds to a library module: `import fabricbench`, `import fabricbench.x as y`,
    `from fabricbench import files`, `from fabricbench.importing import answer as a`."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if _library(a.name):
                    names[a.asname or a.name.partition(".")[0]] = a.name if a.asname else a.name.partition(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and _library(node.module):
            for a in node.names:
                if _is_module(f"{node.module}.{a.name}"):
                    names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _used(tree: ast.AST) -> list[tuple[str, str]]:
    """(module, name) of every library function a cli file imports by name or calls as `module.func(...)`."""
    used = [(node.module, a.name) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and _library(node.module) for a in node.names]
    modules = _bound_modules(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        chain, inner = [node.func.attr], node.func.value
        while isinstance(inner, ast.Attribute):
            chain.insert(0, inner.attr)
            inner = inner.value
        if isinstance(inner, ast.Name) and inner.id in modules:
            used.append((".".join([modules[inner.id], *chain[:-1]]), chain[-1]))
    return used


def kwargs_seams() -> list[str]:
    found = set()
    for f in sorted(CLI.glob("*.py")):
        for module_name, name in _used(ast.parse(f.read_text())):
            if not _is_module(module_name) or (module_name, name) in ALLOWED:
                continue  # a method of a class (`module.Class.method(...)`): the class is the seam, checked by name
            obj = getattr(importlib.import_module(module_name), name, None)
            if not callable(obj) or inspect.isclass(obj) or inspect.ismodule(obj):
                continue
            try:
                params = inspect.signature(obj).parameters.values()
            except (TypeError, ValueError):
                continue
            if any(p.kind is p.VAR_KEYWORD for p in params):
                found.add(f"cli/{f.name}: {module_name}.{name}")
    return sorted(found)


def test_no_kwargs_seam_between_the_cli_and_the_library():
    assert kwargs_seams() == []


def test_the_check_sees_one(monkeypatch):
    import fabricbench.training.api as api

    def train(config, **fields):  # the old seam, put back
        return []

    before = set(kwargs_seams())
    monkeypatch.setattr(api, "train", train)
    assert set(kwargs_seams()) - before == {"cli/train.py: fabricbench.training.api.train"}


def test_the_check_follows_a_call_through_a_module(monkeypatch):
    import fabricbench
    import fabricbench.files as files

    def relate(records_or_paths, **options):  # cli/relate.py calls fabricbench.relate(...)
        return None

    def set_max_input_bytes(**limits):  # cli/__init__.py calls files.set_max_input_bytes(...)
        return None

    before = set(kwargs_seams())
    monkeypatch.setattr(fabricbench, "relate", relate, raising=False)
    monkeypatch.setattr(files, "set_max_input_bytes", set_max_input_bytes)
    assert set(kwargs_seams()) - before == {"cli/__init__.py: fabricbench.files.set_max_input_bytes",
                                            "cli/relate.py: fabricbench.relate"}
