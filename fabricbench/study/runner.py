"""Run a study's units one after another, each in its own process under its fabric, appending as they end.

    fabricbench study --device cpu --nprocs 2 --fabrics default,shaped:1gbit --model tiny-mistral --out lab/

Every unit appends its records and then one "study_unit" record to DIR/results.jsonl as it finishes
(flushed and synced: a crash loses at most the unit in flight). A unit that fails, times out or runs out
of memory is a result; the next unit runs. Ctrl-C (or SIGTERM) kills the child's process group, records
the unit as "interrupted" and stops; `--resume` then skips the units recorded ok (units.DONE) and runs
the rest. A fabric that cannot be applied here (shaped without root) makes its units "waived".
"""

from __future__ import annotations

import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from fabricbench import jobs
from fabricbench.errors import FabricbenchError, FabricWaived, UsageError
from fabricbench.fabrics import get_fabric
from fabricbench.fabrics.model import Fabric
from fabricbench import procs
from fabricbench.jobs import secrets, store
from fabricbench.progress import Progress
from fabricbench.results import ResultWriter, header
from fabricbench.results.status import Status
from fabricbench.study import records as study_records
from fabricbench.study.config import StudyConfig
from fabricbench.study.units import DONE, UNIT_KINDS, Context, Outcome, Unit, shown


@dataclass(kw_only=True)
class UnitRun:
    unit: Unit
    status: str  # units.STATUSES, or "skipped" (recorded done by an earlier attempt)
    duration_s: float = 0.0
    message: str | None = None
    commands: list[str] = field(default_factory=list)


def fabric_of(config: StudyConfig, name: str | None) -> Fabric | None:
    """The fabric a unit names (by Fabric.name: units never carry a spec's values), parsed from the study's
    specs; None for a unit with no fabric (estimate, advice), whose children run in this environment."""
    if name is None:
        return None
    for spec in config.fabrics:
        fabric = get_fabric(spec)
        if fabric.name == name:
            return fabric
    raise AssertionError(f"unit fabric {name!r} is not one of the study's")


def prepare(config: StudyConfig, *, resume: bool) -> study_records.StudyRecords:
    """Refuse to mix studies: a directory with results needs --resume, and --resume the same settings."""
    out = Path(config.out)
    if resume:  # a torn last line (a killed study) is cut off with a warning; its unit runs again
        store.read_repaired(out / study_records.RESULTS)
    existing = study_records.load(out, must_exist=False)
    if not resume:
        if (out / study_records.RESULTS).exists():
            raise UsageError(f"--out {out} already holds a study ({study_records.RESULTS}); add --resume to "
                             f"continue it, `fabricbench report {out}` to rebuild its report, or choose "
                             f"another directory")
        return existing
    if existing.plan is not None:
        stored = StudyConfig.from_dict(existing.plan["study"]["config"])
        diff = stored.differences(config)
        if diff:
            raise UsageError(f"--resume: {out} holds a study with other settings ({'; '.join(diff)}); "
                             f"rerun with the stored settings (`fabricbench study --out {out} --resume` alone "
                             f"takes them) or choose another --out")
    return existing


def run_units(config: StudyConfig, units: list[Unit], *, resume: bool, echo: Callable[[str], None] | None = None,
              progress: bool | None = None) -> list[UnitRun]:
    """Run (or skip) every unit; returns what happened to each. Raises KeyboardInterrupt after recording."""
    out = Path(config.out)
    existing = prepare(config, resume=resume)
    (out / "units").mkdir(parents=True, exist_ok=True)
    attempt = uuid.uuid4().hex[:12]
    writer = ResultWriter(out / study_records.RESULTS)
    writer.write({**header("plan", run_id=attempt), "study": {
        "attempt": attempt, "resume": resume, "config": config.to_dict(),
        "units": [{"name": u.name, "kind": u.kind, "fabric": u.fabric, "strategy": u.strategy,
                   "estimate_s": u.estimate_s} for u in units],
        "argv": [secrets.mask(a, config.fabrics) for a in sys.argv]}})
    ctx = Context(config=config, out_dir=out, records=list(existing.records))
    done = {name for name, u in existing.units.items() if u.get("status") in DONE}
    results: list[UnitRun] = []
    # progress None: a bar on a terminal, a line now and then in a log (fabricbench/progress.py)
    bar = Progress("study", total=len(units), quiet=progress is False)
    try:
        with procs.terminated_as_interrupt(), bar:
            for unit in units:
                if unit.name in done:
                    results.append(UnitRun(unit=unit, status=Status.SKIPPED, message="recorded ok earlier"))
                    bar.advance(item=f"{unit.name} skipped")
                    continue
                bar.update(item=unit.name)
                run = _run_unit(unit, ctx, writer, attempt)
                results.append(run)
                bar.advance(item=f"{unit.name} {run.status}")
                if echo is not None:
                    line = (f"{unit.name:<28} {run.status:<11} {run.duration_s:7.1f} s"
                            + (f"  {run.message}" if run.message else ""))
                    if bar.live:  # above the bar, through its console, so neither garbles the other
                        bar.say(line)
                    else:
                        echo(line)
    finally:
        writer.close()
    return results


