"""Your own training loop, related across fabrics: a torch.profiler trace of any loop, priced on each swept
fabric by relate's own model.

    fabricbench sweep --for-trace prof/ --fabric default --out sweeps.jsonl
    fabricbench sweep --for-trace prof/ --fabric shaped:2gbit --out sweeps.jsonl
    fabricbench relate --trace prof/ sweeps.jsonl

A trace is one file per rank (.json or .json.gz, prof.export_chrome_trace or tensorboard_trace_handler),
a folder of them, or rank 0's alone. Each file is streamed (training/kineto.py) and read as fabricbench
reads its own runs' profiles (training/trace.py): the steps (`ProfilerStep#N`, which prof.step() marks;
where none, the whole window is one step, said), every collective call (op, S, dtype, group size) with its
interval on the backend's stream or thread, and the overlap timeline (training/timeline.py). The ranks join
as a train run's do (trace.join): the same `comm` section, so relate's model (api.py: the timeline, the
overlap window, the link credit, the calls' calibration, the shared link) prices it without a fork.

The observed step is the trace's own: per profiled step the slowest rank's, their median, with the
interval of repeats (measuring/stats.repeat_ci) over the steps. The reference is the fabric the trace was
taken on (`default` unless said); each other swept fabric gets a predicted row.
"""

from __future__ import annotations

import shlex
import socket
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from fabricbench.errors import UsageError
from fabricbench.measuring.config import cores
from fabricbench.statistics.figures import repeat_ci
from fabricbench.relating import api, inputs
from fabricbench.relating.credit import measuring_gap_s
from fabricbench.relating.curves import EXACT, INTERPOLATED, SweepCurves
from fabricbench.relating.inputs import Observed, Workload
from fabricbench.relating.job import split
from fabricbench.relating.lab import STAND_IN
from fabricbench.relating.pricing import price
from fabricbench.training import kineto, kinetoline, trace
from fabricbench.training.timeline import STEP_MARK

SUFFIXES = (".json", ".json.gz")
DEFAULT_REFERENCE = "default"


@dataclass(kw_only=True)
class TraceJob:
    """One profiled run of a user's loop, its ranks joined."""

    label: str  # what the table calls it: the folder's or the file's name
    paths: list[str]  # the files read, in rank order
    ranks: list[int]
    world_size: int
    backend: str  # "nccl" or "gloo"
    device: str  # "cuda" or "cpu"
    comm: dict[str, Any]  # trace.join's section, as a train record's
    step_times_s: list[float]  # per profiled step, the slowest rank's
    host_name: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def step_s(self) -> float:
        return statistics.median(self.step_times_s)

    @property
    def collectives(self) -> list[dict[str, Any]]:
        return list(self.comm.get("collectives") or [])

    def dtype(self) -> str:
        by: dict[str, float] = {}
        for c in self.collectives:
            by[c["dtype"]] = by.get(c["dtype"], 0.0) + c["bytes"] * c["calls_per_step"]
        return "+".join(sorted(by, key=lambda d: -by[d])) or "-"


def files_of(paths: Sequence[str | Path]) -> list[Path]:
    """The trace files that paths name: a file as it is, a folder's *.json and *.json.gz (not below it)."""
    if not paths:
        raise UsageError("--trace needs a path: a trace file (.json or .json.gz), or a folder of them")
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.is_file() and f.name.endswith(SUFFIXES))
            if not found:
                raise UsageError(f"trace folder {p}: no .json or .json.gz file in it; give the folder the profiler "
                                 f"wrote (tensorboard_trace_handler) or the files")
            out.extend(found)
        else:
            out.append(p)  # kineto.events checks that it is a readable file
    if len(set(map(str, out))) != len(out):
        raise UsageError("--trace names the same file twice; give each rank's file once")
    return out


def label_of(paths: Sequence[str | Path]) -> str:
    p = Path(paths[0])
    name = p.name
    for s in SUFFIXES[::-1]:
        if name.endswith(s):
            name = name[: -len(s)]
            break
    return name + (f"+{len(paths) - 1}" if len(paths) > 1 else "")


def _steps(scan: kineto.Scan) -> list[dict[str, Any]]:
    return [e for e in scan.kept if e["name"] == STEP_MARK]


def _whole_window(scan: kineto.Scan, notes: list[str]) -> None:
    """A trace without step marks: its host's whole window is one step, on its busiest thread."""
    if scan.cpu_span is None:
        raise UsageError(f"trace {scan.path}: no host event with a time in it; give a torch.profiler chrome trace "
                         f"of a training loop")
    lo, hi = scan.cpu_span
    scan.kept.append({"ph": "X", "cat": "user_annotation", "name": STEP_MARK, "tid": scan.busiest_tid, "ts": lo,
                      "dur": hi - lo, "step": None, "args": {}})
    notes.append(f"{Path(scan.path).name}: no ProfilerStep#N (the loop did not call prof.step()), so its whole "
                 f"window, {(hi - lo) * 1e-3:.4g} ms, is taken as one step")


