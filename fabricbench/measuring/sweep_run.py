"""What `fabricbench sweep` does with a checked SweepConfig: the GPUs it drives (for a run or a plan), the
plan it prints with --dry-run, and the run with its outputs (--out records, --csv, the table, --resume).

    fabricbench sweep --gpus 0-3 --sizes 8-1K:x4 --dry-run       (plan_devices, print_plan)
    fabricbench sweep --gpus 0-7 --out run.jsonl --csv run.csv   (devices, run)

The library decides here; cli/sweep.py only maps flags, so following --gpus from the command line goes
down through this module (devices -> measuring/api.resolve_devices -> gpus.default_gpus) and never back.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Callable

import fabricbench.gpus  # looked up on call: tests stand in for visible_gpu_count
from fabricbench import hostload, references, topology
from fabricbench.errors import CheckFailed
from fabricbench.fabrics import get_fabric
from fabricbench.files import OutputError, check_output, open_output
from fabricbench.measuring.devices import nranks, resolve_devices, uses_gpus
from fabricbench.measuring.config import SweepConfig
from fabricbench.measuring.plan import build_plan, plan_length
from fabricbench.measuring.resume import Resume
from fabricbench.measuring.runner import new_run_id, run_sweep
from fabricbench.reporting import table as tables
from fabricbench.reporting.table import CsvSink, SweepTable, fit_lines
from fabricbench.results.context import fabric_label
from fabricbench.results.schema import header
from fabricbench.results.status import Status
from fabricbench.results.writer import ResultWriter
from fabricbench.sizes import format_size

Say = Callable[[str], Any]


def devices(config: SweepConfig, gpus_text: str | None = None) -> tuple[SweepConfig, list[str]]:
    """The GPUs a run drives (measuring/api.resolve_devices: named and checked, else all visible), with
    the notes to show."""
    return resolve_devices(config, gpus_text)


def plan_devices(config: SweepConfig, gpus_text: str | None = None) -> tuple[SweepConfig, list[str]]:
    """The GPUs a plan shows; a plan needs no GPU here: named GPUs as named, else this machine's, else one
    GPU (said in a note). An unknown or malformed fabric is found, as a run would find it."""
    get_fabric(config.fabric)
    if config.gpus is None and uses_gpus(config) and fabricbench.gpus.visible_gpu_count() == 0:
        return dataclasses.replace(config, gpus=(0,)), [
            "no GPU is visible here: the plan for one GPU (name others with --gpus)"]
    if config.gpus is None:
        return resolve_devices(config, gpus_text)
    return config, []


PLAN_COLS = (tables.Col("op", justify="left", key=True), tables.Col("place", justify="left"),
             tables.Col("size", key=True), tables.Col("S (B)", legend="S = bytes timed"), tables.Col("count"),
             tables.Col("nccl_count", "nccl", "nccl = NCCL's count"), tables.Col("send (B)", "send"),
             tables.Col("recv (B)", "recv"), tables.Col("waived", justify="left", prose=True))


def plan_head(config: SweepConfig, plan: list) -> str:
    n = nranks(config)
    return (f"plan: engine {config.engine}{'/' + config.backend if config.backend else ''}, {n} rank(s)"
            f"{', GPUs ' + ','.join(map(str, config.gpus)) if config.gpus else ''}, dtype {config.dtype}, "
            f"sizes {config.sizes} -> {len(config.sizes.expand())} sizes, {len(plan)} measurements, "
            f"{config.iters} iters + {config.warmup} warm-up{', graph' if config.graph else ''}"
            f"{', check' if config.check else ''}, buffers {config.buffers}, timing {config.timing}, "
            f"alloc {config.alloc}")


def plan_rows(plan: list) -> tuple[tuple, list[list[str]]]:
    """The plan's columns and rows (the waived column only when something is waived)."""
    rows = []
    for p in plan:
        head = [p.op, "in" if p.inplace else "out", format_size(p.requested_bytes)]
        if p.case is None:
            rows.append(head + ["-"] * 5 + [p.waived])
        else:
            c = p.case
            rows.append(head + [f"{v:,}" for v in (c.bytes, c.count, c.nccl_count, c.send_bytes, c.recv_bytes)]
                        + [""])
    cols = PLAN_COLS if any(p.case is None for p in plan) else PLAN_COLS[:-1]
    return cols, [r[:len(cols)] for r in rows]


