"""Run a study's units one after another, each in its own process under its fabric, appending as they end.

    fabricbench study --device cpu --nprocs 2 --fabrics default,shaped:1gbit --model tiny-mistral --out lab/

Every unit appends its records and then one "study_unit" record to DIR/results.jsonl as it finishes
(flushed and synced: a crash loses at most the unit in flight). A unit that fails, times out or runs out
of memory is a result; the next unit runs. Ctrl-C (or SIGTERM) kills the child's process group, records
the unit as "interrupted" and stops; `--resume` then skips the units recorded ok (units.DONE) and runs
the rest. A fabric that cannot be applied here (shaped without root) makes its units "waived". Each unit
is watched for the load other processes put on this host while it runs (fabricbench/hostload.py; node 0's
host across nodes): its train and collective records carry `host_load`, flagged `busy` past the threshold.
"""

from __future__ import annotations

import os
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
from fabricbench import hostload, procs
from fabricbench.jobs import secrets, store
from fabricbench.jobs.heartbeat import stall_bound
from fabricbench.outputs import ENV_ROOT, OutputError, OutputRefused, folder, open_output
from fabricbench.progress import Progress
from fabricbench.results import ResultWriter, header
from fabricbench.results.status import Status
from fabricbench.studying import nodes, records as study_records
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.lock import one_writer
from fabricbench.studying.units import DONE, UNIT_KINDS, Context, Outcome, Unit, shown


MEASURED = ("train", "collective")  # the record kinds that carry the host's load during their unit


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
    """Run (or skip) every unit; returns what happened to each. Raises KeyboardInterrupt after recording.
    The folder is this run's alone while it runs (studying/lock.py): a second study there is refused."""
    with one_writer(config.out):
        return _run_units(config, units, resume=resume, echo=echo, progress=progress)


def _run_units(config: StudyConfig, units: list[Unit], *, resume: bool, echo: Callable[[str], None] | None,
               progress: bool | None) -> list[UnitRun]:
    out = Path(config.out)
    existing = prepare(config, resume=resume)
    # across nodes: every node joins before anything is written (a missing one is named, nothing started)
    crew = nodes.Crew.lead(addr=config.master_addr, port=int(config.master_port), nnodes=config.nnodes,
                           join_timeout_s=config.join_timeout_s, stall_s=stall_bound(config.stall_timeout_s, [])) \
        if config.nnodes > 1 else None
    with folder(out, what="--out") as d, d.folder("units"):  # made here, never through a link (outputs.py)
        pass
    attempt = uuid.uuid4().hex[:12]
    writer = ResultWriter(out / study_records.RESULTS, under=out)
    writer.write({**header("plan", run_id=attempt), "study": {
        "attempt": attempt, "resume": resume, "config": config.to_dict(),
        "units": [{"name": u.name, "kind": u.kind, "fabric": u.fabric, "strategy": u.strategy,
                   "estimate_s": u.estimate_s} for u in units],
        "argv": [secrets.mask(a, config.fabrics) for a in sys.argv],
        # how long this process had run: the study's wall starts at its command's start (report/time.py)
        "process_age_s": round(procs.age_s(), 3),
        **({"nodes": crew.hosts} if crew is not None else {})}})
    ctx = Context(config=config, out_dir=out, records=list(existing.records))
    done = {name for name, u in existing.units.items() if u.get("status") in DONE}
    results: list[UnitRun] = []
    # progress None: a bar on a terminal, a line now and then in a log (fabricbench/progress.py)
    bar = Progress("study", total=len(units), quiet=progress is False)
    try:
        with procs.terminated_as_interrupt(), bar:
            rerun = False  # a unit ran again: what the derived units (summary) computed from it is stale
            for unit in units:
                if unit.name in done and not (rerun and UNIT_KINDS.get(unit.kind).derived):
                    results.append(UnitRun(unit=unit, status=Status.SKIPPED, message="recorded ok earlier"))
                    bar.advance(item=f"{unit.name} skipped")
                    continue
                bar.update(item=unit.name)
                run = _run_unit(unit, ctx, writer, attempt, crew)
                rerun = rerun or run.status != Status.WAIVED
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
        if crew is not None:  # the followers exit as this study does
            crew.close(exit_code=1 if any(r.status in (Status.ERROR, Status.TIMEOUT) for r in results)
                       or len(results) < len(units) else 0)
    return results


