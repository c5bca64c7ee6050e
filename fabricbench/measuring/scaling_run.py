"""The library behind `scaling`: busbw against GPU count, a GPU set inside one NVLink island and one across
islands for each count, each measured by its own child sweep.

    import fabricbench
    res = fabricbench.scaling(fabricbench.ScalingConfig(counts="2,4,8", sweep=fabricbench.SweepConfig(gpus="0-7",
                                                                                                    sizes="1G")))

Errors name the parameters (`counts`, `gpus`). What scaling shares with
compare is in measuring/child_sweeps.py.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from fabricbench.declare import check, declare, shared
from fabricbench.errors import UsageError, expect_config
from fabricbench.fabrics import get_fabric
from fabricbench.measuring.child_sweeps import (already_done, as_text, check_plot_path, child, cpu_ranks, decided,
                                           open_output, planned, progress_bar, resume_records, run_and_keep,
                                           with_backend)
from fabricbench.measuring.config import PROCS_PER_CORE, SweepConfig, cores
from fabricbench.measuring.runner import new_run_id
from fabricbench.progress import Progress
from fabricbench.reporting.analysis import scaling_rows, scaling_series
from fabricbench.reporting.plot import busbw_vs_count
from fabricbench.sizes import format_size
from fabricbench.topology import TOPO_FILE, cuda_to_nvml, read_topology
from fabricbench.topology.model import Gpu, Topology, ranges
from fabricbench.topology.placement import scaling_sets

# The one default of `fabricbench scaling --sizes` and ScalingConfig().sweep: scaling plots busbw against
# GPU count at the largest size (report/analysis.scaling_series), where busbw has reached its plateau; the
# smaller sizes of a sweep would only lengthen every set's run.
SIZES = "1G"


OPS = ("all_reduce",)


def default_sweep() -> SweepConfig:
    """What each set's child sweep gets when no sweep is given: `fabricbench sweep`'s defaults but one
    collective at scaling's sizes (SIZES); `fabricbench scaling` offers these same defaults."""
    return SweepConfig(ops=OPS, sizes=SIZES)


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


@dataclass(frozen=True, kw_only=True)
class ScalingConfig:
    """The GPU counts to measure and the sweep each GPU set runs (a template: its gpus are those the sets
    are drawn from, its fabric every set's; its nprocs is each count's); checked once, here."""

    counts: tuple[int, ...] | None = field(default=None, metadata=declare(  # sorted, each at least 2
        "--num-gpus", "count list", "GPU counts to measure, e.g. 2,4,8.", lo=2, hi=1024, concept="num_gpus",
        aliases=("--counts",), default_by="powers of 2 up to all of --gpus"))
    # a saved `nvidia-smi topo -m` output to choose the sets from; None: this machine's
    topo_file: str | None = field(default=None, metadata=shared(
        TOPO_FILE, help="Choose sets from a saved `nvidia-smi topo -m` output."))
    sweep: SweepConfig = field(default_factory=default_sweep)

    def __post_init__(self) -> None:
        if self.counts is not None:  # a comma text or whole numbers, as written (no machine needed)
            object.__setattr__(self, "counts", tuple(read_counts(as_text(self.counts))))
        check(self)
        if not isinstance(self.sweep, SweepConfig):
            raise UsageError(f"ScalingConfig.sweep is a SweepConfig, not {type(self.sweep).__name__}")
        if self.sweep.gap_s:
            raise UsageError("ScalingConfig: a gapped sweep (gap_s) measures relate's link credit, never a "
                             "scaling's prices; leave gap_s at 0")


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


def scaling(config: ScalingConfig, *, out: str | None = None, resume: bool = False,
            progress: Progress | bool | None = False, plot: str | None = None) -> ScalingResult:
    """busbw against GPU count: for each of config.counts a GPU set inside one NVLink island and one across
    islands (topology/placement.py), each measured by its own child sweep of config.sweep. With CPU ranks
    (engine="torch", backend="gloo") the counts are ranks on this host. `out`, `resume`, `plot`: as for
    compare."""
    expect_config(config, ScalingConfig, "scaling")
    counts = as_text(config.counts)
    gpus = ranges(list(config.sweep.gpus)) if config.sweep.gpus is not None else None
    topo_file = config.topo_file
    fab = get_fabric(config.sweep.fabric)
    check_plot_path(plot)  # outputs first: nothing is read or measured for a plot that cannot be written
    template = with_backend(dataclasses.replace(config.sweep, nprocs=None))  # nprocs: each count's
    cpu = cpu_ranks(template)
    topo = read_topology(topo_file, what="--topo-file")
    if topo is None:
        if not cpu:
            raise UsageError("no GPU topology here (NVML and nvidia-smi did not answer)", hint_text="give a saved "
                             "`nvidia-smi topo -m` output or run CPU ranks:",
                             hint=[{"topo_file": "FILE"}, {"engine": "torch", "backend": "gloo"}])
        n = len(config.sweep.gpus) if gpus else max(config.counts or (2,))
        _cpu_ranks_limit(n, f"counts {counts}" if not gpus else f"gpus {gpus}")
        topo = Topology(gpus=tuple(Gpu(index=i) for i in range(n)),  # CPU ranks: all alike
                        links=tuple(tuple("X" if i == j else "SYS" for j in range(n)) for i in range(n)),
                        source="cpu ranks (no GPU topology)")
    ordinals = config.sweep.gpus if gpus is not None else tuple(range(len(topo.gpus)))
    # CUDA ordinals -> topology indices (CUDA_VISIBLE_DEVICES may reorder); a saved file is taken as is.
    to_topo = dict(zip(ordinals, ordinals if topo_file or topo.source.startswith("cpu") else
                       cuda_to_nvml(ordinals, topo)))
    from_topo = {v: k for k, v in to_topo.items()}
    count_list = parse_counts(counts, len(ordinals), gpus or ranges(list(ordinals)))
    sweep = decided(dataclasses.replace(template, gpus=None if cpu else ordinals))
    placements = scaling_sets(topo, count_list, tuple(to_topo[g] for g in ordinals))
    prior = resume_records(out, resume)  # read before this run appends to the file
    run_id = new_run_id()
    res = ScalingResult(run_id=run_id, fabric=fab, topology=topo, cpu_ranks=cpu)
    writer = open_output(out, run_id, fab.name, topo=topo if topo_file else None)
    per_set = planned(sweep)
    try:
        with progress_bar("scaling", per_set * len(placements), progress) as bar:
            for p in placements:
                cuda_set = tuple(from_topo[g] for g in p.gpus)
                # CPU ranks are processes on one host: no GPUs, islands or hops to name
                what = (f"{p.count} CPU ranks ({sweep.backend})" if cpu else
                        f"{p.count} GPUs {p.label} {list(cuda_set)} (slowest hop {p.worst_link})")
                if bar.mode != "off":
                    bar.say(what)
                extra = {"placement": p.label, "placement_gpus": list(cuda_set), "topology_gpus": list(p.gpus),
                         "slowest_link": p.worst_link, "count": p.count}
                job = child(sweep, cuda_set, nprocs=p.count if cpu else None)
                done = already_done(prior, job, fab, out=out, say=bar.say,
                                    where={"placement": p.label, "placement_gpus": list(cuda_set)})
                if done is not None:
                    res.results.append((p, done))
                    bar.advance(per_set, item=f"{what}: already recorded")
                    continue
                label = f"{p.count} ranks" if cpu else f"{p.count} GPUs {p.label}"
                bar.update(item=label)
                run = run_and_keep(fab, job, writer, run_id, what=label,
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
