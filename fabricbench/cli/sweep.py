"""`fabricbench sweep`: time collectives over a GPU set and a range of sizes.

    fabricbench sweep --gpus 0-7 --ops all_reduce,all_gather --sizes 8-8G --check --out run.jsonl
    fabricbench sweep --engine torch --backend gloo --nprocs 2 --sizes 1K-1M    (no GPU)
    fabricbench sweep --dry-run                                                  (the expanded plan)

This module only maps flags onto SweepConfig (fabricbench/measuring/config.py); validation lives in
fabricbench/measuring/api.py and the measuring in fabricbench/measuring/runner.py.
"""

from __future__ import annotations

import json
import os
import sys

import click

import fabricbench.gpus  # looked up on call: tests stand in for visible_gpu_count
from fabricbench import topology
from fabricbench.collectives import COLLECTIVES, DEFAULT_OPS
from fabricbench.errors import CheckFailed, UsageError
from fabricbench.fabrics import get_fabric
from fabricbench.files import OutputError, check_output, refuse_collisions
from fabricbench.measuring.api import make_config, nranks, resolve_devices, uses_gpus
from fabricbench.measuring.plan import build_plan
from fabricbench.measuring.resume import Resume
from fabricbench.measuring.runner import new_run_id, run_sweep
from fabricbench.report import table as tables
from fabricbench.report.table import CsvSink, SweepTable
from fabricbench.results.context import fabric_label
from fabricbench.results.schema import header
from fabricbench.results.status import Status
from fabricbench.results.writer import ResultWriter
from fabricbench.sizes import format_size



@click.command(context_settings={"show_default": True})
@click.option("--gpus", default=None, help="GPU list: 0-7, 0,2,5, 0-3,6 (rank order). Default: all visible.")
@click.option("--ops", default=",".join(DEFAULT_OPS), help="Comma list of collectives (see --list-ops).")
@click.option("--sizes", default="8-8G:x4", help="8-8G, 1M-1G:x2 (factor) or a list 64K,1M (a bare G is GiB, 2^30 B; GB is 10^9 B).")
@click.option("--dtype", default="float32", help="float32, bfloat16, float16, float64, int32, int8, uint8.")
@click.option("--iters", type=int, default=20, help="Timed iterations per size (graph mode: replays).")
@click.option("--warmup", type=int, default=5, help="Untimed iterations per size.")
@click.option("--adaptive", type=float, default=None,
              help="Iterate until the median's 95% CI half-width is within this fraction (e.g. 0.02).")
@click.option("--max-iters", type=int, default=1000, help="Cap on iterations in the adaptive mode.")
@click.option("--inplace", "mode", flag_value="inplace", help="In-place only.")
@click.option("--out-of-place", "mode", flag_value="out-of-place", default=True, help="Out-of-place only.")
@click.option("--both", "mode", flag_value="both", help="Out-of-place and in-place.")
@click.option("--graph", is_flag=True, help="Time CUDA-graph replays (small-message latency).")
@click.option("--graph-iters", type=int, default=100, help="Iterations captured in one graph.")
@click.option("--check", is_flag=True, help="Verify results on exactly known inputs; wrong fails the run.")
@click.option("--engine", default="native", help="native (compiled, NCCL) or torch (torch.distributed).")
@click.option("--backend", default=None, help="torch engine: nccl or gloo. Default: nccl with GPUs, else gloo.")
@click.option("--nprocs", type=int, default=None, help="Start N local ranks, one process each.")
@click.option("--timeout", "timeout_s", type=float, default=300.0, help="Seconds before a hung step is aborted.")
@click.option("--stall-timeout", "stall_timeout_s", type=float, default=None,
              help="Seconds a rank's heartbeat may stop (SIGSTOP, a dead node) before the run ends naming it "
                   "[default: --timeout + 5 for --nprocs ranks, 60 under torchrun/srun].")
@click.option("--nccl-lib", default=None, help="libnccl.so.2 to load (else $FABRICBENCH_NCCL_LIBRARY, torch's, system).")
@click.option("--fabric", default="default",
              help="Fabric to measure under: default, p2p-off, net, shaped:RATE or name:VAR=VAL[,VAR=VAL] "
                   "(see `fabricbench fabrics`); applied to a fresh child process.")
