"""The library behind `compare`, `scaling` and `p2p`: the CLI only maps flags to these and prints.

    import fabricbench
    res = fabricbench.compare("default,p2p-off", gpus="0,1", sizes="1M-64M:x4", out="cmp.jsonl")
    res.table["rows"], res.runs[1].transport                    # the comparison, what NCCL really used
    res = fabricbench.scaling(gpus="0-7", counts="2,4,8", sizes="1G")
    res = fabricbench.p2p(gpus="0-3", size="256M")              # res.unidirectional_gbps[i][j]

compare and scaling run each child sweep as a job (fabricbench/jobs, through measuring/child.py): under its
fabric, records written to `out` as they come, the rest kept when one fails. Errors name the parameters
(`counts`, `gpus`), which are also the flags' names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from fabricbench import hostload
from fabricbench.errors import UsageError
from fabricbench.measuring import copy as copying
from fabricbench.measuring.copy import matrix, measure_all
from fabricbench.fabrics import get_fabric, parse_fabric_list
from fabricbench.gpus import default_gpus, parse_gpus
from fabricbench.measuring.child import ChildRun
from fabricbench.measuring.compare import SweepOptions, check_plot_path, open_output, run_and_keep
from fabricbench.measuring.config import PROCS_PER_CORE, cores
from fabricbench.measuring.resume import covering, read_prior
from fabricbench.measuring.runner import new_run_id
from fabricbench.progress import Progress
from fabricbench.report.analysis import METRIC_LABEL, comparison, comparison_series, scaling_rows, scaling_series
from fabricbench.report.plot import bandwidth_vs_size, busbw_vs_count
from fabricbench.results.schema import header
from fabricbench.sizes import format_size, parse_size
from fabricbench.topology import cuda_to_nvml, read_topology
from fabricbench.topology.model import Gpu, Topology, _ranges
from fabricbench.topology.placement import scaling_sets

MAX_COPIES = 1_000_000  # p2p: timed or untimed copies per measurement
Say = Callable[[str], None]


def _stderr(line: str) -> None:
    import sys

    print(line, file=sys.stderr, flush=True)


def _text(v: Any) -> str | None:
    """A list parameter as the comma text the sweep options take ("all_reduce,all_gather")."""
    if v is None or isinstance(v, str):
        return v
    return ",".join(str(x) for x in v)


def sweep_options(*, ops: Any = "all_reduce", sizes: Any = "1M-1G:x4", dtype: str = "float32", iters: int = 20,
                  warmup: int = 5, engine: str = "native", backend: str | None = None, nprocs: int | None = None,
                  timeout_s: float | None = None):
    """What every child sweep of compare and scaling gets (the defaults are `fabricbench sweep`'s)."""
    return SweepOptions(ops=_text(ops), sizes=_text(sizes), dtype=dtype, iters=iters, warmup=warmup, engine=engine,
                        backend=backend, nprocs=nprocs, timeout_s=timeout_s)


def resume_records(out: str | None, resume: bool) -> list[dict[str, Any]] | None:
    """resume=True: the reusable records of the combined `out` (shared by compare and scaling)."""
    if not resume:
        return None
    if not out:
        raise UsageError("resume skips what out already holds; give out (the earlier run's file)")
    return read_prior(out)


def already_done(prior, opts, fabric, gpus, *, nprocs: int | None = None, where: dict[str, Any] | None = None,
                 out: str | None = None, say: Say = _stderr):
    """A ChildRun made of the records that already hold every measurement of this child sweep (then it is
    not run again), or None. Partly measured children run whole: the sweep's own resume is per item."""
    if prior is None:
        return None
    fields = dict(ops=opts.ops, sizes=opts.sizes, dtype=opts.dtype, iters=opts.iters, warmup=opts.warmup,
                  engine=opts.engine, backend=opts.backend, nprocs=nprocs if nprocs is not None else opts.nprocs,
                  fabric=fabric.name, gpus=None if opts.cpu_ranks else gpus)
    if opts.timeout_s is not None:
        fields["timeout_s"] = opts.timeout_s
    recs = covering(prior, where=where, **fields)
    if recs is None:
        return None
    say(f"resume: all {len(recs)} measurement(s) already recorded ok in {out}; skipped")
    return ChildRun(fabric=fabric, records=recs, transport=recs[0].get("transport"),
                    mismatch=recs[0].get("transport_mismatch"))


def _progress(what: str, total: int, progress: Progress | bool | None) -> Progress:
    """progress: a Progress to report to, False for none, None for the automatic one (a bar on a terminal)."""
    if isinstance(progress, Progress):
        return progress
    return Progress(what, total=total, quiet=progress is False)


# -- compare ------------------------------------------------------------------------------------------------------
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
            plot: str | None = None, beside: Sequence[Any] = (), **sweep: Any) -> CompareResult:
    """The same sweep on each fabric, each in a fresh process; busbw side by side (CompareResult.table).

    `fabrics`: names, shaped:RATE or name:VAR=VAL (a comma text or a list); `sweep`: the child sweep's
    options (ops, sizes, dtype, iters, warmup, engine, backend, nprocs, timeout_s); `out`: the combined JSONL,
    written as the children measure; `resume`: fabrics whose every measurement `out` holds are not run;
    `plot`: a PNG written after the run; `beside`: runs that measured nothing shown as more columns
    (imported results, measuring/compare.runs_beside)."""
    fabs = parse_fabric_list(_text(fabrics))
    gpu_t = parse_gpus(_text(gpus)) if gpus is not None else None
    opts = sweep_options(**sweep)
    check_plot_path(plot)
    opts.validate(gpu_t)
    prior = resume_records(out, resume)  # read before this run appends to the file
    run_id = new_run_id()
    writer = open_output(out, run_id, fabs[0].name)
    runs = []
    per_fabric = len(opts.planned())
    try:
        with _progress("compare", per_fabric * len(fabs), progress) as bar:
            for fab in fabs:
                if bar.mode != "off":
                    bar.say(f"fabric {fab.name}: {fab.description or fab.name}")
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


