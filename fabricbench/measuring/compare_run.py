"""The library behind `compare`: the same sweep on each fabric, each in a fresh process, busbw side by side.

    import fabricbench
    cfg = fabricbench.CompareConfig(fabrics="default,p2p-off",
                                    sweep=fabricbench.SweepConfig(gpus="0,1", ops="all_reduce", sizes="1M-64M:x4"))
    res = fabricbench.compare(cfg, out="cmp.jsonl")
    res.table["rows"], res.runs[1].transport                    # the comparison, what NCCL really used

Each child sweep runs as a job (fabricbench/jobs, through measuring/child.py): under its fabric, records
written to `out` as they come, the rest kept when one fails. What compare shares with scaling is in
measuring/child_sweeps.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from fabricbench import hostload
from fabricbench.declare import check, declare
from fabricbench.errors import UsageError, expect_config
from fabricbench.fabrics import parse_fabric_list
from fabricbench.measuring.child_sweeps import (already_done, as_text, check_plot_path, child, decided, open_output,
                                           planned, progress_bar, resume_records, run_and_keep)
from fabricbench.measuring.config import SweepConfig
from fabricbench.measuring.runner import new_run_id
from fabricbench.progress import Progress
from fabricbench.reporting.analysis import METRIC_LABEL, comparison, comparison_series
from fabricbench.reporting.plot import bandwidth_vs_size
from fabricbench.sizes import format_size


# What each fabric's sweep measures when the caller names no sweep: `fabricbench sweep`'s defaults but one
# collective over 1M-1G:x4 (a comparison per fabric, not a survey); `fabricbench compare` offers these.
OPS = ("all_reduce",)
SIZES = "1M-1G:x4"


def default_sweep() -> SweepConfig:
    return SweepConfig(ops=OPS, sizes=SIZES)


@dataclass(frozen=True, kw_only=True)
class CompareConfig:
    """The fabrics to compare and the sweep each one runs (a template: its GPUs, ops, sizes, engine, ...;
    its fabric is each of `fabrics` in turn); checked once, here, for the CLI and the library."""

    # names, shaped:RATE or name:VAR=VAL, as one comma text (a custom fabric's own values hold commas)
    fabrics: str = field(default="default,p2p-off", metadata=declare(
        "--fabrics", "fabric list", "Comma list: built-in names (see `fabricbench fabrics`), shaped:RATE (an "
        "emulated link, e.g. shaped:1gbit) or name:VAR=VAL[,VAR=VAL]."))
    sweep: SweepConfig = field(default_factory=default_sweep)

    def __post_init__(self) -> None:
        if not isinstance(self.fabrics, str):
            object.__setattr__(self, "fabrics", as_text(self.fabrics))
        check(self)
        parse_fabric_list(self.fabrics)  # each fabric known or well formed before anything runs
        if not isinstance(self.sweep, SweepConfig):
            raise UsageError(f"CompareConfig.sweep is a SweepConfig, not {type(self.sweep).__name__}")
        if self.sweep.fabric != "default":
            raise UsageError(f"CompareConfig: sweep.fabric {self.sweep.fabric!r} would be replaced by each of "
                             f"fabrics; name it in fabrics instead")
        if self.sweep.gap_s:
            raise UsageError("CompareConfig: a gapped sweep (gap_s) measures relate's link credit, never a "
                             "comparison's prices; leave gap_s at 0")


@dataclass(kw_only=True)
class CompareResult:
    run_id: str
    runs: list[Any]  # measuring/child.ChildRun, one per fabric, in the order named
    table: dict[str, Any]  # report.analysis.comparison: rows, metric, note, fabrics

    @property
    def failed(self) -> bool:
        return any(r.error for r in self.runs)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "fabrics": [r.fabric.to_dict() for r in self.runs],
                "transport": {r.fabric.name: r.transport for r in self.runs},
                "failures": {r.fabric.name: r.error for r in self.runs if r.error},
                "mismatches": {r.fabric.name: r.mismatch for r in self.runs if r.mismatch},
                "waived": {r.fabric.name: r.waived for r in self.runs if r.waived},
                "busy_host": {r.fabric.name: n for r in self.runs if (n := hostload.records_note(r.records))},
                "comparison": self.table["rows"], "metric": self.table["metric"], "note": self.table["note"],
                "records": [rec for r in self.runs for rec in r.records]}


def compare(config: CompareConfig, *, out: str | None = None, resume: bool = False,
            progress: Progress | bool | None = False, plot: str | None = None,
            beside: Sequence[Any] = ()) -> CompareResult:
    """config.sweep on each of config.fabrics, each in a fresh process; busbw side by side
    (CompareResult.table).

    `out`: the combined JSONL, written as the children measure; `resume`: fabrics whose every measurement
    `out` holds are not run; `plot`: a PNG written after the run; `beside`: runs that measured nothing shown
    as more columns (imported results, measuring/compare.runs_beside)."""
    expect_config(config, CompareConfig, "compare")
    fabs = parse_fabric_list(config.fabrics)
    check_plot_path(plot)
    sweep = decided(config.sweep)
    job = child(sweep, sweep.gpus)
    prior = resume_records(out, resume)  # read before this run appends to the file
    run_id = new_run_id()
    writer = open_output(out, run_id, fabs[0].name)
    runs = []
    per_fabric = planned(sweep)
    try:
        with progress_bar("compare", per_fabric * len(fabs), progress) as bar:
            for fab in fabs:
                if bar.mode != "off":
                    bar.say(f"fabric {fab.name}: {fab.described(sweep.backend)}")
                done = already_done(prior, job, fab, out=out, say=bar.say)
                if done is not None:
                    runs.append(done)
                    bar.advance(per_fabric, item=f"{fab.name}: already recorded")
                    continue
                bar.update(item=fab.name)
                run = run_and_keep(fab, job, writer, run_id, what=f"fabric {fab.name}",
                                   kept="other fabrics' results", say=bar.say,
                                   on_record=lambda rec, f=fab.name: bar.advance(item=_item(f, rec)))
                bar.advance(per_fabric - len(run.records), item=fab.name)  # waived or failed: the rest
                runs.append(run)
    finally:
        writer.close()
    runs += beside  # after the measured fabrics: the first named stays the base of every ratio
    res = CompareResult(run_id=run_id, runs=runs, table=comparison(runs))
    if plot:
        plot_comparison(res.table, plot)
    return res


def _item(fabric: str, rec: dict[str, Any]) -> str:
    """What a progress bar names after a record: the fabric, op and size just measured."""
    return f"{fabric} {rec.get('op')} {format_size(rec.get('bytes') or rec.get('requested_bytes') or 0)}"


def plot_comparison(table: dict[str, Any], path: str) -> None:
    label = METRIC_LABEL[table["metric"]]
    bandwidth_vs_size(comparison_series(table), path, metric=label,
                      title=f"{label} against message size, per fabric"
                            + (f"\n({table['note']})" if table["note"] else ""))
