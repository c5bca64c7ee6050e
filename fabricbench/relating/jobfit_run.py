"""`fabricbench.jobfit`: a production job's collectives (NCCL Inspector) against a sweep of the same GPUs.

    fabricbench jobfit --job nccl-inspector-42/ --sweep sweep.jsonl --json
    r = fabricbench.jobfit(fabricbench.JobfitConfig(job=("nccl-inspector-42/",), sweep="sweep.jsonl"))
    r.rows, r.findings

The comparison is jobfit.py's, the reading jobfit_io.py's; this module is the command's one config and
result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fabricbench.declare import check, declare
from fabricbench.errors import UsageError, expect_config
from fabricbench.relating import jobfit_io
from fabricbench.relating.jobfit import JobFit, Row, fit


@dataclass(frozen=True, kw_only=True)
class JobfitConfig:
    """The job's records and the sweep to compare them with; checked once, here, for the CLI and the library."""

    # Inspector outputs: files, folders of them, or records already imported (one path is read as a tuple of it)
    job: str | tuple[str, ...] = field(metadata=declare(
        "--job", "input file or folder", "NCCL Inspector output: files (.log, .jsonl, .gz, .prom), a folder of "
        "them, or imported records."))
    sweep: str = field(metadata=declare(  # a results file, or a study folder (its results.jsonl)
        "--sweep", "input file or folder", "A sweep's results file, or a study folder."))
    fabric: str | None = field(default=None, metadata=declare(  # a label in the sweep's records, never applied
        "--fabric", "text", "The sweep's fabric to compare with, when it holds several."))

    def __post_init__(self) -> None:
        job = (self.job,) if isinstance(self.job, str) else self.job
        object.__setattr__(self, "job", tuple(str(j) for j in job))
        object.__setattr__(self, "sweep", str(self.sweep))
        if not self.job:
            raise UsageError("--job: name at least one NCCL Inspector output (a file or a folder)")
        check(self)


@dataclass(frozen=True, kw_only=True)
class JobfitResult:
    fit: JobFit  # the rows, findings and problems
    job: list[dict[str, Any]]  # the job's observed collective records, as read
    warnings: list[str]  # what reading the job and the sweep met (skipped files, lines)

    @property
    def rows(self) -> list[Row]:
        return self.fit.rows

    @property
    def findings(self) -> list[str]:
        return self.fit.findings

    @property
    def problems(self) -> list[str]:
        return self.fit.problems

    def to_dict(self) -> dict[str, Any]:
        """What `fabricbench jobfit --json` prints."""
        return self.fit.to_dict()


def jobfit(config: JobfitConfig) -> JobfitResult:
    """Each collective and size the job ran: its busbw beside the sweep's at that size, and the ratio."""
    expect_config(config, JobfitConfig, "jobfit")
    records, warnings = jobfit_io.load_job(list(config.job))
    swept, sweep_warnings = jobfit_io.load_sweep(config.sweep)
    return JobfitResult(fit=fit(records, swept, fabric=config.fabric), job=records,
                        warnings=warnings + sweep_warnings)