def _run_unit(unit: Unit, ctx: Context, writer: ResultWriter, attempt: str) -> UnitRun:
    kind = UNIT_KINDS.get(unit.kind)
    t0 = time.monotonic()
    commands: list[list[str]] = []
    details: dict[str, Any] = {}
    facts: dict[str, Any] = {}
    log_path = ctx.unit_file(unit, ".log")
    outcome: Outcome
    try:
        ctx.unit_file(unit).unlink(missing_ok=True)  # this attempt's records only
        commands, details = kind.commands(unit, ctx)
        children = []
        fabric = fabric_of(ctx.config, unit.fabric)
        facts = _facts(fabric, None)
        with log_path.open("w", encoding="utf-8") as log, jobs.workspace("study-unit") as ws:
            for argv in commands:
                log.write(f"$ {shown(argv)}\n")
                log.flush()
                # jobs.run: under the unit's fabric (the argv names it by name; its values travel in the
                # environment), in a process group dead with us, bounded by the unit kind's time-out
                res = jobs.run(argv, workspace=ws, fabric=fabric, budget_s=kind.timeout_s(ctx.config))
                if res.waived:
                    raise FabricWaived(res.waived)
                facts = _facts(fabric, res)
                child = (res.returncode, res.stdout, res.stderr, res.timed_out)
                log.write(child[1] + child[2] + f"\n[exit {child[0]}{', timed out' if child[3] else ''}]\n")
                log.flush()
                children.append(child)
                if child[0] != 0 and unit.kind != "scaling":
                    break
        if not commands:  # the kind decided there is nothing to run here, and said why
            outcome = Outcome(status=Status.WAIVED, records=[], message=details.get("waived"))
        else:
            outcome = kind.collect(unit, ctx, children)
    except KeyboardInterrupt:
        _write_unit(writer, unit, attempt, status=Status.INTERRUPTED, started=t0, commands=commands,
                    message="stopped by Ctrl-C / SIGTERM; --resume reruns it", details=details, facts=facts)
        raise
    except FabricbenchError as e:
        status = Status.WAIVED if isinstance(e, FabricWaived) else Status.ERROR
        outcome = Outcome(status=status, records=[], message=str(e))
    for rec in outcome.records:
        rec["study"] = {"unit": unit.name, "attempt": attempt}
        for k, v in facts.items():
            rec.setdefault(k, v)
        if rec.get("run_id") == "":
            rec["run_id"] = attempt
        writer.write(rec)
        ctx.records.append(rec)
    _write_unit(writer, unit, attempt, status=outcome.status, started=t0, commands=commands,
                message=outcome.message, details={**details, **outcome.details}, facts=facts,
                n_records=len(outcome.records))
    return UnitRun(unit=unit, status=outcome.status, duration_s=time.monotonic() - t0, message=outcome.message,
                   commands=[shown(c) for c in commands])


def _facts(fabric: Fabric | None, res: jobs.Outcome | None) -> dict[str, Any]:
    """What the unit's records carry about its fabric (fabrics.apply.Launch.facts: values masked)."""
    if fabric is None:
        return {}
    cmd = res.command if res is not None else []
    ns = cmd[3] if len(cmd) > 3 and cmd[1:3] == ["netns", "exec"] else None
    return {"fabric": fabric.name, "fabric_env": fabric.public_variables, "shaped_rate_bps": fabric.rate_bps,
            "netns": ns}


def _write_unit(writer: ResultWriter, unit: Unit, attempt: str, *, status: str, started: float,
                commands: list[list[str]], message: str | None, details: dict[str, Any], facts: dict[str, Any],
                n_records: int = 0) -> None:
    writer.write({**header("study_unit", run_id=attempt, fabric=unit.fabric or "default"),
                  "name": unit.name, "unit_kind": unit.kind, "strategy": unit.strategy, "attempt": attempt,
                  "status": status, "duration_s": round(time.monotonic() - started, 3), "message": message,
                  "commands": [shown(c) for c in commands], "records": n_records, "details": details,
                  "fabric_facts": facts})
