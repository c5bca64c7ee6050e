"""Shared by `compare` and `scaling`: the sweep options they pass on, validated once, and the output file.

    fabricbench compare --fabrics default,p2p-off --gpus 0,1 --out cmp.jsonl
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from fabricbench.errors import UsageError


@dataclass(frozen=True, kw_only=True)
class SweepOptions:
    """What every child sweep gets (the names of `fabricbench sweep`'s options)."""

    ops: str
    sizes: str
    dtype: str
    iters: int
    warmup: int
    engine: str
    backend: str | None
    nprocs: int | None
    timeout_s: float | None

    def validate(self, gpus: tuple[int, ...] | None) -> None:
        """The checks the sweep would make, made before any child starts."""
        from fabricbench.measuring.api import make_config

        make_config(gpus=gpus, ops=self.ops, sizes=self.sizes, dtype=self.dtype, iters=self.iters,
                    warmup=self.warmup, engine=self.engine, backend=self.backend, nprocs=self.nprocs,
                    **({"timeout_s": self.timeout_s} if self.timeout_s else {}))

    @property
    def cpu_ranks(self) -> bool:
        return self.engine == "torch" and self.backend == "gloo"

    def args(self, gpus: tuple[int, ...] | None, nprocs: int | None = None) -> list[str]:
        from fabricbench.fabrics.child import sweep_args

        return sweep_args(ops=self.ops, sizes=self.sizes, dtype=self.dtype, iters=self.iters,
                          warmup=self.warmup, engine=self.engine, backend=self.backend,
                          nprocs=nprocs if nprocs is not None else self.nprocs, timeout_s=self.timeout_s,
                          gpus=gpus)


def sweep_options(f):
    """The click options compare and scaling share with `fabricbench sweep`."""
    for opt in reversed([
        click.option("--dtype", default="float32", show_default=True, help="Element type."),
        click.option("--iters", type=int, default=20, show_default=True, help="Timed iterations per size."),
        click.option("--warmup", type=int, default=5, show_default=True, help="Untimed iterations per size."),
        click.option("--engine", default="native", show_default=True, help="native or torch."),
        click.option("--backend", default=None, help="torch engine: nccl or gloo."),
        click.option("--timeout", "timeout_s", type=float, default=None, help="Seconds before a hung step is aborted."),
        click.option("--out", "out_path", default=None, help="Write the combined JSONL records here."),
        click.option("--plot", "plot_path", default=None, help="Write a PNG plot here."),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table."),
    ]):
        f = opt(f)
    return f


def open_output(out_path: str | None, run_id: str, fabric: str, topo=None):
    """The combined results file, opened (so checked) before anything runs, topology snapshot first."""
    from fabricbench.results.writer import ResultWriter
    from fabricbench.topology import snapshot_record

    writer = ResultWriter(out_path)
    rec = snapshot_record(run_id, fabric, topo=topo)
    if rec is not None:
        writer.write(rec)
    return writer


def check_plot_path(path: str | None) -> None:
    import os

    if path is None:
        return
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
        raise UsageError(f"--plot {path}: cannot write there; choose a writable path")
    if not path.lower().endswith(".png"):
        raise UsageError(f"--plot {path}: the plot is a PNG; name it *.png")


def adopt(rec: dict[str, Any], run_id: str) -> dict[str, Any]:
    """A child's record joins this run: its own run id is kept in extra.child_run_id."""
    rec = dict(rec)
    rec["extra"] = {**(rec.get("extra") or {}), "child_run_id": rec.get("run_id")}
    rec["run_id"] = run_id
    return rec


def run_and_keep(fabric, args: list[str], writer, run_id: str, *, what: str, kept: str,
                 extra: dict[str, Any] | None = None):
    """One child sweep under `fabric`: report its warnings and failure, write its records into this run.

    `what` names the run in messages ("fabric p2p-off", "4 GPUs cross-island"); `kept` says what survives
    a failure ("other fabrics' results"). Returns the ChildRun with its records adopted.
    """
    from fabricbench.fabrics.child import run_child

    # Written as the child measures them: an interrupted compare keeps every finished measurement.
    run = run_child(fabric, args, extra=extra, on_record=lambda rec: writer.write(adopt(rec, run_id)))
    for w in run.warnings:
        click.echo(f"warning: {w}", err=True)
    if run.waived:
        click.echo(f"{what} waived: {run.waived}", err=True)
    if run.error:
        click.echo(f"{what} failed: {run.error} ({kept} are kept)", err=True)
    if run.mismatch:
        click.echo(f"warning: {run.mismatch}", err=True)
    run.records = [adopt(r, run_id) for r in run.records]
    return run


def metric_for(records: list[dict[str, Any]]) -> tuple[str, str | None]:
    """busbw, unless every record is single-rank (busbw factor 0): then algbw, with the reason."""
    if records and all((r.get("nranks") or 0) <= 1 for r in records):
        return "algbw_gbps", "n = 1: the busbw factor is 0, so algbw is compared"
    return "busbw_gbps", None
