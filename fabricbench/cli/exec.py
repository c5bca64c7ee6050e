"""`fabricbench exec`: run your own command under a fabric, and record how it went.

    fabricbench exec --fabric shaped:200mbit --out runs.jsonl -- torchrun --nproc-per-node 2 train.py
    fabricbench exec --fabric p2p-off --timeout 600 -- python3 train.py --profile prof/

This layer only maps flags to fabricbench.execute (fabricbench/jobs/command.py), which decides; the
command's own output is left as it is, and exec exits with the command's status.
"""

from __future__ import annotations

import click

from fabricbench.cli import warn
from fabricbench.cli.declared import declared_option, option
from fabricbench.cli.options import OUT_FILE
from fabricbench.cli.types import Passed, Program
from fabricbench.jobs.command import ExecConfig, execute


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@declared_option(ExecConfig, "fabric")
@declared_option(ExecConfig, "timeout_s")
@option(OUT_FILE, "out", help="Append the run's record (kind exec) to this JSONL.")
@click.argument("program", type=Program(), metavar="-- PROGRAM")
@click.argument("args", nargs=-1, type=Passed(), metavar="[ARGS]...")
def exec_command(fabric, timeout_s, out, program, args) -> int:
    """Run PROGRAM with its ARGS under a fabric as fabricbench's own runs get it; exit with its status."""
    result = execute(ExecConfig(command=(program, *args), fabric=fabric, timeout_s=timeout_s), out=out)
    for w in result.warnings:
        warn(w)
    rec = result.record
    if rec.get("transport_mismatch"):
        warn(rec["transport_mismatch"])
    said = rec.get("message") or "exit status 0"
    click.echo(f"exec: {said} after {rec['wall_s']:.2f} s on {rec['fabric']} (transport: {rec['transport']})"
               + (f"; record appended to {out}" if out else ""), err=True)
    return result.exit_status
