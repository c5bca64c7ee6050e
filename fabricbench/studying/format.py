"""What `fabricbench study --dry-run` prints: the units in run order, each with its time and interval (or
"done, skipped" for a --resume), what it measures, and the total with where its figures came from.

    render_plan(fabricbench.study_plan(fabricbench.StudyConfig(out="run", ...)))
"""

from __future__ import annotations

from typing import Any

from fabricbench.reporting import table as tables
from fabricbench.studying import records
from fabricbench.studying.units import DONE, UNIT_KINDS

PLAN_COLS = (tables.Col("#", key=True), tables.Col("unit", justify="left", key=True),
             tables.Col("time", justify="left"), tables.Col("what it measures", justify="left", prose=True))


def render_plan(res: Any) -> None:
    """Print a dry run's plan (a StudyPlan) on the terminal's console."""
    existing = records.load(res.out_dir, must_exist=False)
    c = res.config
    where = f"{c.nprocs} CPU ranks (gloo)" if c.device == "cpu" else f"GPUs {','.join(map(str, c.gpus))}"
    if c.nnodes > 1:
        where = f"{c.nnodes} nodes × {where}"
    con = tables.console()
    say = lambda text: con.print(text, markup=False, highlight=False)  # noqa: E731 - prose wraps at words
    say(f"study of {c.model_label} on {where}; fabrics {', '.join(c.fabrics_shown)}; strategies {', '.join(c.strategies)}")
    est = res.estimate
    rows = []
    for i, u in enumerate(res.plan, 1):
        skip = existing.status(u.name) in DONE
        time = "done, skipped" if skip else "waived" if u.waived else est.units[u.name].text() + (
            ", if needed" if u.name in est.optional else "")
        rows.append([str(i), u.name, time, f"waived: {u.waived}" if u.waived else UNIT_KINDS.get(u.kind).description])
    tables.render(con, None, PLAN_COLS, rows)
    say(f"estimate: {est.total.text()} in all, start and report included{_basis(est)}")


def _basis(est: Any) -> str:
    """Where the figures of the units to run came from, and the load they were scaled to."""
    words = {"this study": "this study's recorded runs", "this host": "earlier studies on this host",
             "first guess": "a first guess"}
    by: dict[str, list[str]] = {}
    for name, d in est.units.items():
        if name in est.todo:
            for src in d.source.split(", "):
                by.setdefault(src, []).append(name)
    parts = [f"{words[k]} ({', '.join(by[k]) if len(by[k]) <= 3 else f'{len(by[k])} units'})"
             for k in words if k in by]
    said = "; from " + " and ".join(parts) if parts else ""
    load = (f"; scaled to the load now: other processes use {est.load_cpus:.1f} of {est.cpus} CPUs"
            if est.load_cpus is not None else "; the host's load could not be read")
    rounds = "; a round marked \"if needed\" counts half" if est.optional & est.todo else ""
    return said + load + rounds
