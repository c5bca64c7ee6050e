"""`fabricbench study`: the whole comparison on this node in one command, written up as a report.

    fabricbench study --gpus 0-3 --model dinov2-base --out run/               (fabrics default,p2p-off)
    fabricbench study --device cpu --nprocs 2 --fabrics default,shaped:1gbit --strategies ddp,fsdp \
        --model tiny-mistral --steps 5 --batch-size 2 --seq-len 32 --out lab/
    fabricbench study --out run/ --dry-run                                     (the units and a time estimate)
    fabricbench study --out run/ --resume                                      (continue; stored settings)

The options given on the command line become a StudyConfig (its defaults fill the rest); a bare `--resume`
gives none, so the config is the one stored in the directory (fabricbench.stored_study, studying/api.py).
"""

from __future__ import annotations

import dataclasses
import json

import click

from fabricbench.cli.declared import config_options, fields_of, given as declared_given, option
from fabricbench.cli.options import DRY_RUN, JSON, QUIET

from fabricbench.errors import FabricbenchError
from fabricbench.procs import exit_status, message
from fabricbench.results.status import Status
from fabricbench.studying import api as study_api
from fabricbench.studying.report import answer_lines
from fabricbench.studying.config import RESUMABLE, StudyConfig
from fabricbench.studying.format import render_plan


@click.command()
@config_options(StudyConfig, exclude=("extra",))
@option(DRY_RUN, "dry_run", help="Print the units and a time estimate; run nothing.")
@option(JSON, "as_json", help="Print the result (or, with --dry-run, the plan) as one JSON object.")
@option(QUIET, "quiet", help="No progress bar and no line per unit.")
def study(out, device, gpus, resume, dry_run, as_json, quiet, **options) -> None:
    """Topology, sweeps per fabric, scaling, train per strategy per fabric, estimate, relate, and a report."""
    import sys

    # the options the command line gave, and only those: a bare --resume takes the stored settings
    given = declared_given(click.get_current_context(),
                           [n for n in fields_of(StudyConfig) if n not in ("out", "resume")])
    if device == "cpu" and gpus:
        click.echo("warning: --gpus is ignored with --device cpu (use --nprocs)", err=True)
        given.pop("gpus")
    # --resume with only more rounds, budget or time (`--resume --max-repeats 15`): over the stored settings
    over = resume and given and set(given) <= RESUMABLE
    config = StudyConfig(out=out, resume=resume, **given) if (given or not resume) and not over else \
        dataclasses.replace(study_api.stored_study(out), **given)
    echo = None if (quiet or as_json) else (lambda line: click.echo(line, err=True))
    try:
        if dry_run:
            plan = study_api.study_plan(config)
            if as_json:
                click.echo(json.dumps(plan.to_dict(), indent=2))
            else:
                render_plan(plan)
            return
        res = study_api.study(config, echo=echo, progress=False if (quiet or as_json) else None)
    except KeyboardInterrupt as e:  # Ctrl-C (130), SIGTERM (procs.Terminated, 143) or SIGHUP (129)
        e.kept = (f"the finished units are in {out}/results.jsonl; continue with "  # type: ignore[attr-defined]
                  f"`fabricbench study --out {out} --resume`")
        click.echo(message(e), err=True)
        sys.exit(exit_status(e))
    if as_json:
        click.echo(json.dumps(res.to_dict(), indent=2))
        return
    if res.follower is not None:  # a node above 0: node 0 holds the records and the report
        f = res.follower
        click.echo(f"study: node {f['node']} ran its {f['shares']} share(s) of node 0's units; node 0 writes "
                   f"the results and the report to its --out")
        if f["exit"] != 0:
            raise FabricbenchError(f"node 0's study ended with exit {f['exit']} (a unit failed or stopped); "
                                   f"see its report")
        return
    counts = ", ".join(f"{n} {s}" for s, n in res.counts().items())
    click.echo(f"study: {len(res.units)} unit(s): {counts}")
    click.echo(f"results: {res.results_path}")
    click.echo(f"report:  {res.report_md}\n         {res.report_html}")
    if res.report_md is not None:  # the answer last, where a person looks after waiting
        for line in answer_lines(res.out_dir):
            click.echo(line)
    failed = [u for u in res.units if u.status in (Status.ERROR, Status.TIMEOUT)]
    if failed:  # the study went on and its report is written; the exit status still says a unit failed
        raise FabricbenchError(f"{len(failed)} unit(s) failed: " + ", ".join(f"{u.unit.name} ({u.status})"
                                                                          for u in failed[:6])
                               + f"; their logs are in {res.out_dir}/units/, `--resume` reruns them")
