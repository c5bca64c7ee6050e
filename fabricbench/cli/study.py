"""`fabricbench study`: the whole comparison on this node in one command, written up as a report.

    fabricbench study --gpus 0-3 --model dinov2-base --out run/               (fabrics default,p2p-off)
    fabricbench study --device cpu --nprocs 2 --fabrics default,shaped:1gbit --strategies ddp,fsdp \
        --model tiny-mistral --steps 5 --batch-size 2 --seq-len 32 --out lab/
    fabricbench study --out run/ --dry-run                                     (the units and a time estimate)
    fabricbench study --out run/ --resume                                      (continue; stored settings)

Only the options given on the command line are passed on: fabricbench.study (fabricbench/study/api.py)
fills the defaults, so a bare `--resume` takes the settings stored in the directory.
"""

from __future__ import annotations

import json

import click

from fabricbench.errors import FabricbenchError
from fabricbench.procs import Terminated, exit_status
from fabricbench.report import table as tables
from fabricbench.results.status import Status
from fabricbench.study import api as study_api, records
from fabricbench.study.units import DONE, UNIT_KINDS


def _fmt_s(s: float) -> str:
    return f"{s / 60:.1f} min" if s >= 90 else f"{s:.0f} s"


@click.command()
@click.option("--out", "out", required=True, type=click.Path(file_okay=False),
              help="Study directory: results.jsonl, units/, report.md, report.html.")
@click.option("--gpus", default=None, help="GPUs to study, e.g. 0-3 (default: all visible).")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default="cuda", show_default=True)
@click.option("--nprocs", type=int, default=2, show_default=True, help="Ranks with --device cpu (gloo).")
@click.option("--fabrics", default=None,
              help="Comma list (default: default,p2p-off on GPUs, default on CPU); shaped:RATE on CPU.")
@click.option("--strategies", default=None, help="Comma list of ddp, zero1, zero2, zero3, fsdp (default: all).")
@click.option("--model", default=None, help="A model name (fabricbench train --list).")
@click.option("--model-config", type=click.Path(dir_okay=False), default=None, help="A transformers config JSON.")
@click.option("--steps", type=int, default=8, show_default=True, help="Train steps at least, warm-up included.")
@click.option("--max-steps", type=int, default=None, help="Cap on train steps while the CI exceeds --target-ci.")
@click.option("--target-ci", type=float, default=0.03, show_default=True,
              help="Steps and repeats go on until the median's 95% CI is within this fraction.")
@click.option("--repeats", type=int, default=None,
              help="Train runs per strategy and fabric, fresh processes, interleaved (default: 3, more to --target-ci).")
@click.option("--max-repeats", type=int, default=5, show_default=True, help="Cap on train runs per strategy and fabric.")
@click.option("--repeat-budget", "repeat_budget_s", type=float, default=1800.0, show_default=True,
              help="Seconds of study after which no repeat beyond the minimum starts.")
@click.option("--warmup-steps", type=int, default=3, show_default=True, help="Untimed first train steps.")
@click.option("--batch-size", type=int, default=None,
              help="Samples per GPU per step (default: 8 on CPU; on GPUs the study picks it, doubling while it pays).")
@click.option("--seq-len", type=int, default=512, show_default=True, help="Tokens per sample (causal LM).")
@click.option("--image-size", type=int, default=224, show_default=True, help="Pixels per side (images).")
@click.option("--precision", type=click.Choice(["bf16", "fp16", "fp32"]), default=None,
              help="Train precision (default: bf16 on GPUs, fp32 on CPU).")
@click.option("--sizes", default=None, help="Sweep sizes (default: covering what the traces sent).")
@click.option("--iters", type=int, default=None, help="Sweep timed iterations per size (GPU 20, CPU 5).")
@click.option("--warmup", type=int, default=None, help="Sweep warm-up iterations per size.")
@click.option("--train-timeout", "train_timeout_s", type=float, default=1800.0, show_default=True,
              help="Seconds one train unit may take.")
@click.option("--sweep-timeout", "sweep_timeout_s", type=float, default=900.0, show_default=True,
              help="Seconds one sweep unit may take.")
@click.option("--stall-timeout", "stall_timeout_s", type=float, default=None,
              help="Seconds a unit's rank may stop (SIGSTOP, a dead node) before the unit ends naming it "
                   "[default: train's and sweep's own].")
