"""`fabricbench scaling`: busbw against GPU count, with GPU sets chosen from the topology.

    fabricbench scaling --gpus 0-7 --counts 2,4,8 --ops all_reduce --sizes 1G --plot scaling.png
    fabricbench scaling --topo-file box.txt --engine torch --backend gloo --counts 2,4   (CPU ranks)

For each count: a set inside one NVLink island where one is large enough, and a set across islands
where there are several (labels "intra-island" / "cross-island"; "uniform" on NVSwitch); see
fabricbench/topology/placement.py. Each set runs in its own `fabricbench sweep` process.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from fabricbench.cli.options import sweep_options
from fabricbench.progress import Progress
from fabricbench.errors import UsageError
from fabricbench.report import table as tables
from fabricbench.report.analysis import fmt, scaling_rows
from fabricbench.sizes import format_size


def read_counts(text: str) -> list[int]:
    """--counts as written: whole numbers of at least 2, each once (no machine needed to check this)."""
    counts = []
    for item in text.split(","):
        item = item.strip()
        if item.startswith("-") and item[1:].isdigit():
            raise UsageError(f"--counts {text}: {item} is negative; GPU counts start at 2, e.g. 2,4,8")
        if not item.isdigit():
            raise UsageError(f"--counts {text}: {item!r} is not a whole number; write e.g. 2,4,8")
        counts.append(int(item))
    bad = [c for c in counts if c < 2]
    if bad:
        raise UsageError(f"--counts {text}: {bad[0]} GPU(s) has no bus bandwidth (factor 0); start at 2")
    if len(set(counts)) != len(counts):
        raise UsageError(f"--counts {text} names a count twice")
    return sorted(counts)


def parse_counts(text: str | None, n: int, gpus_text: str) -> list[int]:
    if text is None:
        counts = sorted({c for c in (2, 4, 8, 16, 32, 64) if c <= n} | ({n} if n >= 2 else set()))
        if not counts:
            raise UsageError(f"--gpus {gpus_text} names {n} GPU; scaling needs at least 2")
        return counts
    counts = read_counts(text)
    big = [c for c in counts if c > n]
    if big:
        raise UsageError(f"--counts {text}: {max(big)} is more than the {n} GPUs of --gpus {gpus_text}")
    return counts


def _cpu_ranks_limit(n: int, what: str) -> None:
    """CPU ranks are processes on this host: bounded by its cores as `sweep --nprocs` is."""
    from fabricbench.measuring.config import PROCS_PER_CORE, cores

    if n > PROCS_PER_CORE * cores():
        raise UsageError(f"{what}: {n} CPU ranks are more than {PROCS_PER_CORE} per core "
                         f"({PROCS_PER_CORE} x {cores()} cores = {PROCS_PER_CORE * cores()}); lower it")


@click.command()
@click.option("--gpus", default=None, help="GPUs to draw the sets from (CUDA ordinals). Default: all.")
@click.option("--counts", default=None, help="GPU counts: 2,4,8. Default: powers of 2 up to all GPUs.")
@click.option("--ops", default="all_reduce", show_default=True, help="Comma list of collectives.")
@click.option("--sizes", default="1G", show_default=True, help="Sizes: 1G, 64M-1G:x4 or 64K,1M (a bare G is GiB, 2^30 B; GB is 10^9 B).")
@click.option("--fabric", "fabric_spec", default="default", show_default=True, help="Fabric for every set (see `fabricbench fabrics`; shaped:RATE too).")
@click.option("--topo-file", default=None, help="Choose sets from a saved `nvidia-smi topo -m` output.")
@click.option("--resume", is_flag=True, help="Skip GPU sets whose every measurement --out already holds as ok.")
@sweep_options
def scaling(gpus, counts, ops, sizes, fabric_spec, topo_file, resume, dtype, iters, warmup, engine, backend,
            timeout_s, out_path, plot_path, as_json):
    """Bus bandwidth against GPU count, inside one NVLink island and across islands."""
    from fabricbench.fabrics import get_fabric
    from fabricbench.measuring.compare import SweepOptions, check_plot_path, open_output, run_and_keep
    from fabricbench.gpus import parse_gpus
    from fabricbench.measuring.runner import new_run_id
    from fabricbench.topology import cuda_to_nvml, read_topology
    from fabricbench.topology.placement import scaling_sets

    fabric = get_fabric(fabric_spec)
    opts = SweepOptions(ops=ops, sizes=sizes, dtype=dtype, iters=iters, warmup=warmup, engine=engine,
                        backend=backend, nprocs=None, timeout_s=timeout_s)
    check_plot_path(plot_path)  # outputs first: nothing is read or measured for a plot that cannot be written
    if counts is not None:
        read_counts(counts)
    topo = read_topology(topo_file)
    if topo is None:
        if not opts.cpu_ranks:
            raise UsageError("no GPU topology here (NVML and nvidia-smi did not answer): pass --topo-file "
                             "with a saved `nvidia-smi topo -m`, or run CPU ranks (--engine torch --backend gloo)")
        from fabricbench.topology.model import Gpu, Topology

        n = len(parse_gpus(gpus)) if gpus else max(read_counts(counts or "2"))
        _cpu_ranks_limit(n, f"--counts {counts}" if not gpus else f"--gpus {gpus}")
        topo = Topology(gpus=tuple(Gpu(index=i) for i in range(n)),  # CPU ranks: all alike
                        links=tuple(tuple("X" if i == j else "SYS" for j in range(n)) for i in range(n)),
                        source="cpu ranks (no GPU topology)")
    ordinals = parse_gpus(gpus) if gpus is not None else tuple(range(len(topo.gpus)))
    # CUDA ordinals -> topology indices (CUDA_VISIBLE_DEVICES may reorder); a saved file is taken as is.
    to_topo = dict(zip(ordinals, ordinals if topo_file or topo.source.startswith("cpu") else
                       cuda_to_nvml(ordinals, topo)))
    from_topo = {v: k for k, v in to_topo.items()}
    count_list = parse_counts(counts, len(ordinals), gpus or _ranges(ordinals))
    opts.validate(None if opts.cpu_ranks else ordinals)
    placements = scaling_sets(topo, count_list, tuple(to_topo[g] for g in ordinals))
    from fabricbench.cli.compare import already_done, resume_records

    prior = resume_records(out_path, resume)  # read before this run appends to the file
    run_id = new_run_id()
    writer = open_output(out_path, run_id, fabric.name, topo=topo if topo_file else None)
    results: list[tuple[Any, Any]] = []
    per_set = len(opts.planned())
    try:
        with Progress("scaling", total=per_set * len(placements), quiet=as_json) as bar:
            for p in placements:
                cuda_set = tuple(from_topo[g] for g in p.gpus)
                # CPU ranks are processes on one host: no GPUs, islands or hops to name
                what = (f"{p.count} CPU ranks ({opts.backend})" if opts.cpu_ranks else
                        f"{p.count} GPUs {p.label} {list(cuda_set)} (slowest hop {p.worst_link})")
                if not as_json:
                    bar.say(what)
                extra = {"placement": p.label, "placement_gpus": list(cuda_set), "topology_gpus": list(p.gpus),
                         "slowest_link": p.worst_link, "count": p.count}
                args = opts.args(cuda_set, nprocs=p.count if opts.cpu_ranks else None)
                done = already_done(prior, opts, fabric, cuda_set, nprocs=p.count if opts.cpu_ranks else None,
                                    where={"placement": p.label, "placement_gpus": list(cuda_set)},
                                    out_path=out_path)
                if done is not None:
                    results.append((p, done))
                    bar.advance(per_set, item=f"{what}: already recorded")
                    continue
                label = f"{p.count} ranks" if opts.cpu_ranks else f"{p.count} GPUs {p.label}"
                bar.update(item=label)
                run = run_and_keep(fabric, args, writer, run_id, what=label, kept="the other sets", extra=extra,
                                   say=bar.say, on_record=lambda rec, w=label: bar.advance(
                                       item=f"{w} {rec.get('op')} {format_size(rec.get('bytes') or 0)}"))
                bar.advance(per_set - len(run.records), item=label)  # waived or failed: the rest
                results.append((p, run))
    finally:
        writer.close()
    rows = scaling_rows(results)
    if as_json:
        click.echo(json.dumps({"run_id": run_id, "fabric": fabric.to_dict(), "topology": topo.summary(),
                               "rows": rows, "failures": [{"count": p.count, "placement": p.label,
                                                           "gpus": list(p.gpus), "error": r.error}
                                                          for p, r in results if r.error]}, indent=2))
    else:
        render(rows, topo, cpu=opts.cpu_ranks)
    if plot_path:  # after the table: a plot that fails to write costs no printed result
        plot(rows, plot_path)
    if any(r.error for _, r in results):
        sys.exit(1)


def render(rows, topo, *, cpu: bool = False) -> None:
    """The table; with CPU ranks it says ranks (there are no GPUs, islands or hops to name)."""
    console = tables.console()
    key = [tables.Col("op", justify="left", key=True), tables.Col("size", key=True)]
    bw = [tables.Col("busbw"), tables.Col("algbw"), tables.Col("transport", justify="left")]
    cells = lambda r: [fmt(r["busbw_gbps"]), fmt(r["algbw_gbps"]), r["transport"] or "-"]  # noqa: E731
    op = lambda r: [r["op"] + (" (in)" if r["inplace"] else ""), format_size(r["bytes"])]  # noqa: E731
    if cpu:
        cols = key + [tables.Col("ranks", key=True)] + bw
        table_rows = [op(r) + [str(r["count"])] + cells(r) for r in rows]
        title = "busbw and algbw (GB/s) against CPU rank count (processes on this host)"
    else:
        console.print(topo.summary(), markup=False)
        cols = key + [tables.Col("GPUs", key=True), tables.Col("placement", justify="left"),
                      tables.Col("set", justify="left"), tables.Col("slowest hop", "hop", justify="left")] + bw
        table_rows = [op(r) + [str(r["count"]), r["placement"], ",".join(map(str, r["gpus"])),
                               r["slowest_link"] or "-"] + cells(r) for r in rows]
        title = "busbw and algbw (GB/s) against GPU count, per placement"
    tables.render(console, title, cols, table_rows)


def plot(rows, path: str) -> None:
    from fabricbench.report.analysis import scaling_series
    from fabricbench.report.plot import busbw_vs_count

    busbw_vs_count(scaling_series(rows), path, title="busbw against GPU count, per placement (largest size)")


def _ranges(gpus) -> str:
    from fabricbench.topology.model import _ranges as r

    return r(list(gpus))