# -- scaling ------------------------------------------------------------------------------------------------------
def read_counts(text: str) -> list[int]:
    """counts as written: whole numbers of at least 2, each once (no machine needed to check this)."""
    counts = []
    for item in text.split(","):
        item = item.strip()
        if item.startswith("-") and item[1:].isdigit():
            raise UsageError(f"counts {text}: {item} is negative; GPU counts start at 2, e.g. 2,4,8")
        if not item.isdigit():
            raise UsageError(f"counts {text}: {item!r} is not a whole number; write e.g. 2,4,8")
        counts.append(int(item))
    bad = [c for c in counts if c < 2]
    if bad:
        raise UsageError(f"counts {text}: {bad[0]} GPU(s) has no bus bandwidth (factor 0); start at 2")
    if len(set(counts)) != len(counts):
        raise UsageError(f"counts {text} names a count twice")
    return sorted(counts)


def parse_counts(text: str | None, n: int, gpus_text: str) -> list[int]:
    if text is None:
        counts = sorted({c for c in (2, 4, 8, 16, 32, 64) if c <= n} | ({n} if n >= 2 else set()))
        if not counts:
            raise UsageError(f"gpus {gpus_text} names {n} GPU; scaling needs at least 2")
        return counts
    counts = read_counts(text)
    big = [c for c in counts if c > n]
    if big:
        raise UsageError(f"counts {text}: {max(big)} is more than the {n} GPUs of gpus {gpus_text}")
    return counts


def _cpu_ranks_limit(n: int, what: str) -> None:
    """CPU ranks are processes on this host: bounded by its cores as `sweep --nprocs` is."""
    if n > PROCS_PER_CORE * cores():
        raise UsageError(f"{what}: {n} CPU ranks are more than {PROCS_PER_CORE} per core "
                         f"({PROCS_PER_CORE} x {cores()} cores = {PROCS_PER_CORE * cores()}); lower it")


@dataclass(kw_only=True)
class ScalingResult:
    run_id: str
    fabric: Any  # fabrics.Fabric
    topology: Any  # topology.Topology (CPU ranks: one of identical ranks)
    cpu_ranks: bool
    results: list[tuple[Any, Any]] = field(default_factory=list)  # (placement, ChildRun)
    rows: list[dict[str, Any]] = field(default_factory=list)  # report.analysis.scaling_rows

    @property
    def failed(self) -> bool:
        return any(r.error for _, r in self.results)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "fabric": self.fabric.to_dict(), "topology": self.topology.summary(),
                "rows": self.rows, "failures": [{"count": p.count, "placement": p.label, "gpus": list(p.gpus),
                                                 "error": r.error} for p, r in self.results if r.error]}