def _common_steps(scans: list[kineto.Scan], notes: list[str]) -> None:
    """Keep the steps every rank profiled (by their N), so that step i is the same step on every rank."""
    marked = [bool(_steps(s)) for s in scans]
    if any(marked) and not all(marked):
        who = [Path(s.path).name for s, m in zip(scans, marked) if not m]
        raise UsageError(f"traces {', '.join(who)} mark no ProfilerStep#N where the others do; give one profiled "
                         f"run's files, one per rank")
    if not any(marked):
        for s in scans:
            _whole_window(s, notes)
        return
    numbers = [{e.get("step") for e in _steps(s)} for s in scans]
    common = set.intersection(*numbers)
    if not common:
        raise UsageError("the ranks' traces share no ProfilerStep#N; give one profiled run's files, one per rank")
    if any(n != common for n in numbers):
        notes.append(f"the ranks profiled different steps; the {len(common)} that every rank has are read")
    for s in scans:
        s.kept = [e for e in s.kept if e["name"] != STEP_MARK or e.get("step") in common]


def _backend(scan: kineto.Scan) -> str:
    named = str(scan.distributed.get("backend") or "").lower()
    if named in ("nccl", "gloo"):
        return named
    if any(e["name"].startswith("gloo:") for e in scan.kept):
        return "gloo"
    return "nccl" if any(e["cat"] == "kernel" or e["name"] == "record_param_comms" for e in scan.kept) else "gloo"


def _world(scans: list[kineto.Scan]) -> int:
    named = [s.distributed.get("world_size") for s in scans]
    if all(isinstance(n, int) and n > 0 for n in named) and len(set(named)) == 1:
        return int(named[0])  # type: ignore[arg-type]
    if any(isinstance(n, int) for n in named) and len({n for n in named if isinstance(n, int)}) > 1:
        raise UsageError(f"the traces name different world sizes ({sorted({n for n in named if isinstance(n, int)})}); "
                         f"give one run's files")
    groups = [e["args"].get("Group size") for s in scans for e in s.kept if e["name"] == "record_param_comms"]
    groups = [g for g in groups if isinstance(g, int)]
    return max(groups) if groups else len(scans)


def _ranks(scans: list[kineto.Scan]) -> list[int]:
    named = [s.distributed.get("rank") for s in scans]
    if not all(isinstance(r, int) for r in named):
        return list(range(len(scans)))
    seen: dict[int, str] = {}
    for r, s in zip(named, scans):
        if r in seen:
            raise UsageError(f"two traces of rank {r}: {seen[r]} and {s.path}; give one profiled run's files, one "
                             f"per rank")
        seen[r] = s.path  # type: ignore[index]
    return [int(r) for r in named]  # type: ignore[arg-type]


def _groups(scan: kineto.Scan, world: int) -> list[int]:
    pgs = scan.distributed.get("pg_config")
    sizes = {int(g["pg_size"]) for g in pgs if isinstance(g, dict) and isinstance(g.get("pg_size"), int)} \
        if isinstance(pgs, list) else set()
    return sorted(sizes or {world})


def _unknown(scans: list[kineto.Scan]) -> str:
    seen = sorted({n for s in scans for n in s.unknown_comm})
    return f" (it has events named {', '.join(seen[:5])}, which no PyTorch from 2.4 on writes for a collective)" \
        if seen else ""


def read(paths: Sequence[str | Path]) -> TraceJob:
    """The trace files of one profiled run -> a TraceJob; UsageError for a trace that cannot be related."""
    files = files_of(paths)
    scans = [kineto.scan(f) for f in files]
    named = _ranks(scans)
    scans = [scans[i] for i in sorted(range(len(scans)), key=named.__getitem__)]
    ranks = sorted(named)
    notes: list[str] = []
    if any(s.steps_seen > kineto.MAX_STEPS for s in scans):
        notes.append(f"the trace has {max(s.steps_seen for s in scans)} profiled steps; the first "
                     f"{kineto.MAX_STEPS} are read")
    _common_steps(scans, notes)
    world = _world(scans)
    device = "cuda" if any(s.has_cuda for s in scans) else "cpu"
    backend = _backend(scans[0])
    summaries = []
    for s in scans:
        windows = sorted((e["ts"], e["ts"] + e["dur"]) for e in _steps(s))
        line, late = kinetoline.measure(s, device_type=device)
        if late:
            notes.append(f"{Path(s.path).name}: {late} compute intervals came out of the profiler's order by more "
                         f"than {kinetoline.REORDER} events; counted, but an overlap among them may count twice")
        summaries.append(trace.rank_summary(
            s.kept, device_type=device, world_size=world, steps=len(windows),
            step_times_s=[(b - a) * 1e-6 for a, b in windows], groups=_groups(s, world), line=line))
    comm = trace.join(summaries, backend=backend, world_size=world, sends={}, psi=0, precision="fp32",
                      timed_step_s=None)
    label = label_of(paths)
    if not comm.get("collectives"):
        why = "; ".join(sorted({p for r in summaries for p in r["problems"]})[:2]) or _unknown(scans).strip(" ()")
        raise UsageError(f"trace {label}: no collective between ranks in its {summaries[0]['profiled_steps']} "
                         f"step(s) (world size {world}{'; ' + why if why else ''}); relate prices a loop's "
                         f"communication: profile a distributed step (torch.profiler with record_shapes=True)")
    steps = [max(r["profiled_step_times_s"][i] for r in summaries) for i in range(summaries[0]["profiled_steps"])]
    if comm.get("note"):
        notes.append(comm["note"])
    return TraceJob(label=label, paths=[s.path for s in scans], ranks=ranks, world_size=world, backend=backend,
                    device=device, comm=comm, step_times_s=steps, notes=notes,
                    host_name=scans[0].header.get("host_name") if isinstance(scans[0].header.get("host_name"), str)
                    else None)


