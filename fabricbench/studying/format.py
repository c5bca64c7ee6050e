"""What `fabricbench study --dry-run` prints: the units in run order, each with its rough time (or "done,
skipped" for a --resume), what it measures, and the total.

    render_plan(fabricbench.study(fabricbench.StudyConfig(out="run", ...), dry_run=True))
"""

from __future__ import annotations

from typing import Any

from fabricbench.report import table as tables
from fabricbench.studying import records
from fabricbench.studying.units import DONE, UNIT_KINDS

PLAN_COLS = (tables.Col("#", key=True), tables.Col("unit", justify="left", key=True),
             tables.Col("time", justify="left"), tables.Col("what it measures", justify="left", prose=True))


def duration(s: float) -> str:
    return f"{s / 60:.1f} min" if s >= 90 else f"{s:.0f} s"


def render_plan(res: Any) -> None:
    """Print a dry run's plan (a StudyResult) on the terminal's console."""
    existing = records.load(res.out_dir, must_exist=False)
    c = res.config
    where = f"{c.nprocs} CPU ranks (gloo)" if c.device == "cpu" else f"GPUs {','.join(map(str, c.gpus))}"
    if c.nnodes > 1:
        where = f"{c.nnodes} nodes × {where}"
    con = tables.console()
    say = lambda text: con.print(text, markup=False, highlight=False)  # noqa: E731 - prose wraps at words
    say(f"study of {c.model_label} on {where}; fabrics {', '.join(c.fabrics_shown)}; strategies {', '.join(c.strategies)}")
    rows = []
    for i, u in enumerate(res.plan, 1):
        skip = existing.status(u.name) in DONE
        rows.append([str(i), u.name, "done, skipped" if skip else "waived" if u.waived else f"~{duration(u.estimate_s)}",
                     f"waived: {u.waived}" if u.waived else UNIT_KINDS.get(u.kind).description])
    tables.render(con, None, PLAN_COLS, rows)
    say(f"estimate: ~{duration(res.estimate_s)} for the units to run (rough; a train run: its measured start-up "
        f"and teardown plus its steps, from this study's recorded runs once there are some)")