def _run_unit(unit: Unit, ctx: Context, writer: ResultWriter, attempt: str, crew: nodes.Crew | None = None) -> UnitRun:
    """Run one unit's children and record what they wrote. Across nodes, a node lost in it is recorded with
    the unit (what node 0's share wrote is kept, e.g. a train record with its finished steps), then raised:
    the study cannot go on."""
    kind = UNIT_KINDS.get(unit.kind)
    t0 = time.monotonic()
    commands: list[list[str]] = []
    details: dict[str, Any] = {}
    facts: dict[str, Any] = {}
    lost: nodes.NodeLost | None = None
    outcome: Outcome
    try:
        with folder(ctx.out_dir, what="unit file") as d, d.folder("units") as u:
            u.unlink(ctx.unit_file(unit).name)  # this attempt's records only (a link itself, never its target)
        commands, details = kind.commands(unit, ctx) if not unit.waived else ([], {"waived": unit.waived})
        fabric = fabric_of(ctx.config, unit.fabric)
        facts = _facts(fabric, None)
        if not commands:  # the plan or the kind decided there is nothing to run here, and said why
            outcome = Outcome(status=Status.WAIVED, records=[], message=details.get("waived"))
        else:
            ran = _Children(unit=unit, ctx=ctx, fabric=fabric, crew=crew, details=details)
            with hostload.watch() as watched:  # the other processes' load on this host while the unit runs
                lost = ran.run(commands)
            if watched.load is not None:
                details[hostload.FIELD] = watched.load.to_dict()
            facts = ran.facts or facts
            outcome = kind.collect(unit, ctx, ran.children)
            if crew is not None and kind.each_node:
                outcome = _each_node(unit, ctx, crew, outcome, ran.node_children)
            if lost is not None:
                outcome = Outcome(status=Status.ERROR, records=outcome.records, details=outcome.details,
                                  message=str(lost) + (f" ({outcome.message})" if outcome.message else ""))
    except KeyboardInterrupt:
        _write_unit(writer, unit, attempt, status=Status.INTERRUPTED, started=t0, commands=commands,
                    message="stopped by Ctrl-C / SIGTERM; --resume reruns it", details=details, facts=facts)
        raise
    except OutputRefused:  # a unit's own file cannot be written (read-only units/, a link): the study stops
        raise
    except OSError as e:  # its log could not be written on (a full disk): what was recorded before is kept
        raise OutputError(f"study unit {unit.name}: writing {ctx.unit_file(unit, '.log')} failed ({e.strerror}); "
                          f"the units recorded before are kept; free space, then --resume") from None
    except FabricbenchError as e:
        status = Status.WAIVED if isinstance(e, FabricWaived) else Status.ERROR
        outcome = Outcome(status=status, records=[], message=str(e))
    for rec in outcome.records:
        rec["study"] = {"unit": unit.name, "attempt": attempt}
        if rec.get("kind") in MEASURED and hostload.FIELD in details:  # beside the figure it may have moved
            rec.setdefault(hostload.FIELD, details[hostload.FIELD])
        for key, v in facts.items():
            rec.setdefault(key, v)
        if rec.get("run_id") == "":
            rec["run_id"] = attempt
        writer.write(rec)
        ctx.records.append(rec)
    _write_unit(writer, unit, attempt, status=outcome.status, started=t0, commands=commands,
                message=outcome.message, details={**details, **outcome.details}, facts=facts,
                n_records=len(outcome.records))
    if lost is not None:
        raise lost
    return UnitRun(unit=unit, status=outcome.status, duration_s=time.monotonic() - t0, message=outcome.message,
                   commands=[shown(c) for c in commands])


