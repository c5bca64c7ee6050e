"""fabricbench: measure NCCL collectives over any GPU set and fabric, and what they do to training.

    import fabricbench
    r = fabricbench.measure("all_reduce", "1G", fabricbench.SweepConfig(gpus=[0, 1]))  # one CollectiveResult
    rs = fabricbench.sweep(fabricbench.SweepConfig(ops=["all_gather"], sizes="1M-1G:x4"))  # rs.records
    fabricbench.compare(fabricbench.CompareConfig(sweep=fabricbench.SweepConfig(sizes="1M-64M:x4")))  # side by side
    fabricbench.train(fabricbench.TrainConfig(strategies="ddp,fsdp", model="tiny-mistral", device="cpu"))
    fabricbench.to_dataframe(rs)                                      # pandas, if installed

Every command has its library call here (the CLI only maps flags to them): measure, sweep, compare,
scaling, p2p, train, relate (relate --trace too), study (study_plan: study --dry-run), advise,
qualify (qualify_plan: qualify --dry-run; fleet: qualify --fleet), execute (exec), export, estimate, topo,
jobfit, report, import_results (import). Their configs (SweepConfig, TrainConfig, StudyConfig,
ExecConfig, ExportConfig, ...), results (CollectiveResult, CompareResult, ...)
and errors (FabricbenchError and its kinds) are here too, for annotations and `except`; the package is
typed (py.typed). Importing needs no GPU and no torch: everything heavy loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"

# Every public name and the module it lives in. Add a name to both: here, and to the TYPE_CHECKING imports
# below (tests/house/test_typed_api.py checks that the two agree, and prints the import line to add).
_LAZY = {
    "measure": "fabricbench.measuring.api",
    "sweep": "fabricbench.measuring.api",
    "to_dataframe": "fabricbench.measuring.api",
    "SweepConfig": "fabricbench.measuring.config",
    "SweepResult": "fabricbench.measuring.sweep_result",
    "SizeSweep": "fabricbench.sizes",
    "CollectiveResult": "fabricbench.results.schema",
    "COLLECTIVES": "fabricbench.collectives",
    "ENGINES": "fabricbench.measuring.engines",
    "read_results": "fabricbench.results.writer",
    "relate": "fabricbench.relating.relate_run",
    "RelateConfig": "fabricbench.relating.relate_run",
    "study": "fabricbench.studying.api",
    "study_plan": "fabricbench.studying.api",
    "stored_study": "fabricbench.studying.api",
    "advise": "fabricbench.advising.api",
    "AdviseConfig": "fabricbench.advising.config",
    "qualify": "fabricbench.qualifying.api",
    "qualify_plan": "fabricbench.qualifying.api",
    "fleet": "fabricbench.qualifying.api",
    "QualifyConfig": "fabricbench.qualifying.config",
    "FleetConfig": "fabricbench.qualifying.config",
    **{name: "fabricbench.importing.api" for name in ("import_results", "ImportConfig", "ImportResult")},
    "compare": "fabricbench.measuring.compare_run",
    "scaling": "fabricbench.measuring.scaling_run",
    "p2p": "fabricbench.measuring.p2p_run",
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
    **{name: "fabricbench.measuring.compare_run" for name in ("CompareConfig", "CompareResult")},
    **{name: "fabricbench.measuring.scaling_run" for name in ("ScalingConfig", "ScalingResult")},
    **{name: "fabricbench.measuring.p2p_run" for name in ("P2PConfig", "P2PResult")},
    "CopyResult": "fabricbench.measuring.copy",
    "RelateResult": "fabricbench.relating.api",
    "StudyResult": "fabricbench.studying.api",
    "StudyPlan": "fabricbench.studying.api",
    "Advice": "fabricbench.advising.api",
    "StrategyAdvice": "fabricbench.advising.api",
    "QualifyResult": "fabricbench.qualifying.result",
    "FleetResult": "fabricbench.qualifying.result",
    "DryRun": "fabricbench.qualifying.dryrun",
    "ExecResult": "fabricbench.jobs.command",
    # what the calls raise: catch FabricbenchError for any of them, UsageError for what the caller got wrong
    **{name: "fabricbench.errors" for name in ("FabricbenchError", "UsageError", "EngineUnavailable", "FabricWaived",
                                               "CudaError", "NcclError", "CollectiveTimeout", "CheckFailed")},
}

__all__ = sorted(_LAZY) + ["__version__"]

# Type checkers read these imports (the real signatures and result types, never Any); at run time they do not
# run, and __getattr__ below loads each name on first use, so that `import fabricbench` stays free of torch.
if TYPE_CHECKING:
    from fabricbench.advising.api import Advice as Advice, StrategyAdvice as StrategyAdvice, advise as advise
    from fabricbench.advising.config import AdviseConfig as AdviseConfig
    from fabricbench.collectives import COLLECTIVES as COLLECTIVES
    from fabricbench.errors import (
        CheckFailed as CheckFailed, CollectiveTimeout as CollectiveTimeout, CudaError as CudaError,
        EngineUnavailable as EngineUnavailable, FabricWaived as FabricWaived, FabricbenchError as FabricbenchError,
        NcclError as NcclError, UsageError as UsageError,
    )
    from fabricbench.exporting.api import ExportConfig as ExportConfig, ExportResult as ExportResult, export as export
    from fabricbench.importing.api import (
        ImportConfig as ImportConfig, ImportResult as ImportResult, import_results as import_results,
    )
    from fabricbench.jobs.command import ExecConfig as ExecConfig, ExecResult as ExecResult, execute as execute
    from fabricbench.measuring.api import measure as measure, sweep as sweep, to_dataframe as to_dataframe
    from fabricbench.measuring.compare_run import (
        CompareConfig as CompareConfig, CompareResult as CompareResult, compare as compare,
    )
    from fabricbench.measuring.config import SweepConfig as SweepConfig
    from fabricbench.measuring.copy import CopyResult as CopyResult
    from fabricbench.measuring.engines import ENGINES as ENGINES
    from fabricbench.measuring.p2p_run import P2PConfig as P2PConfig, P2PResult as P2PResult, p2p as p2p
    from fabricbench.measuring.scaling_run import (
        ScalingConfig as ScalingConfig, ScalingResult as ScalingResult, scaling as scaling,
    )
    from fabricbench.measuring.sweep_result import SweepResult as SweepResult
    from fabricbench.measuring.topo_run import TopoConfig as TopoConfig, TopoResult as TopoResult, topo as topo
    from fabricbench.qualifying.api import fleet as fleet, qualify as qualify, qualify_plan as qualify_plan
    from fabricbench.qualifying.config import FleetConfig as FleetConfig, QualifyConfig as QualifyConfig
    from fabricbench.qualifying.dryrun import DryRun as DryRun
    from fabricbench.qualifying.result import FleetResult as FleetResult, QualifyResult as QualifyResult
    from fabricbench.relating.api import RelateResult as RelateResult
    from fabricbench.relating.jobfit_run import (
        JobfitConfig as JobfitConfig, JobfitResult as JobfitResult, jobfit as jobfit,
    )
    from fabricbench.relating.relate_run import RelateConfig as RelateConfig, relate as relate
    from fabricbench.results.schema import CollectiveResult as CollectiveResult, TrainResult as TrainResult
    from fabricbench.results.writer import read_results as read_results
    from fabricbench.sizes import SizeSweep as SizeSweep
    from fabricbench.studying.api import (
        StudyPlan as StudyPlan, StudyResult as StudyResult, stored_study as stored_study, study as study,
        study_plan as study_plan,
    )
    from fabricbench.studying.config import StudyConfig as StudyConfig
    from fabricbench.studying.report_run import (
        ReportConfig as ReportConfig, ReportResult as ReportResult, report as report,
    )
    from fabricbench.training.api import train as train
    from fabricbench.training.config import TrainConfig as TrainConfig
    from fabricbench.training.estimate_run import (
        EstimateConfig as EstimateConfig, EstimateResult as EstimateResult, estimate as estimate,
    )
    from fabricbench.training.result import TrainRunResult as TrainRunResult


if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt name is an error there and not Any
    from fabricbench import lazy

    __getattr__ = lazy.attributes(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
