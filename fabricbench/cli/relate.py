"""`fabricbench relate`: what each fabric's bus bandwidth does to each strategy's step, observed and predicted.

    fabricbench relate sweeps.jsonl train.jsonl
    fabricbench relate lab/*.jsonl --reference default --json
    fabricbench relate lab/*.jsonl --plot relate.png
    fabricbench relate --trace prof/ sweeps.jsonl         (your own loop's torch.profiler trace: usertrace.py)
    fabricbench relate --explain                          (the step model's formula and the columns)

This layer only maps flags to fabricbench.relate (fabricbench/relating/relate_run.py), whose config declares
--reference and --trace and decides; what did not match goes to stderr, one line each.
"""

from __future__ import annotations

import sys

import click

from fabricbench.cli.types import InputPath
from fabricbench.cli.declared import declared_option, option
from fabricbench.cli.options import JSON, PLOT

import fabricbench
from fabricbench.files import dumps, nonfinite_paths, refuse_collisions
from fabricbench.measuring.child_sweeps import check_plot_path
from fabricbench.exitcodes import Exit
from fabricbench.relating.format import explain_model, render
from fabricbench.relating.plot import plot_relate
from fabricbench.relating.relate_run import RelateConfig
from fabricbench.reporting import table as tables
from fabricbench.reporting.plot import pyplot


@click.command()
@click.argument("files", nargs=-1, type=InputPath())
@declared_option(RelateConfig, "reference")
@declared_option(RelateConfig, "traces", multiple=True)
@option(JSON, "as_json", help="Print one JSON object (reference, formula, rows, problems).")
@option(PLOT, "plot_path", help="Write busbw drop against slowdown to this PNG.")
@click.option("--explain", is_flag=True, help="Also print the step model's formula and what each column means "
                                              "(alone: only those).")
def relate(files, reference, as_json, plot_path, traces=(), explain=False) -> None:
    """Join sweep/compare records with train records (or a profiler trace) and predict each fabric's step time."""
    if explain and not files and not traces:  # what the model is, without a run to relate
        explain_model()
        return
    config = RelateConfig(inputs=files, reference=reference, traces=traces)  # no inputs: refused here
    check_plot_path(plot_path)  # the plot is drawn here, from the result: what the command shows
    refuse_collisions({"--plot": plot_path}, {f: f for f in files})
    if plot_path:
        pyplot()  # matplotlib missing is bad input too: say so before any work
    if traces:
        refuse_collisions({"--plot": plot_path}, {t: t for t in traces})
    result = fabricbench.relate(config)
    err = tables.console(stderr=True)  # notes wrap at words on a terminal, stay whole lines in a log
    for p in result.problems:
        err.print(f"note: {p}", markup=False, highlight=False)
    if plot_path:
        plot_relate(result, plot_path)
    if as_json:
        doc = result.to_dict()
        # JSON has no NaN: such a figure is written as null, and the note says which
        doc["problems"] += [f"{p} is not a finite number; written as null" for p in nonfinite_paths(doc)]
        click.echo(dumps(doc, indent=2))
    else:
        render(result, explain=explain)
        if plot_path:
            click.echo(f"plot: {plot_path}", err=True)
    if not result.rows:
        click.echo("relate: no strategy could be related (see the notes above)", err=True)
        sys.exit(Exit.FAILED)