def scaling(*, gpus: str | Sequence[int] | None = None, counts: str | Sequence[int] | None = None,
            fabric: str = "default", topo_file: str | None = None, out: str | None = None, resume: bool = False,
            progress: Progress | bool | None = False, plot: str | None = None, **sweep: Any) -> ScalingResult:
    """busbw against GPU count: for each count a GPU set inside one NVLink island and one across islands
    (topology/placement.py), each measured by its own child sweep under `fabric`. With CPU ranks
    (engine="torch", backend="gloo") the counts are ranks on this host. `sweep`: as for compare."""
    gpus, counts = _text(gpus), _text(counts)
    fab = get_fabric(fabric)
    opts = sweep_options(**{**sweep, "nprocs": None})
    check_plot_path(plot)  # outputs first: nothing is read or measured for a plot that cannot be written
    if counts is not None:
        read_counts(counts)
    topo = read_topology(topo_file, what="--topo-file")
    if topo is None:
        if not opts.cpu_ranks:
            raise UsageError("no GPU topology here (NVML and nvidia-smi did not answer)", hint_text="give a saved "
                             "`nvidia-smi topo -m` output or run CPU ranks:",
                             hint=[{"topo_file": "FILE"}, {"engine": "torch", "backend": "gloo"}])
        n = len(parse_gpus(gpus)) if gpus else max(read_counts(counts or "2"))
        _cpu_ranks_limit(n, f"counts {counts}" if not gpus else f"gpus {gpus}")
        topo = Topology(gpus=tuple(Gpu(index=i) for i in range(n)),  # CPU ranks: all alike
                        links=tuple(tuple("X" if i == j else "SYS" for j in range(n)) for i in range(n)),
                        source="cpu ranks (no GPU topology)")
    ordinals = parse_gpus(gpus) if gpus is not None else tuple(range(len(topo.gpus)))
    # CUDA ordinals -> topology indices (CUDA_VISIBLE_DEVICES may reorder); a saved file is taken as is.
    to_topo = dict(zip(ordinals, ordinals if topo_file or topo.source.startswith("cpu") else
                       cuda_to_nvml(ordinals, topo)))
    from_topo = {v: k for k, v in to_topo.items()}
    count_list = parse_counts(counts, len(ordinals), gpus or _ranges(list(ordinals)))
    opts.validate(None if opts.cpu_ranks else ordinals)
    placements = scaling_sets(topo, count_list, tuple(to_topo[g] for g in ordinals))
    prior = resume_records(out, resume)  # read before this run appends to the file
    run_id = new_run_id()
    res = ScalingResult(run_id=run_id, fabric=fab, topology=topo, cpu_ranks=opts.cpu_ranks)
    writer = open_output(out, run_id, fab.name, topo=topo if topo_file else None)
    per_set = len(opts.planned())
    try:
        with _progress("scaling", per_set * len(placements), progress) as bar:
            for p in placements:
                cuda_set = tuple(from_topo[g] for g in p.gpus)
                # CPU ranks are processes on one host: no GPUs, islands or hops to name
                what = (f"{p.count} CPU ranks ({opts.backend})" if opts.cpu_ranks else
                        f"{p.count} GPUs {p.label} {list(cuda_set)} (slowest hop {p.worst_link})")
                if bar.mode != "off":
                    bar.say(what)
                extra = {"placement": p.label, "placement_gpus": list(cuda_set), "topology_gpus": list(p.gpus),
                         "slowest_link": p.worst_link, "count": p.count}
                nprocs = p.count if opts.cpu_ranks else None
                done = already_done(prior, opts, fab, cuda_set, nprocs=nprocs, out=out, say=bar.say,
                                    where={"placement": p.label, "placement_gpus": list(cuda_set)})
                if done is not None:
                    res.results.append((p, done))
                    bar.advance(per_set, item=f"{what}: already recorded")
                    continue
                label = f"{p.count} ranks" if opts.cpu_ranks else f"{p.count} GPUs {p.label}"
                bar.update(item=label)
                run = run_and_keep(fab, opts.job(cuda_set, nprocs=nprocs), writer, run_id, what=label,
                                   kept="the other sets", extra=extra, say=bar.say, on_record=lambda rec, w=label:
                                   bar.advance(item=f"{w} {rec.get('op')} {format_size(rec.get('bytes') or 0)}"))
                bar.advance(per_set - len(run.records), item=label)  # waived or failed: the rest
                res.results.append((p, run))
    finally:
        writer.close()
    res.rows = scaling_rows(res.results)
    if plot:
        busbw_vs_count(scaling_series(res.rows), plot, title="busbw against GPU count, per placement (largest size)")
    return res