@click.option("--seed", type=int, default=None, help="Seed of the --check inputs (default: fresh).")
@click.option("--buffers", default="rotate",
              help="rotate: cycle buffer sets spanning ~2x the L2 (cold cache); reuse: every iteration on "
                   "one set (warm L2 below ~L2/2; nccl-tests' footprint at -b S -e S).")
@click.option("--timing", default="events",
              help="events: a CUDA event per iteration behind a blocking kernel (device time); loop: host "
                   "clock around the whole loop / count, as nccl-tests (launch cost included).")
@click.option("--alloc", default="cuda",
              help="Native engine buffers from cuda (cudaMalloc, as PyTorch) or nccl (ncclMemAlloc, as nccl-tests).")
@click.option("--out", "out_path", default=None, help="Append JSONL records here, one per measurement.")
@click.option("--resume", is_flag=True,
              help="Skip what --out already holds as ok (same op, size, dtype, ranks, GPUs, engine, fabric, settings).")
@click.option("--json", "as_json", is_flag=True, help="Print records as JSON lines instead of the table.")
@click.option("--csv", "csv_path", default=None, help="Also write a CSV of the results here.")
@click.option("--dry-run", is_flag=True, help="Print the expanded plan and exit.")
@click.option("--quiet", is_flag=True, help="No table (records still go to --out).")
@click.option("--list-ops", is_flag=True, help="List the collectives and exit.")
def sweep(gpus, ops, sizes, dtype, iters, warmup, adaptive, max_iters, mode, graph, graph_iters, check, engine,
          backend, nprocs, timeout_s, nccl_lib, fabric, seed, buffers, timing, alloc, out_path, resume, as_json,
          csv_path, dry_run, quiet, list_ops, stall_timeout_s=None):
    """Time NCCL collectives over a GPU set and a range of sizes (nccl-tests' algbw and busbw)."""
    if list_ops:
        _list_ops()
        return
    config = make_config(
        gpus=gpus, ops=ops, sizes=sizes, dtype=dtype, iters=iters, warmup=warmup, adaptive=adaptive,
        max_iters=max_iters, inplace=mode, graph=graph, graph_iters=graph_iters, check=check, engine=engine,
        backend=backend, nprocs=nprocs, timeout_s=timeout_s, nccl_lib=nccl_lib, fabric=fabric, seed=seed,
        buffers=buffers, timing=timing, alloc=alloc, stall_timeout_s=stall_timeout_s)
    refuse_collisions({"--out": out_path, "--csv": csv_path}, {"--nccl-lib": nccl_lib})
    if resume and not out_path:
        raise UsageError("--resume skips what --out already holds; give --out FILE (the earlier run's file)")
    if dry_run:  # a plan needs no GPU here: named GPUs as named, else this machine's, else one GPU
        get_fabric(config.fabric)  # an unknown or malformed fabric is found, as a run would find it
        if config.gpus is None and _plan_without_gpus(config):
            import dataclasses

            click.echo("note: no GPU is visible here: the plan for one GPU (name others with --gpus)",
                       err=True)
            config = dataclasses.replace(config, gpus=(0,))
        elif config.gpus is None:
            config = _with_gpus(config, gpus)
        _print_plan(config)
        return
    config = _with_gpus(config, gpus)
    _run(config, out_path=out_path, as_json=as_json, csv_path=csv_path, quiet=quiet, resume=resume)


def _plan_without_gpus(config) -> bool:
    """A dry run of a GPU sweep on a machine that shows no GPU."""

    return uses_gpus(config) and fabricbench.gpus.visible_gpu_count() == 0


def _with_gpus(config, gpus_text=None):
    """The library's defaults for this machine (fabricbench/measuring/api.py), warnings printed."""
    config, notes = resolve_devices(config, gpus_text)
    for note in notes:
        click.echo(f"warning: {note}", err=True)
    return config


def _nranks(config) -> int:
    return nranks(config)


