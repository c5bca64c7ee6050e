"""`fabricbench.report`: a study's report rebuilt from its results.jsonl, measuring nothing.

    fabricbench report run/ --json
    r = fabricbench.report(fabricbench.ReportConfig(folder="run/"))
    r.markdown, r.summary["comparisons"]

The document and the summary are studying/report/'s; this module is the command's one config and result.
Where the report goes is checked before anything is read or drawn.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricbench.errors import FabricbenchError, UsageError, expect_config
from fabricbench.files import check_writable
from fabricbench.studying import records
from fabricbench.studying.report import answer_lines, summary, write_report

REPORT_FILES = ("report.md", "report.html")  # what a written report replaces in the folder


@dataclass(frozen=True, kw_only=True)
class ReportConfig:
    """Which study folder, and whether its report is written; checked once, here."""

    folder: str  # a study's folder: its results.jsonl is read, its report.md and report.html written
    write: bool = True  # False: the summary only, nothing written (what `report --json` prints)

    def __post_init__(self) -> None:
        object.__setattr__(self, "folder", str(self.folder))
        if not isinstance(self.write, bool):
            raise UsageError(f"ReportConfig.write {self.write!r}: True or False")


@dataclass(frozen=True, kw_only=True)
class ReportResult:
    folder: str
    warnings: list[str]  # lines of results.jsonl that could not be read
    # comparisons with verdicts, rankings, slowdowns, figures...; None where the records answer nothing
    # (a written report still is: `answer` says why)
    summary: dict[str, Any] | None
    markdown: Path | None = None  # report.md and report.html, when written
    html: Path | None = None
    answer: list[str] | None = None  # the verdict lines the command ends with, when written

    def to_dict(self) -> dict[str, Any]:
        """What `fabricbench report DIR --json` prints."""
        if self.summary is None:
            raise UsageError(f"{self.folder}: no summary; {(self.answer or ['nothing to answer from'])[0]}")
        return self.summary


def _check_outputs(folder: str) -> None:
    for name in REPORT_FILES:
        path = os.path.join(folder, name)
        if os.path.lexists(path) and not os.path.isfile(path):
            raise UsageError(f"{path} is not a file, and the report is rebuilt as that file; move it aside")
    check_writable(folder, what="the report folder", folder=True)


def report(config: ReportConfig) -> ReportResult:
    """Rebuild config.folder's report.md and report.html (or only its summary, when not config.write)."""
    expect_config(config, ReportConfig, "report")
    if config.write:
        _check_outputs(config.folder)
    sr = records.load(config.folder)  # a folder without results is a one-line error
    if not config.write:
        return ReportResult(folder=config.folder, warnings=sr.warnings, summary=summary(config.folder))
    md, html = write_report(config.folder)
    try:
        summ = summary(config.folder)
    except FabricbenchError:  # the report is written all the same; the answer lines say why there is none
        summ = None
    return ReportResult(folder=config.folder, warnings=sr.warnings, summary=summ, markdown=md, html=html,
                        answer=answer_lines(config.folder, summ=summ))
