"""The library behind `compare`: the same sweep on each fabric, each in a fresh process, busbw side by side.

    import fabricbench
    res = fabricbench.compare("default,p2p-off", gpus="0,1", out="cmp.jsonl",
                              options=fabricbench.sweep_options(sizes="1M-64M:x4"))
    res.table["rows"], res.runs[1].transport                    # the comparison, what NCCL really used

Each child sweep runs as a job (fabricbench/jobs, through measuring/child.py): under its fabric, records
written to `out` as they come, the rest kept when one fails. What compare shares with scaling is in
measuring/compare.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from fabricbench import hostload
from fabricbench.fabrics import parse_fabric_list
from fabricbench.gpus import parse_gpus
from fabricbench.measuring.compare import (SweepOptions, already_done, as_text, check_plot_path, open_output,
                                           progress_bar, resume_records, run_and_keep, sweep_options)
from fabricbench.measuring.runner import new_run_id
from fabricbench.progress import Progress
from fabricbench.reporting.analysis import METRIC_LABEL, comparison, comparison_series
from fabricbench.reporting.plot import bandwidth_vs_size
from fabricbench.sizes import format_size


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


def compare(fabrics: str | Sequence[str] = "default,p2p-off", *, gpus: str | Sequence[int] | None = None,
            out: str | None = None, resume: bool = False, progress: Progress | bool | None = False,
            plot: str | None = None, beside: Sequence[Any] = (), options: SweepOptions | None = None) -> CompareResult:
    """The same sweep on each fabric, each in a fresh process; busbw side by side (CompareResult.table).

    `fabrics`: names, shaped:RATE or name:VAR=VAL (a comma text or a list); `options`: the child sweep's
    (measuring/compare.sweep_options: ops, sizes, dtype, iters, warmup, engine, backend, nprocs,
    timeout_s; default `fabricbench sweep`'s); `out`: the combined JSONL,
    written as the children measure; `resume`: fabrics whose every measurement `out` holds are not run;
    `plot`: a PNG written after the run; `beside`: runs that measured nothing shown as more columns
    (imported results, measuring/compare.runs_beside)."""
    fabs = parse_fabric_list(as_text(fabrics))
    gpu_t = parse_gpus(as_text(gpus)) if gpus is not None else None
    opts = options or sweep_options()
    check_plot_path(plot)
    opts.validate(gpu_t)
    prior = resume_records(out, resume)  # read before this run appends to the file
    run_id = new_run_id()
    writer = open_output(out, run_id, fabs[0].name)
    runs = []
    per_fabric = len(opts.planned())
    try:
        with progress_bar("compare", per_fabric * len(fabs), progress) as bar:
            for fab in fabs:
                if bar.mode != "off":
                    bar.say(f"fabric {fab.name}: {fab.described(opts.backend)}")
                done = already_done(prior, opts, fab, gpu_t, out=out, say=bar.say)
                if done is not None:
                    runs.append(done)
                    bar.advance(per_fabric, item=f"{fab.name}: already recorded")
                    continue
                bar.update(item=fab.name)
                run = run_and_keep(fab, opts.job(gpu_t), writer, run_id, what=f"fabric {fab.name}",
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
