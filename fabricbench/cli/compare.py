"""`fabricbench compare`: the same sweep on several fabrics, each in a fresh process, side by side.

    fabricbench compare --fabrics default,p2p-off --gpus 0,1 --ops all_reduce --sizes 1M-1G:x4 --plot cmp.png
    fabricbench compare --fabrics default,lo:GLOO_SOCKET_IFNAME=lo --engine torch --backend gloo --nprocs 2
    fabricbench compare --fabrics default,shaped:1gbit,shaped:200mbit --engine torch --backend gloo --nprocs 2

Per size: how many times slower each fabric is than the first named = busbw on the first / busbw on the
fabric (algbw when n = 1, where the busbw factor is 0). Records: the common schema, with `fabric` and the transport NCCL really used.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from fabricbench.cli.options import sweep_options
from fabricbench.errors import UsageError
from fabricbench.measuring.child import ChildRun
from fabricbench.fabrics.model import Fabric
from fabricbench.importing.beside import collective_groups, records_of
from fabricbench.progress import Progress
from fabricbench.report import table as tables
from fabricbench.report.analysis import comparison, fmt, fmt_ratio
from fabricbench.sizes import format_size


@click.command()
@click.option("--fabrics", "fabric_list", default="default,p2p-off", show_default=True,
              help="Comma list: built-in names (see `fabricbench fabrics`), shaped:RATE (an emulated link, "
                   "e.g. shaped:1gbit) or name:VAR=VAL[,VAR=VAL].")
@click.option("--gpus", default=None, help="GPU list for every fabric: 0,1 or 0-7. Default: all visible.")
@click.option("--ops", default="all_reduce", show_default=True, help="Comma list of collectives.")
@click.option("--sizes", default="1M-1G:x4", show_default=True, help="Sizes: 8-8G, 1M-1G:x2 or 64K,1M (a bare G is GiB, 2^30 B; GB is 10^9 B).")
@click.option("--nprocs", type=int, default=None, help="Local ranks per run (one process each).")
@click.option("--resume", is_flag=True, help="Skip fabrics whose every measurement --out already holds as ok.")
@click.option("--with", "with_paths", multiple=True,
              help="Show these results beside the fabrics (e.g. `fabricbench import`ed nccl-tests); repeatable.")
@sweep_options
def compare(fabric_list, gpus, ops, sizes, nprocs, resume, with_paths, dtype, iters, warmup, engine, backend,
            timeout_s, out_path, plot_path, as_json):
    """Run the same sweep on each fabric and show busbw side by side with the ratio."""
    from fabricbench.fabrics import parse_fabric_list
    from fabricbench.measuring.compare import SweepOptions, check_plot_path, open_output, run_and_keep
    from fabricbench.gpus import parse_gpus
    from fabricbench.measuring.runner import new_run_id

    fabrics = parse_fabric_list(fabric_list)
    gpu_t = parse_gpus(gpus) if gpus is not None else None
    opts = SweepOptions(ops=ops, sizes=sizes, dtype=dtype, iters=iters, warmup=warmup, engine=engine,
                        backend=backend, nprocs=nprocs, timeout_s=timeout_s)
    check_plot_path(plot_path)
    opts.validate(gpu_t)
    beside = runs_beside(with_paths, ops=[o.strip() for o in ops.split(",")], dtype=dtype)  # bad input first
    prior = resume_records(out_path, resume)  # read before this run appends to the file
    run_id = new_run_id()
    writer = open_output(out_path, run_id, fabrics[0].name)
    runs = []
    per_fabric = len(opts.planned())
    try:
        with Progress("compare", total=per_fabric * len(fabrics), quiet=as_json) as bar:
            for fab in fabrics:
                if not as_json:
                    bar.say(f"fabric {fab.name}: {fab.description or fab.name}")
                done = already_done(prior, opts, fab, gpu_t, out_path=out_path)
                if done is not None:
                    runs.append(done)
                    bar.advance(per_fabric, item=f"{fab.name}: already recorded")
                    continue
                bar.update(item=fab.name)
                run = run_and_keep(fab, opts.args(gpu_t), writer, run_id, what=f"fabric {fab.name}",
                                   kept="other fabrics' results", say=bar.say,
                                   on_record=lambda rec, f=fab.name: bar.advance(item=_item(f, rec)))
                bar.advance(per_fabric - len(run.records), item=fab.name)  # waived or failed: the rest
                runs.append(run)
    finally:
        writer.close()
    runs += beside  # after the measured fabrics: the first named stays the base of every ratio
    table = comparison(runs)
    if as_json:
        click.echo(json.dumps({
            "run_id": run_id, "fabrics": [r.fabric.to_dict() for r in runs],
            "transport": {r.fabric.name: r.transport for r in runs},
            "failures": {r.fabric.name: r.error for r in runs if r.error},
            "mismatches": {r.fabric.name: r.mismatch for r in runs if r.mismatch},
            "waived": {r.fabric.name: r.waived for r in runs if r.waived},
            "comparison": table["rows"], "metric": table["metric"], "note": table["note"],
            "records": [rec for r in runs for rec in r.records]}, indent=2))
    else:
        render(table, runs)
    if plot_path:  # after the table: a plot that fails to write costs no printed result
        plot(table, runs, plot_path)
    if any(r.error for r in runs):
        sys.exit(1)


def _item(fabric: str, rec: dict[str, Any]) -> str:
    """What a progress bar names after a record: the fabric, op and size just measured."""
    return f"{fabric} {rec.get('op')} {format_size(rec.get('bytes') or rec.get('requested_bytes') or 0)}"


def runs_beside(paths, *, ops: list[str], dtype: str) -> list[Any]:
    """--with FILE: one column per fabric label of the file's collective records (imported ones read as
    "<fabric> (<tool>)"), as runs that measured nothing."""
    runs = []
    for path in paths:
        # compare measures out of place: the imported in-place rows would stand alone
        recs = [r for r in records_of(path) if not r.get("inplace")]
        groups = collective_groups(recs, ops=ops, dtype=dtype)
        if not groups:
            raise UsageError(f"--with {path}: no {'/'.join(ops)} {dtype} record in it to show beside the fabrics")
        for name, recs in groups.items():
            if any(r.fabric.name == name for r in runs):  # two files of one label stay two columns
                name = f"{name} [{os.path.basename(path)}]"
            runs.append(ChildRun(fabric=Fabric(name=name, description=f"from {path}", builtin=False), records=recs,
                                 transport=next((r.get("transport") for r in recs if r.get("transport")), None)))
    return runs


def resume_records(out_path: str | None, resume: bool) -> list[dict[str, Any]] | None:
    """--resume: the reusable records of the combined --out (shared with `scaling`)."""
    if not resume:
        return None
    if not out_path:
        from fabricbench.errors import UsageError

        raise UsageError("--resume skips what --out already holds; give --out FILE (the earlier run's file)")
    from fabricbench.measuring.resume import read_prior

    return read_prior(out_path)


def already_done(prior, opts, fabric, gpus, *, nprocs: int | None = None, where: dict[str, Any] | None = None,
                 out_path: str | None = None):
    """A ChildRun made of the records that already hold every measurement of this child sweep (then it is
    not run again), or None. Partly measured children run whole: the sweep's own --resume is per item."""
    if prior is None:
        return None
    from fabricbench.measuring.child import ChildRun
    from fabricbench.measuring.resume import covering

    fields = dict(ops=opts.ops, sizes=opts.sizes, dtype=opts.dtype, iters=opts.iters, warmup=opts.warmup,
                  engine=opts.engine, backend=opts.backend, nprocs=nprocs if nprocs is not None else opts.nprocs,
                  fabric=fabric.name, gpus=None if opts.cpu_ranks else gpus)
    if opts.timeout_s is not None:
        fields["timeout_s"] = opts.timeout_s
    recs = covering(prior, where=where, **fields)
    if recs is None:
        return None
    click.echo(f"resume: all {len(recs)} measurement(s) already recorded ok in {out_path}; skipped", err=True)
    return ChildRun(fabric=fabric, records=recs, transport=recs[0].get("transport"),
                    mismatch=recs[0].get("transport_mismatch"))