def _list_ops() -> None:
    for c in COLLECTIVES:
        click.echo(f"{c.name:16s} busbw = algbw x {c.factor_text:9s} {c.description}")


PLAN_COLS = (tables.Col("op", justify="left", key=True), tables.Col("place", justify="left"),
             tables.Col("size", key=True), tables.Col("S (B)", legend="S = bytes timed"), tables.Col("count"),
             tables.Col("nccl_count", "nccl", "nccl = NCCL's count"), tables.Col("send (B)", "send"),
             tables.Col("recv (B)", "recv"), tables.Col("waived", justify="left", prose=True))


def _print_plan(config) -> None:
    n = _nranks(config)
    plan = build_plan(config, n)
    con = tables.console()
    con.print(f"plan: engine {config.engine}{'/' + config.backend if config.backend else ''}, {n} rank(s)"
              f"{', GPUs ' + ','.join(map(str, config.gpus)) if config.gpus else ''}, dtype {config.dtype}, "
              f"sizes {config.sizes} -> {len(config.sizes.expand())} sizes, {len(plan)} measurements, "
              f"{config.iters} iters + {config.warmup} warm-up{', graph' if config.graph else ''}"
              f"{', check' if config.check else ''}, buffers {config.buffers}, timing {config.timing}, "
              f"alloc {config.alloc}", markup=False, highlight=False)
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
    tables.render(con, None, cols, [r[:len(cols)] for r in rows])


def _run(config, *, out_path, as_json, csv_path, quiet, resume=False) -> None:
    root = int(os.environ.get("RANK", "0")) == 0
    run_id = new_run_id()
    # Open every output before measuring: an unwritable path fails now, not after an hour of sweeping.
    prior = _resume(out_path) if resume and root else None  # read before this run appends to it
    writer = ResultWriter(out_path if root else None)
    csv_fh = None
    if csv_path and root:
        check_output(csv_path, what="--csv")  # a FIFO would block here until a reader came
        try:
            csv_fh = open(csv_path, "w", newline="", encoding="utf-8")
        except OSError as e:
            raise UsageError(f"--csv {csv_path}: cannot write there ({e.strerror})") from None
    csv_sink = CsvSink(csv_fh) if csv_fh else None
    if root and config.gpus:
        warning = _islands_warning(config.gpus)
        if warning:
            click.echo(f"warning: {warning}", err=True)
    if root and out_path:
        snap = _topology_snapshot()
        if snap is not None:
            writer.write({**header("topology", run_id=run_id, fabric=config.fabric), **snap})
    table = None
    if root and not quiet and not as_json:
        total = len(build_plan(config, _nranks(config)))
        title = (f"fabricbench sweep: {config.engine}{'/' + config.backend if config.backend else ''}, "
                 f"{_nranks(config)} rank(s), fabric {fabric_label(config.fabric)}")
        table = SweepTable(total, title, progress=True)

    def on_result(res) -> None:
        rec = res.to_dict()
        if as_json:
            click.echo(json.dumps(rec))
        if table is not None:
            table.add(rec)
        if csv_sink is not None:
            try:
                csv_sink.add(rec)
            except OSError as e:
                raise OutputError(f"--csv {csv_path}: write failed ({e.strerror}); the records are in --out "
                                  f"(when given)") from None

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
                raise OutputError(f"--csv {csv_path}: write failed ({e.strerror}); the records are in --out "
                                  f"(when given)") from None
    bad = [r for r in results if r.status == Status.WRONG]
    if bad:
        worst = ", ".join(f"{r.op} {r.bytes} B: {r.wrong}" for r in bad[:4])
        raise CheckFailed(f"--check found wrong elements in {len(bad)} measurement(s) ({worst})")


def _resume(out_path):
    def said(skipped: int, planned: int) -> None:
        click.echo(f"resume: {skipped} of {planned} measurement(s) already recorded ok in {out_path}; "
                   f"skipped", err=True)

    return Resume.from_file(out_path, on_skip=said)


def _islands_warning(gpus):
    return topology.islands_warning(tuple(gpus))


def _topology_snapshot():
    return topology.snapshot()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(sweep())