# -- p2p ----------------------------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class P2PResult:
    run_id: str
    bytes: int
    gpus: tuple[int, ...]
    results: list[Any]  # measuring/copy.CopyResult
    unidirectional_gbps: list[list[float | None]]
    bidirectional_gbps: list[list[float | None]]
    host: bool = True
    peers: bool = True

    @property
    def host_results(self) -> list[Any]:
        return [r for r in self.results if r.copy_kind == "host"]

    def host_gbps(self, gpu: int, direction: str) -> float | None:
        return next((r.gbps for r in self.host_results if r.direction == direction and f"GPU{gpu}" in (r.src, r.dst)),
                    None)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "bytes": self.bytes, "gpus": list(self.gpus),
                "unidirectional_gbps": self.unidirectional_gbps, "bidirectional_gbps": self.bidirectional_gbps,
                "host_gbps": {f"GPU{g}": {d: self.host_gbps(g, d) for d in ("h2d", "d2h", "bidir")}
                              for g in self.gpus} if self.host else {},
                "records": [r.__dict__ for r in self.results]}


def p2p(*, gpus: str | Sequence[int] | None = None, size: str | int = "256M", iters: int = 20, warmup: int = 5,
        host: bool = True, peers: bool = True, out: str | None = None, plot: str | None = None) -> P2PResult:
    """Copy bandwidth between every GPU pair (uni- and bidirectional) and between host and each GPU, by the
    compiled engine (cudaMemcpyPeerAsync; pinned host memory). GB/s = bytes / median time (measuring/copy.py)."""

    nbytes = size if isinstance(size, int) else parse_size(size)
    if not 1 <= iters <= MAX_COPIES:
        raise UsageError(f"iters {iters}: need 1 to {MAX_COPIES:,} timed copies")
    if not 0 <= warmup <= MAX_COPIES:
        raise UsageError(f"warmup {warmup}: 0 to {MAX_COPIES:,} untimed copies")
    if not host and not peers:
        raise UsageError("no host and no peer copies leave nothing to measure")
    check_plot_path(plot)
    gpus = _text(gpus)
    if gpus is not None:
        parse_gpus(gpus)  # the list's syntax first: it needs no engine
    eng = copying.engine()
    gpu_t = default_gpus(gpus)
    _check_fits(eng, gpu_t, nbytes, host=host, peers=peers)
    run_id = new_run_id()
    writer = open_output(out, run_id, "default")
    head = header("copy", run_id=run_id, fabric="default")
    try:
        results = measure_all(gpu_t, nbytes, warmup, iters, peers=peers, host=host, eng=eng,
                              on_result=lambda r: writer.write(r.to_record(head, list(gpu_t))))
    finally:
        writer.close()
    res = P2PResult(run_id=run_id, bytes=nbytes, gpus=tuple(gpu_t), results=results, host=host, peers=peers,
                    unidirectional_gbps=matrix(results, gpu_t, "uni"),
                    bidirectional_gbps=matrix(results, gpu_t, "bidir"))
    return res


def _check_fits(eng, gpu_t, nbytes: int, *, host: bool, peers: bool) -> None:
    """A copy of S bytes both ways holds 2 x S on a GPU (csrc/copy.cpp) and 2 x S of pinned host memory:
    refuse sizes that cannot be allocated, with the arithmetic, before the first copy."""
    need = 2 * nbytes
    gib = 2**30
    avail = _host_available_bytes()
    if host and avail is not None and need > avail:
        raise UsageError(f"size {format_size(nbytes)}: host copies pin 2 x {format_size(nbytes)} = "
                         f"{need / gib:.1f} GiB but {avail / gib:.1f} GiB of host memory is available; "
                         f"lower size or leave host copies out")
    devices = getattr(eng, "devices", None)
    if devices is None:  # a stand-in engine without device facts
        return
    for d in devices(list(gpu_t)):
        if need > d["free_bytes"]:
            raise UsageError(f"size {format_size(nbytes)}: a copy both ways needs 2 x {format_size(nbytes)} = "
                             f"{need / gib:.1f} GiB on GPU{d['index']} but {d['free_bytes'] / gib:.1f} GiB is "
                             f"free; lower size")


def _host_available_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None
