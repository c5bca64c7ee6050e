"""The study report's "Where the time went": the study's wall, from its command's start to its last unit's
record, split into its units by kind and the study's own process, so that the rows add up to the wall; then
the train runs' phases (training/phases.py), which start at each train command's own start.

    fabricbench report DIR        (the section near the end of DIR/report.md)
"""

from __future__ import annotations

import statistics
from datetime import datetime
from typing import Any

from fabricbench.reporting.document import Document
from fabricbench.results.schema import TrainResult
from fabricbench.training import phases


def _epoch(stamp: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(stamp)).timestamp()
    except ValueError:
        return None


def wall_rows(plans: list[dict[str, Any]], units: dict[str, dict[str, Any]]) -> tuple[list[list[Any]], float] | None:
    """[[what, seconds]] whose seconds add up to the study's wall, and that wall; None where the plans do not
    say when their process started (a study of an older fabricbench). Per start (attempt) of the study: its
    command's start (the plan's timestamp less its process's age then) to its last unit's record; the units
    shown are each unit's latest attempt, a unit rerun by a later start counted in that start."""
    by_attempt: dict[str, list[dict[str, Any]]] = {}
    for u in units.values():
        by_attempt.setdefault(str(u.get("attempt")), []).append(u)
    kinds: dict[str, float] = {}
    own_start = own_between = wall = 0.0
    for plan in plans:
        mine = by_attempt.get(str((plan.get("study") or {}).get("attempt") or plan.get("run_id")), [])
        age, planned = (plan.get("study") or {}).get("process_age_s"), _epoch(plan.get("timestamp"))
        ends = [_epoch(u.get("timestamp")) for u in mine]
        if not mine:
            continue
        if not isinstance(age, (int, float)) or planned is None or None in ends:
            return None
        durations = [float(u.get("duration_s") or 0.0) for u in mine]
        first_start = min(e - d for e, d in zip(ends, durations))  # type: ignore[operator]
        span = max(ends) - planned + age  # type: ignore[type-var, operator]
        for u, d in zip(mine, durations):
            kinds[str(u.get("unit_kind"))] = kinds.get(str(u.get("unit_kind")), 0.0) + d
        start = age + max(0.0, first_start - planned)
        own_start += start
        own_between += max(0.0, span - start - sum(durations))
        wall += span
    if not wall:
        return None
    rows = [["the study's process: its start and plan (interpreter, imports, checks)", own_start]]
    rows += [[f"{kind} units", s] for kind, s in sorted(kinds.items(), key=lambda kv: -kv[1])]
    rows.append(["the study's process: between units (records, the next command)", own_between])
    return rows, wall


def time_section(doc: Document, plans: list[dict[str, Any]], units: dict, trains: list[TrainResult]) -> None:
    """How the study's wall divides, and how much of it measured anything (the timed steps); where a train
    run's own time went, median over the runs that recorded it."""
    total = sum(u.get("duration_s") or 0.0 for u in units.values())
    timed_runs = [r.phases for r in trains if isinstance(r.reached("phases"), dict)]
    if not total:
        return
    s = doc.section("Where the time went", intro="Every train run is a fresh set of processes, so that runs are "
                    "independent; what each costs before its first step is start-up, not measurement. A train "
                    "run's phases start at its command's own start.")
    timed = sum(p.get("timed", 0.0) for p in timed_runs)
    walled = wall_rows(plans, units)
    if walled is not None:
        rows, wall = walled
        s.text(f"The study took {wall:.0f} s from its command's start to its last unit's record (the report "
               f"written after it not counted); {timed:.1f} s of it ({timed / wall:.1%}) were timed training steps "
               f"({len(timed_runs)} run(s)).")
        s.table(["where", "s", "share"], [[w, round(x, 1), f"{x / wall:.1%}"] for w, x in rows]
                + [["total", round(wall, 1), "100.0%"]],
                caption="the study's wall, part by part: the rows add up to the total")
    else:
        s.text(f"The study's units took {total:.0f} s; {timed:.1f} s of it ({timed / total:.1%}) were timed "
               f"training steps ({len(timed_runs)} run(s)).")
    if not timed_runs:
        return
    start = [phases.startup_s(p) for p in timed_runs]
    s.text(f"The train runs' start-up (their command's start to their first step) took {sum(start):.0f} s in "
           f"all, {statistics.median(start):.1f} s per run (median).")
    rows = [[name, statistics.median(p.get(name, 0.0) for p in timed_runs),
             min(p.get(name, 0.0) for p in timed_runs), max(p.get(name, 0.0) for p in timed_runs),
             sum(p.get(name, 0.0) for p in timed_runs)]
            for name in (*phases.PHASES, "total") if any(name in p for p in timed_runs)]
    s.table(["phase", "median s", "min s", "max s", "all runs s"], rows,
            caption="one train run's wall time, phase by phase, over the study's train runs (fabricbench train "
                    "--verbose shows one run's)")
