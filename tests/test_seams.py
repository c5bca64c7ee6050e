"""The seams between cli/ and the library are typed: no library function the CLI imports takes
**kwargs, except the few listed with why. A command hands the library its config object (TrainConfig,
StudyConfig, SweepConfig, SweepOptions, SimaiOptions), never a bag of keywords.

    python3 -m pytest -q tests/test_seams.py
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

CLI = Path(__file__).resolve().parent.parent / "fabricbench" / "cli"
ALLOWED = {  # (module, name): why its **kwargs are no seam
    ("fabricbench.files", "dumps"): "json.dumps's own keywords (indent, sort_keys), passed through",
    ("fabricbench.declare", "shared"): "a declaration's words a second command says its own way (help, ...)",
}


def kwargs_seams() -> list[str]:
    found = []
    for f in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fabricbench.")
                    and not node.module.startswith("fabricbench.cli")):
                continue
            module = importlib.import_module(node.module)
            for alias in node.names:
                obj = getattr(module, alias.name, None)
                if not callable(obj) or inspect.isclass(obj) or (node.module, alias.name) in ALLOWED:
                    continue
                try:
                    params = inspect.signature(obj).parameters.values()
                except (TypeError, ValueError):
                    continue
                if any(p.kind is p.VAR_KEYWORD for p in params):
                    found.append(f"cli/{f.name}: {node.module}.{alias.name}")
    return found


def test_no_kwargs_seam_between_the_cli_and_the_library():
    assert kwargs_seams() == []


def test_the_check_sees_one(monkeypatch):
    import fabricbench.training.api as api

    def train(config, **fields):  # the old seam, put back
        return []

    monkeypatch.setattr(api, "train", train)
    assert kwargs_seams() == ["cli/train.py: fabricbench.training.api.train"]
