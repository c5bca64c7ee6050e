"""What `import fabricbench` offers a library user: every call's config, result and error by name, typed
(py.typed), and still light to import (the names load on first use, none of them brings torch).

    python3 -m pytest -q -p no:xdist tests/house/test_public_api.py
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys

import fabricbench
from roots import ROOT

CONFIGS = {"SweepConfig", "CompareConfig", "ScalingConfig", "P2PConfig", "TrainConfig", "StudyConfig", "ExecConfig",
           "ExportConfig", "EstimateConfig",
           "TopoConfig", "JobfitConfig", "ReportConfig", "AdviseConfig", "ImportConfig",
           "RelateConfig"}
RESULTS = {"CollectiveResult", "SweepResult", "CompareResult", "ScalingResult", "P2PResult", "CopyResult",
           "RelateResult",
           "StudyResult", "StudyPlan", "TrainRunResult", "TrainResult", "Advice", "StrategyAdvice", "QualifyResult", "DryRun", "ExecResult",
           "ExportResult", "EstimateResult", "TopoResult", "JobfitResult", "ReportResult", "ImportResult"}
THIRD_PARTY = ("pandas.",)  # a type of an optional dependency, named by its module
ERRORS = {"FabricbenchError", "UsageError", "EngineUnavailable", "FabricWaived", "CudaError", "NcclError",
          "CollectiveTimeout", "CheckFailed"}


def _calls() -> dict[str, object]:
    return {n: getattr(fabricbench, n) for n in fabricbench.__all__ if inspect.isfunction(getattr(fabricbench, n, None))}


def test_configs_results_and_errors_are_exported_under_their_own_names():
    for name in CONFIGS | RESULTS | ERRORS:
        assert name in fabricbench.__all__, name
        obj = getattr(fabricbench, name)
        assert inspect.isclass(obj) and obj.__name__ == name, (name, obj)
    assert all(issubclass(getattr(fabricbench, e), fabricbench.FabricbenchError) for e in ERRORS)


def test_every_class_a_call_returns_is_exported():
    # a call's return annotation names its result type; a caller annotating with it needs it by name
    missing = {}
    for name, call in _calls().items():
        shown = str(inspect.signature(call).return_annotation)
        assert shown != str(inspect.Signature.empty), f"fabricbench.{name} has no return annotation"
        named = {w.rpartition(".")[2] for w in re.findall(r"[\w.]+", shown) if not w.startswith(THIRD_PARTY)}
        classes = {w for w in named if w[:1].isupper() and w not in ("Any", "Iterator")}
        if classes - set(fabricbench.__all__):
            missing[name] = sorted(classes - set(fabricbench.__all__))
    assert not missing, f"export these in fabricbench/__init__.py's _LAZY: {missing}"


def test_the_package_is_typed():
    assert (ROOT / "fabricbench" / "py.typed").is_file()  # PEP 561: type checkers read the package's hints


def test_resolving_every_name_imports_no_torch():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    code = ("import sys, json, fabricbench\n"
            "light = sorted(m for m in sys.modules if m.startswith('fabricbench.'))\n"
            "[getattr(fabricbench, n) for n in fabricbench.__all__]\n"
            "print(json.dumps([light, sorted(m for m in sys.modules if m.split('.')[0] == 'torch')]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    light, torch_modules = json.loads(r.stdout)
    # `import fabricbench` loads none of its modules but the helper that serves the names (standard library only)
    assert light == ["fabricbench.lazy"] and torch_modules == []


def test_every_call_refuses_a_config_of_another_kind_in_one_line():
    """An untyped caller's wrong object (another call's config, a dict) is one UsageError that names the
    config the call takes, before anything runs: never an AttributeError from deep inside."""
    import pytest

    calls = {n: f for n, f in _calls().items() if "config" in inspect.signature(f).parameters}
    assert {"sweep", "train", "study", "relate", "qualify", "import_results", "advise", "topo"} <= set(calls)
    for name, call in sorted(calls.items()):
        wanted = str(inspect.signature(call).parameters["config"].annotation).replace(" | None", "")
        for wrong in ({"ops": "all_reduce"}, fabricbench.SweepConfig() if wanted != "SweepConfig" else fabricbench.TopoConfig()):
            args = ("all_reduce", "1M", wrong) if name == "measure" else (wrong,)
            with pytest.raises(fabricbench.UsageError) as got:
                call(*args)
            line = str(got.value)
            assert "\n" not in line and line.startswith(f"{name} takes a {wanted}, not {type(wrong).__name__}"), line
