"""fabricbench: measure NCCL collectives over any GPU set and fabric, and what they do to training.

    import fabricbench
    r = fabricbench.measure("all_reduce", "1G", gpus=[0, 1])        # one CollectiveResult
    rs = fabricbench.sweep(ops=["all_gather"], sizes="1M-1G:x4")     # a list of them
    fabricbench.compare("default,p2p-off", options=fabricbench.sweep_options(sizes="1M-64M:x4"))  # side by side
    fabricbench.train(fabricbench.TrainConfig(strategies="ddp,fsdp", model="tiny-mistral", device="cpu"))
    fabricbench.to_dataframe(rs)                                      # pandas, if installed

Every command has its library call here (the CLI only maps flags to them): measure, sweep, compare,
scaling, p2p, train, relate (relate_trace: relate --trace), study (study_plan: study --dry-run), advise,
qualify (qualify_plan: qualify --dry-run), execute (exec), export, estimate, topo, jobfit, report,
import_results (import). Their configs (SweepConfig, TrainConfig, StudyConfig,
ExecConfig, ExportConfig, ...), results (CollectiveResult, CompareResult, ...)
and errors (FabricbenchError and its kinds) are here too, for annotations and `except`; the package is
typed (py.typed). Importing needs no GPU and no torch: everything heavy loads on first use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "measure": "fabricbench.measuring.api",
    "sweep": "fabricbench.measuring.api",
    "to_dataframe": "fabricbench.measuring.api",
    "SweepConfig": "fabricbench.measuring.config",
    "SizeSweep": "fabricbench.sizes",
    "CollectiveResult": "fabricbench.results.schema",
    "COLLECTIVES": "fabricbench.collectives",
    "ENGINES": "fabricbench.measuring.engines",
    "read_results": "fabricbench.results.writer",
    "relate": "fabricbench.relating.api",
    "relate_trace": "fabricbench.relating.usertrace",
    "study": "fabricbench.studying.api",
    "study_plan": "fabricbench.studying.api",
    "advise": "fabricbench.advising.api",
    "AdviseConfig": "fabricbench.advising.config",
    "qualify": "fabricbench.qualifying.api",
    "qualify_plan": "fabricbench.qualifying.api",
    "import_results": "fabricbench.importing",
    "compare": "fabricbench.measuring.compare_run",
    "scaling": "fabricbench.measuring.scaling_run",
    "p2p": "fabricbench.measuring.p2p_run",
    "sweep_options": "fabricbench.measuring.compare",
    "train": "fabricbench.training.api",
    "TrainConfig": "fabricbench.training.config",
    "TrainRunResult": "fabricbench.training.result",
    "TrainResult": "fabricbench.results.schema",
    "StudyConfig": "fabricbench.studying.config",
    "execute": "fabricbench.jobs.command",
    "ExecConfig": "fabricbench.jobs.command",
    **{name: "fabricbench.exporting.api" for name in ("export", "ExportConfig", "ExportResult")},
    **{name: "fabricbench.training.estimate_run" for name in ("estimate", "EstimateConfig", "EstimateResult")},
    **{name: "fabricbench.measuring.topo_run" for name in ("topo", "TopoConfig", "TopoResult")},
    **{name: "fabricbench.relating.jobfit_run" for name in ("jobfit", "JobfitConfig", "JobfitResult")},
    **{name: "fabricbench.studying.report_run" for name in ("report", "ReportConfig", "ReportResult")},
    # what the calls take and give, for a caller's annotations and isinstance checks
    "SweepOptions": "fabricbench.measuring.compare",
    "CompareResult": "fabricbench.measuring.compare_run",
    "ScalingResult": "fabricbench.measuring.scaling_run",
    "P2PResult": "fabricbench.measuring.p2p_run",
    "CopyResult": "fabricbench.measuring.copy",
    "RelateResult": "fabricbench.relating.api",
    "StudyResult": "fabricbench.studying.api",
    "StudyPlan": "fabricbench.studying.api",
    "Advice": "fabricbench.advising.api",
    "StrategyAdvice": "fabricbench.advising.api",
    "QualifyResult": "fabricbench.qualifying.result",
    "DryRun": "fabricbench.qualifying.dryrun",
    "ExecResult": "fabricbench.jobs.command",
    # what the calls raise: catch FabricbenchError for any of them, UsageError for what the caller got wrong
    **{name: "fabricbench.errors" for name in ("FabricbenchError", "UsageError", "EngineUnavailable", "FabricWaived",
                                               "CudaError", "NcclError", "CollectiveTimeout", "CheckFailed")},
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fabricbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
