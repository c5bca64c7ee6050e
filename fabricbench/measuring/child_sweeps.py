"""Shared by `compare` and `scaling` (compare_run.py, scaling_run.py): the child sweeps they make from
their SweepConfig template (checked before any child starts), the output file, what --resume finds already
measured, and compare's `--with` files as runs beside the measured fabrics. No click here: the flags are in
fabricbench/cli/options.py, the comparison rows in report/analysis.py, the tables in measuring/format.py.

    fabricbench compare --fabrics default,p2p-off --gpus 0,1 --out cmp.jsonl
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, Callable

from fabricbench.errors import UsageError
from fabricbench.fabrics.model import Fabric
from fabricbench.importing.beside import collective_groups, records_of
from fabricbench.measuring.config import SweepConfig, default_backend
from fabricbench.measuring.devices import resolve_devices, uses_gpus
from fabricbench.measuring.child import ChildRun, run_child
from fabricbench.measuring.resume import covering, read_prior
from fabricbench.progress import Progress
from fabricbench.reporting.analysis import metric_for as choose
from fabricbench.reporting.plot import remove_stale
from fabricbench.results.writer import ResultWriter
from fabricbench.topology import snapshot_record


def with_backend(sweep: SweepConfig) -> SweepConfig:
    """The template with the torch engine's backend decided as the sweep itself decides it (nccl when a
    GPU is visible, else gloo), so that compare and scaling know before any child whether ranks are CPU
    ones."""
    if sweep.engine == "torch" and sweep.backend is None:
        return dataclasses.replace(sweep, backend=default_backend())
    return sweep


def decided(sweep: SweepConfig) -> SweepConfig:
    """with_backend(sweep), its GPUs checked against those visible, now rather than in every child."""
    sweep = with_backend(sweep)
    if uses_gpus(sweep):
        resolve_devices(sweep)
    return sweep


def cpu_ranks(sweep: SweepConfig) -> bool:
    return sweep.engine == "torch" and sweep.backend == "gloo"


def planned(sweep: SweepConfig) -> int:
    """How many (op, size) pairs one child sweep measures: what a progress bar counts."""
    return len(sweep.ops) * len(sweep.sizes.expand())


def child(sweep: SweepConfig, gpus: tuple[int, ...] | None, nprocs: int | None = None) -> SweepConfig:
    """The child sweep over `gpus` (run_child adds the fabric and where it writes); gloo ranks drive no GPU."""
    return dataclasses.replace(sweep, gpus=None if cpu_ranks(sweep) else gpus,
                               nprocs=nprocs if nprocs is not None else sweep.nprocs)


def runs_beside(paths, *, ops: list[str], dtype: str) -> list[Any]:
    """compare --with FILE: one column per fabric label of the file's collective records (imported ones read
    as "<fabric> (<tool>)"), as runs that measured nothing (measuring.compare_run.compare's `beside`)."""
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


def open_output(out_path: str | None, run_id: str, fabric: str, topo=None):
    """The combined results file, opened (so checked) before anything runs, topology snapshot first."""
    writer = ResultWriter(out_path)
    rec = snapshot_record(run_id, fabric, topo=topo)
    if rec is not None:
        writer.write(rec)
    return writer


def check_plot_path(path: str | None) -> None:
    """Refuse a --plot that could not be written, before anything is measured (and say which extra draws it)."""
    import importlib.util

    if path is None:
        return
    parent = os.path.dirname(os.path.abspath(path))
    if not path.lower().endswith(".png"):
        raise UsageError(f"--plot {path}: the plot is a PNG; name it *.png")
    if os.path.isdir(path):
        raise UsageError(f"--plot {path}: is a folder; name a file, e.g. {os.path.join(path, 'plot.png')}")
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK) or \
            (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise UsageError(f"--plot {path}: cannot write there; choose a writable path")
    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError('--plot needs matplotlib: pip install "fabricbench[plot]"')
    remove_stale(path)  # an earlier run's figure never stays beside this run's results


def adopt(rec: dict[str, Any], run_id: str) -> dict[str, Any]:
    """A child's record joins this run: its own run id is kept in extra.child_run_id."""
    rec = dict(rec)
    rec["extra"] = {**(rec.get("extra") or {}), "child_run_id": rec.get("run_id")}
    rec["run_id"] = run_id
    return rec


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_and_keep(fabric, job: SweepConfig, writer, run_id: str, *, what: str, kept: str,
                 extra: dict[str, Any] | None = None, say: Callable[[str], None] = _stderr,
                 on_record: Callable[[dict[str, Any]], None] | None = None):
    """One child sweep under `fabric`: report its warnings and failure, write its records into this run.

    `what` names the run in messages ("fabric p2p-off", "4 GPUs cross-island"); `kept` says what survives
    a failure ("other fabrics' results"); `say` prints one message line; `on_record` sees each record as it
    is written (progress). Returns the ChildRun with its records adopted.
    """
    # Written as the child measures them: an interrupted compare keeps every finished measurement.
    def write(rec: dict[str, Any]) -> None:
        writer.write(adopt(rec, run_id))
        if on_record is not None:
            on_record(rec)

    run = run_child(fabric, job, extra=extra, on_record=write)
    for w in run.warnings:
        say(f"warning: {w}")
    if run.waived:
        say(f"{what} waived: {run.waived}")
    if run.error:
        say(f"{what} failed: {run.error} ({kept} are kept)")
    if run.mismatch:
        say(f"warning: {run.mismatch}")
    run.records = [adopt(r, run_id) for r in run.records]
    return run


def metric_for(records: list[dict[str, Any]]) -> tuple[str, str | None]:
    """Kept for callers of the old place; the analysis lives in fabricbench/reporting/analysis.py."""
    return choose(records)


def as_text(v: Any) -> str | None:
    """A list parameter as the comma text the sweep options take ("all_reduce,all_gather")."""
    if v is None or isinstance(v, str):
        return v
    return ",".join(str(x) for x in v)


def resume_records(out: str | None, resume: bool) -> list[dict[str, Any]] | None:
    """resume=True: the reusable records of the combined `out` (shared by compare and scaling)."""
    if not resume:
        return None
    if not out:
        raise UsageError("resume skips what out already holds; give out (the earlier run's file)")
    return read_prior(out)


def already_done(prior, sweep: SweepConfig, fabric, *, where: dict[str, Any] | None = None,
                 out: str | None = None, say: Callable[[str], None] = _stderr):
    """A ChildRun made of the records that already hold every measurement of the child sweep `sweep` under
    `fabric` (then it is not run again), or None. Partly measured children run whole: the sweep's own
    resume is per item."""
    if prior is None:
        return None
    recs = covering(prior, dataclasses.replace(sweep, fabric=fabric.name), where=where)
    if recs is None:
        return None
    say(f"resume: all {len(recs)} measurement(s) already recorded ok in {out}; skipped")
    return ChildRun(fabric=fabric, records=recs, transport=recs[0].get("transport"),
                    mismatch=recs[0].get("transport_mismatch"))


def progress_bar(what: str, total: int, progress: Progress | bool | None) -> Progress:
    """progress: a Progress to report to, False for none, None for the automatic one (a bar on a terminal)."""
    if isinstance(progress, Progress):
        return progress
    return Progress(what, total=total, quiet=progress is False)