@click.option("--resume", is_flag=True, help="Continue the study in --out: skip the units recorded ok.")
@click.option("--dry-run", is_flag=True, help="Print the units and a time estimate; run nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the result (or the plan) as one JSON object.")
@click.option("--quiet", is_flag=True, help="No progress bar and no line per unit.")
def study(out, gpus, device, nprocs, fabrics, strategies, model, model_config, steps, max_steps, target_ci, repeats,
          max_repeats, repeat_budget_s, warmup_steps, batch_size, seq_len, image_size, precision, sizes, iters,
          warmup, train_timeout_s, sweep_timeout_s, resume, dry_run, as_json, quiet, stall_timeout_s=None) -> None:
    """Topology, sweeps per fabric, scaling, train per strategy per fabric, estimate, relate, and a report."""
    import sys

    ctx = click.get_current_context()
    given = {}
    for name, value in dict(gpus=gpus, device=device, nprocs=nprocs, fabrics=fabrics, strategies=strategies,
                            model=model, model_config=model_config, steps=steps, max_steps=max_steps,
                            target_ci=target_ci or None, repeats=repeats, max_repeats=max_repeats,
                            repeat_budget_s=repeat_budget_s, warmup_steps=warmup_steps,
                            batch_size=batch_size, seq_len=seq_len, image_size=image_size, precision=precision,
                            sizes=sizes, iters=iters, warmup=warmup, train_timeout_s=train_timeout_s,
                            sweep_timeout_s=sweep_timeout_s, stall_timeout_s=stall_timeout_s).items():
        if ctx.get_parameter_source(name).name != "DEFAULT":
            given[name] = value
    if device == "cpu" and gpus:
        click.echo("warning: --gpus is ignored with --device cpu (use --nprocs)", err=True)
        given.pop("gpus")
    echo = None if (quiet or as_json) else (lambda line: click.echo(line, err=True))
    try:
        res = study_api.study(out, resume=resume, dry_run=dry_run, echo=echo,
                        progress=False if (quiet or as_json) else None, **given)
    except KeyboardInterrupt as e:  # Ctrl-C (130) or SIGTERM (procs.Terminated, 143)
        word = "Terminated" if isinstance(e, Terminated) else "Interrupted"
        click.echo(f"{word}: the finished units are in {out}/results.jsonl; continue with "
                   f"`fabricbench study --out {out} --resume`", err=True)
        sys.exit(exit_status(e))
    if as_json:
        click.echo(json.dumps(res.to_dict(), indent=2))
        return
    if dry_run:
        _print_plan(res)
        return
    counts = ", ".join(f"{n} {s}" for s, n in res.counts().items())
    click.echo(f"study: {len(res.units)} unit(s): {counts}")
    click.echo(f"results: {res.results_path}")
    click.echo(f"report:  {res.report_md}\n         {res.report_html}")
    failed = [u for u in res.units if u.status in (Status.ERROR, Status.TIMEOUT)]
    if failed:  # the study went on and its report is written; the exit status still says a unit failed
        raise FabricbenchError(f"{len(failed)} unit(s) failed: " + ", ".join(f"{u.unit.name} ({u.status})"
                                                                          for u in failed[:6])
                               + f"; their logs are in {res.out_dir}/units/, `--resume` reruns them")


PLAN_COLS = (tables.Col("#", key=True), tables.Col("unit", justify="left", key=True),
             tables.Col("time", justify="left"), tables.Col("what it measures", justify="left", prose=True))


def _print_plan(res) -> None:
    existing = records.load(res.out_dir, must_exist=False)
    c = res.config
    where = f"{c.nprocs} CPU ranks (gloo)" if c.device == "cpu" else f"GPUs {','.join(map(str, c.gpus))}"
    con = tables.console()
    say = lambda text: con.print(text, markup=False, highlight=False)  # noqa: E731 - prose wraps at words
    say(f"study of {c.model_label} on {where}; fabrics {', '.join(c.fabrics_shown)}; strategies {', '.join(c.strategies)}")
    rows = []
    for i, u in enumerate(res.plan, 1):
        skip = existing.status(u.name) in DONE
        rows.append([str(i), u.name, "done, skipped" if skip else f"~{_fmt_s(u.estimate_s)}",
                     UNIT_KINDS.get(u.kind).description])
    tables.render(con, None, PLAN_COLS, rows)
    say(f"estimate: ~{_fmt_s(res.estimate_s)} for the units to run (rough: start-up plus per-step and "
        f"per-measurement costs)")