def print_plan(config: SweepConfig) -> None:
    plan = build_plan(config, nranks(config))
    con = tables.console()
    con.print(plan_head(config, plan), markup=False, highlight=False)
    cols, rows = plan_rows(plan)
    tables.render(con, None, cols, rows)


def run(config: SweepConfig, *, out_path: str | None, as_json: bool, csv_path: str | None, quiet: bool,
        resume: bool = False, echo: Say = print, warn: Say = print, note: Say = print) -> list:
    """Measure `config`, writing records to `out_path` (and `csv_path`), the table or JSON lines through
    `echo`, warnings through `warn`, other notes (what --resume skipped) through `note`; every output is opened before anything is measured. CheckFailed when --check found wrong
    elements (after every record was written)."""
    root = int(os.environ.get("RANK", "0")) == 0
    run_id = new_run_id()
    prior = _resume(out_path, note) if resume and root else None  # read before this run appends to it
    writer = ResultWriter(out_path if root else None)
    csv_fh = None
    if csv_path and root:
        check_output(csv_path, what="--csv")  # a FIFO would block here until a reader came
        csv_fh = open_output(csv_path, "w", what="--csv", newline="")  # never through a link
    csv_sink = CsvSink(csv_fh) if csv_fh else None
    if root and config.gpus:
        warning = topology.islands_warning(tuple(config.gpus))
        if warning:
            warn(warning)
    if root and out_path:
        snap = topology.snapshot()
        if snap is not None:
            writer.write({**header("topology", run_id=run_id, fabric=config.fabric), **snap})
    table = None
    if root and not quiet and not as_json:
        title = (f"fabricbench sweep: {config.engine}{'/' + config.backend if config.backend else ''}, "
                 f"{nranks(config)} rank(s), fabric {fabric_label(config.fabric)}")
        table = SweepTable(plan_length(config), title, progress=True)  # the ranks build the plan itself

    def csv_failed(e: OSError) -> OutputError:
        return OutputError(f"--csv {csv_path}: write failed ({e.strerror}); the records are in --out (when given)")

    def on_result(res) -> None:
        rec = res.to_dict()
        if as_json:
            echo(json.dumps(rec))
        if table is not None:
            table.add(rec)
        if csv_sink is not None:
            try:
                csv_sink.add(rec)
            except OSError as e:
                raise csv_failed(e) from None

    try:
        results = run_sweep(config, writer=writer, on_result=on_result, run_id=run_id, resume=prior)
    finally:
        if table is not None:
            table.close()
        writer.close()
        if csv_fh is not None:
            try:
                csv_fh.close()
            except OSError as e:
                raise csv_failed(e) from None
    if table is not None:  # is this normal? the published figure of the same platform (references/)
        for line in references.summary([r.to_dict() for r in results]):
            echo(line)
        busy = hostload.records_note(results)
        if busy:  # figures measured while other processes loaded the host (measuring/runner.py's laps)
            for line in fit_lines([f"{busy}: those figures may be low"]):  # a pipe's COLUMNS, as the table
                echo(line)
    bad = [r for r in results if r.status == Status.WRONG]
    if bad:
        worst = ", ".join(f"{r.op} {r.bytes} B: {r.wrong}" for r in bad[:4])
        raise CheckFailed(f"--check found wrong elements in {len(bad)} measurement(s) ({worst})")
    return results


def _resume(out_path: str, say: Say):
    def said(skipped: int, planned: int) -> None:
        say(f"resume: {skipped} of {planned} measurement(s) already recorded ok in {out_path}; skipped")

    return Resume.from_file(out_path, on_skip=said)