def render(table, runs) -> None:
    from rich.markup import escape

    console = tables.console()
    metric, names = table["metric"], table["fabrics"]
    short = metric.replace("_gbps", "")
    cols = ([tables.Col("size", key=True)] + [tables.Col(n) for n in names]
            + [tables.Col(f"{n} slower", f"{i}:×", f"{i}:× = {n} N× slower than {names[0]}")
               for i, n in enumerate(names[1:], 1)])
    for op in dict.fromkeys(r["op"] for r in table["rows"]):
        rows = []
        for row in (r for r in table["rows"] if r["op"] == op):
            size = format_size(row["bytes"]) + (" (in)" if row["inplace"] else "")
            rows.append([size, *[fmt(row[metric].get(n)) for n in names],
                         *[fmt_ratio(row["slower"].get(n)) for n in names[1:]]])
        tables.render(console, f"{op}: {short} (GB/s) per fabric; N× slower than {names[0]}", cols, rows)
    if table["note"]:
        console.print(table["note"])
    for r in runs:
        line = f"{escape(r.fabric.name)}: transport {escape(str(r.transport))}"
        if r.waived:
            line = f"{escape(r.fabric.name)}: [yellow]WAIVED: {escape(r.waived)}[/yellow]"
        if r.mismatch:
            line += f" [red]MISMATCH: {escape(r.mismatch)}[/red]"
        if r.error:
            line += f" [red]FAILED: {escape(r.error)}[/red]"
        console.print(line)


def plot(table, runs, path: str) -> None:
    from fabricbench.report.analysis import METRIC_LABEL, comparison_series
    from fabricbench.report.plot import bandwidth_vs_size

    label = METRIC_LABEL[table["metric"]]
    bandwidth_vs_size(comparison_series(table), path, metric=label,
                      title=f"{label} against message size, per fabric"
                            + (f"\n({table['note']})" if table["note"] else ""))