@dataclass(kw_only=True)
class _Children:
    """A unit's children, one after another, under its fabric, each bounded by the kind's time-out; across
    nodes, each posted to the followers as it starts (their shares: studying/nodes.py) and their results
    collected as it ends. Its log is DIR/units/<slug>.log."""

    unit: Unit
    ctx: Context
    fabric: Fabric | None
    crew: nodes.Crew | None
    details: dict[str, Any]
    children: list[tuple[int | None, str, str, bool]] = field(default_factory=list)
    node_children: dict[int, tuple[int | None, str, str, bool]] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)

    def _env(self) -> dict[str, str]:
        """This environment, naming the study's folder as the children's output root (outputs.ENV_ROOT): a
        child writing units/<unit>.jsonl follows no link below it, as the study does."""
        return {**os.environ, ENV_ROOT: str(self.ctx.out_dir)}

    def run(self, commands: list[list[str]]) -> nodes.NodeLost | None:
        unit, ctx, crew = self.unit, self.ctx, self.crew
        kind = UNIT_KINDS.get(unit.kind)
        shared = crew is not None and (unit.span or kind.each_node)
        theirs = {n: kind.commands(unit, ctx.for_node(n))[0] for n in crew.followers} if shared else {}
        budget = kind.timeout_s(ctx.config)
        log_file = open_output(ctx.unit_file(unit, ".log"), "w", what="unit log", under=ctx.out_dir)
        with log_file as log, jobs.workspace("study-unit") as ws:
            for i, argv in enumerate(commands):
                log.write(f"$ {shown(argv)}\n")
                log.flush()
                # across nodes: the followers' shares start with ours; a node that goes ends ours (on_poll)
                k = crew.post(unit.name, "each" if kind.each_node else "span", lambda n: theirs[n][i],
                              unit.fabric, budget) if shared else None
                try:
                    # jobs.run: under the unit's fabric (the argv names it by name; its values travel in the
                    # environment), in a process group dead with us, bounded by the unit kind's time-out
                    res = jobs.run(argv, workspace=ws, fabric=self.fabric, budget_s=budget, env=self._env(),
                                   on_poll=(lambda: crew.watch_share(k)) if k is not None else None)
                    if res.waived:
                        raise FabricWaived(res.waived)
                    self.facts = _facts(self.fabric, res)
                    child = (res.returncode, res.stdout, res.stderr, res.timed_out)
                    log.write(child[1] + child[2] + f"\n[exit {child[0]}{', timed out' if child[3] else ''}]\n")
                    self.children.append(child)
                    if k is not None:
                        self._shares(crew.collect(k, budget), log, kind.each_node)
                except nodes.NodeLost as e:  # what our share wrote is still collected
                    log.write(f"\n[{e}]\n")
                    return e
                except nodes.ShareFailed as e:  # a follower failed and ours hung on: the unit failed
                    child = (1, "", f"Error: {e}", False)
                    log.write(f"\n[{e}]\n")
                    self.children.append(child)
                if child[0] != 0 and unit.kind != "scaling":
                    break
        return None

    def _shares(self, shares: dict[int, dict[str, Any]], log: Any, keep: bool) -> None:
        before = {d["node"]: d for d in self.details.get("nodes") or []}
        for n, sh in shares.items():
            log.write(f"[node {n} ({sh.get('host')}): exit {sh.get('rc')}]\n{sh.get('tail') or ''}\n")
            if n not in before or (before[n].get("rc") == 0 and sh.get("rc") != 0):  # the worst per node
                before[n] = {"node": n, "host": sh.get("host"), "rc": sh.get("rc"),
                             "timed_out": bool(sh.get("timed_out"))}
            if keep:
                self.node_children[n] = (sh.get("rc"), sh.get("stdout") or "", sh.get("tail") or "",
                                         bool(sh.get("timed_out")))
        self.details["nodes"] = [before[n] for n in sorted(before)]


def _each_node(unit: Unit, ctx: Context, crew: nodes.Crew, mine: Outcome,
               node_children: dict[int, tuple[int | None, str, str, bool]]) -> Outcome:
    """A unit every node ran for itself (the machine): node 0's records and each follower's, each tagged
    with its node; a node whose share failed is said in the message (node 0's outcome stands)."""
    records = [{**r, "node": {"index": 0, "host": crew.hosts[0]}} for r in mine.records]
    failed = []
    for n, child in sorted(node_children.items()):
        theirs = UNIT_KINDS.get(unit.kind).collect(unit, ctx, [child])
        records += [{**r, "node": {"index": n, "host": crew.hosts[n]}} for r in theirs.records]
        if theirs.status != Status.OK:
            failed.append(f"node {n} ({crew.hosts[n]}): {theirs.message}")
    msg = "; ".join(x for x in [mine.message, *failed] if x) or None
    return Outcome(status=mine.status, records=records, message=msg, details=mine.details)


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


def follow(config: StudyConfig, echo: Callable[[str], None] | None = None) -> tuple[int, int]:
    """A follower node's study (--node-rank above 0): join node 0, run each share it posts under the
    share's fabric, answer, until node 0 ends the study. Writes nothing of its own: its children write into
    a temporary folder, removed at the end. Returns (node 0's exit status, the shares run)."""
    ran = [0]
    with jobs.workspace("study-node") as home, procs.terminated_as_interrupt():
        (home / "units").mkdir(parents=True, exist_ok=True)

        def run_child(job: dict[str, Any], watch: Callable[[], None]) -> dict[str, Any]:
            argv = nodes.node_argv(job["argv"][str(config.node_rank)], home)
            with jobs.workspace("study-share") as ws:
                res = jobs.run(argv, workspace=ws, fabric=fabric_of(config, job.get("fabric")),
                               budget_s=float(job["budget_s"]), on_poll=watch)
            ran[0] += 1
            rc = 1 if res.waived else res.returncode
            if echo is not None:
                echo(f"{job.get('unit', '?'):<28} exit {rc}{' (timed out)' if res.timed_out else ''}")
            return {"rc": rc, "timed_out": res.timed_out, "stdout": res.stdout,
                    "tail": (res.waived or "") + (res.stderr or "")[-4000:]}

        code = nodes.follow(addr=config.master_addr, port=int(config.master_port), node=config.node_rank,
                            nnodes=config.nnodes, join_timeout_s=config.join_timeout_s,
                            stall_s=stall_bound(config.stall_timeout_s, []), run_child=run_child)
    return code, ran[0]