def observed(job: TraceJob, fabric: str) -> Observed:
    """The trace as relate's observation on `fabric` (the one it was taken on)."""
    here = job.host_name is not None and job.host_name == socket.gethostname()
    ci = repeat_ci(job.step_times_s)
    return Observed(workload=Workload(model=job.label, nranks=job.world_size, precision=job.dtype(), batch_size=None,
                                      seq_len=None, image_size=None, device=job.device),
                    strategy=job.label, fabric=fabric, step_s=job.step_s, samples_per_s=None, global_batch=None,
                    comm=job.comm, runs=1, step_ci95=ci, comms=(job.comm,),
                    # the window rule needs the host's cores per rank: known only where the trace was taken here
                    cores_per_rank=cores() / job.world_size if here else None)


def command(paths: Sequence[str | Path], fabric: str) -> str:
    """The sweep that measures what this trace needs on `fabric`."""
    return (f"fabricbench sweep --for-trace {' --for-trace '.join(shlex.quote(str(p)) for p in paths)} "
            f"--fabric {shlex.quote(fabric)} --out FILE")


def relate_trace(paths: Sequence[str | Path], sweeps: Any, reference: str | None = None, *,
                 overlap_window: bool | None = None) -> api.RelateResult:
    """Price one profiled run (paths: its trace files or folder) on every fabric `sweeps` measured (paths of
    JSONL records, imported ones included, or record dicts), calibrated on `reference` (default: default)."""
    ref = reference or DEFAULT_REFERENCE
    job = read(paths)
    problems: list[str] = []
    got = inputs.load(list(sweeps), problems) if sweeps else inputs.Inputs(collectives=[], trains=[])
    if got.trains:
        problems.append(f"{len(got.trains)} train record(s) among the inputs are not read beside --trace")
    if not got.collectives:
        raise UsageError(f"no sweep records among the inputs; measure what the trace needs on the fabric it was "
                         f"taken on: {command(paths, ref)}")
    curves = SweepCurves.from_records(split(got.collectives)[0])
    if ref not in curves.fabrics():
        have = ", ".join(curves.fabrics()) or "none with a measured time"
        raise UsageError(f"no sweep of the reference fabric {ref} (the one the trace was taken on; swept: {have}); "
                         f"run {command(paths, ref)}, or name the trace's fabric with --reference")
    for fab in curves.fabrics():
        pricing = price(job.collectives, curves, fabric=fab, nranks=job.world_size)
        # a dtype no sweep runs is swept as the stand-in of its element size (lab.STAND_IN): not a lack
        lacking = [e for e in pricing.entries if e.status not in (EXACT, INTERPOLATED)
                   or e.substituted and e.curve is not None and e.curve.dtype != STAND_IN.get(e.dtype, e.dtype)]
        if lacking:
            problems.append(f"fabric {fab}'s sweeps lack {len(lacking)} of the trace's {len(pricing.entries)} "
                            f"collectives (op, dtype, ranks or sizes); measure them with {command(paths, fab)}")
        if measuring_gap_s(fab) is not None and (curves.gapped is None or fab not in curves.gapped.fabrics()):
            problems.append(f"fabric {fab} is a token-bucket link and none of its sweeps ran after an idle gap: "
                            f"the link credit is taken as a whole bucket per gap, its upper bound (the prediction "
                            f"errs fast); measure what a call realises with {command(paths, fab)}")
    return api.relate_observed([observed(job, ref)], got.collectives, ref, problems=job.notes + problems,
                               overlap_window=overlap_window, sweep_for=lambda fab: command(paths, fab))
