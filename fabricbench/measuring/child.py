"""Run one `fabricbench sweep` in a fresh process under a fabric, and read back what it measured.

    fabricbench compare --fabrics default,p2p-off      (one child per fabric)
    fabricbench scaling --num-gpus 2,4,8                  (one child per GPU set)
    fabricbench sweep --fabric p2p-off                  (runner.run_sweep delegates to one child)

NCCL reads its environment once per process, so every fabric (and every GPU set) gets its own
`python -m fabricbench sweep ... --fabric NAME --out tmp.jsonl --quiet`, started under the fabric by
apply.applied (its environment; `ip netns exec` for shaped:RATE). Its records are read as the child
writes them, with the transport read from NCCL's log written into `transport` and
`extra.transport_detail`, a `transport_mismatch` message where the fabric's label did not happen, and the
fabric's facts (`shaped_rate_bps`; `fabric_env` with masked values). A child that fails is reported
(ChildRun.error) and whatever it wrote before failing is kept.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from fabricbench import errors, jobs
from fabricbench.exitcodes import Exit
from fabricbench.fabrics import get_fabric
from fabricbench.fabrics.model import Fabric
from fabricbench.fabrics.transport import TransportSummary, mismatch, read_logs
from fabricbench.jobs.configs import SweepDelivery, sweep_command
from fabricbench.measuring import resume as resuming
from fabricbench.measuring.config import default_backend



@dataclass(kw_only=True)
class ChildRun:
    fabric: Fabric
    records: list[dict[str, Any]] = field(default_factory=list)  # kind "collective", annotated
    summary: TransportSummary | None = None
    transport: str | None = None
    mismatch: str | None = None
    warnings: list[str] = field(default_factory=list)
    returncode: int = 0
    error: str | None = None  # the child's last error line when it failed
    waived: str | None = None  # why the fabric could not be applied here (FabricWaived); nothing ran
    command: list[str] = field(default_factory=list)
    stderr: str = ""


def _uses_nccl(sweep: Any) -> bool:
    """Whether the child's ranks talk through NCCL: the native engine always; the torch engine unless its
    backend is gloo (decided as the sweep decides it when none is given: nccl where a GPU is visible)."""
    return uses_nccl(engine=sweep.engine, backend=sweep.backend)


def uses_nccl(*, engine: str, backend: str | None) -> bool:
    """Whether ranks of this engine and backend talk through NCCL (a train run: engine "torch")."""
    if engine != "torch":
        return True
    return (backend or default_backend()) != "gloo"


def waiver(fabric: Fabric, *, engine: str, backend: str | None) -> str | None:
    """The one rule for a fabric that would change nothing here (compare, scaling, sweep --fabric and the
    study's sweep and train units all ask it): why it is waived for ranks of this engine and backend, or
    None when it applies. Measured anyway, it would be the default fabric under another name, and its
    "slowdown" load noise (p2p-off on gloo ranks)."""
    if uses_nccl(engine=engine, backend=backend):
        return None
    return fabric.inert_without_nccl()


def sweep_under_fabric(config, emit: Callable[[dict[str, Any]], None], *, run_id: str,
                       prior: list[dict[str, Any]] | None = None,
                       reused: Callable[[dict[str, Any]], None] | None = None,
                       on_skip: Callable[[int, int], None] | None = None) -> ChildRun:
    """`fabricbench sweep --fabric X` when X is not in force here: the same sweep in a fresh child under X.

    Each record is adopted into this run (run id; the child's kept in extra.child_run_id) and emitted as the
    child writes it. The child's failure becomes the same error here; a waived fabric raises FabricWaived.
    With `prior` (--resume; as in measuring/launch.launch_local), the items it already holds go to `reused`,
    in plan order between the child's records, on_skip(skipped, planned) is called once, and the child gets
    those records and --resume, so it measures only the rest (no child at all when nothing is left).
    """
    fabric = get_fabric(config.fabric)
    launched = "RANK" in os.environ and "WORLD_SIZE" in os.environ and not config.nprocs
    if launched and fabric.rate_bps is not None:
        raise errors.UsageError(f"--fabric {fabric.name} under an outside launcher (torchrun): every rank "
                                f"would get a namespace of its own and none could reach the others; use "
                                f"--nprocs N, which starts the ranks inside one namespace")
    resumed = _Resumed(config, fabric, prior, reused)
    if prior is not None and on_skip is not None:
        on_skip(*resumed.counts)

    def adopt(rec: dict[str, Any]) -> None:
        resumed.before(rec)
        rec["extra"] = {**(rec.get("extra") or {}), "child_run_id": rec.get("run_id")}
        rec["run_id"] = run_id
        emit(rec)

    if resumed.nothing_left:
        resumed.before(None)
        return ChildRun(fabric=fabric)
    run = run_child(fabric, config, on_record=adopt, prior=prior)
    for w in run.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if run.waived:
        raise errors.FabricWaived(run.waived)
    for line in run.stderr.splitlines():  # the child's own warnings (ignored options...)
        if line.startswith("warning:"):
            print(line, file=sys.stderr)
    if run.mismatch:
        print(f"warning: {run.mismatch}", file=sys.stderr)
    if run.returncode:
        raise _child_error(run)
    resumed.before(None)
    return run


class _Resumed:
    """A delegated sweep's --resume: the plan items `prior` holds go to `reused` in plan order. The child,
    given the same records, measures the other items in plan order, so its n-th record is the n-th item not
    held, and the held items before it are handed over first."""

    def __init__(self, config, fabric: Fabric, prior: list[dict[str, Any]] | None, reused) -> None:
        self.held: dict[int, dict[str, Any]] = {}
        self.measured: list[int] = []  # plan indices the child will measure, in order
        self.counts = (0, 0)  # (skipped, planned), for on_skip
        self.reused = reused
        self.nothing_left = False  # resuming, and every item is held: no child to start
        if prior is None:
            return
        import dataclasses

        named = dataclasses.replace(config, fabric=fabric.name)  # what the child's records say
        plan, self.held = resuming.plan_held(named, prior)
        self.measured = [i for i in range(len(plan)) if i not in self.held]
        self.counts = resuming.skip_counts(plan, self.held)
        self.nothing_left = not self.measured

    def before(self, rec: dict[str, Any] | None) -> None:
        """Hand over the held items planned before the child's next record (rec None: all that are left)."""
        upto = self.measured.pop(0) if rec is not None and self.measured else None
        for i in sorted(self.held):
            if upto is not None and i > upto:
                break
            held = self.held.pop(i)
            if self.reused is not None:
                self.reused(held)


def _child_error(run: ChildRun) -> BaseException:
    """The child's `Error: ...` line as the exception the child raised (same message, same exit status)."""
    if run.returncode in (Exit.INTERRUPTED, -2):  # -2: killed by SIGINT itself
        return KeyboardInterrupt()
    text = (run.error or "").removeprefix("Error: ")
    if run.returncode == Exit.USAGE:
        return errors.UsageError(text)
    kind, sep, message = text.partition(": ")
    cls = errors.by_label(kind) if sep else None  # "timeout: ..." is CollectiveTimeout's (errors.py)
    if cls is not None:
        return cls(message)
    return errors.FabricbenchError(f"the sweep under fabric {run.fabric.name} failed: {text}")


def run_child(fabric: Fabric, sweep: Any, *, base_env: dict[str, str] | None = None,
              wall_timeout_s: float | None = None, extra: dict[str, Any] | None = None,
              on_record: Callable[[dict[str, Any]], None] | None = None,
              prior: list[dict[str, Any]] | None = None) -> ChildRun:
    """Run the sweep `sweep` (a SweepConfig; its own fabric is no option: `fabric` is) under `fabric` as a job
    (fabricbench/jobs); `extra` is merged into every record's `extra` (e.g. the placement).

    `on_record` gets each annotated record as soon as the child has written it (streaming); `prior`: records
    the child's --out starts with (its --resume skips them; they are not read back). A fabric
    that cannot be applied here comes back as ChildRun.waived; Ctrl-C ends the child and goes on up.
    """
    run = ChildRun(fabric=fabric)
    nccl = _uses_nccl(sweep)
    run.waived = waiver(fabric, engine=sweep.engine, backend=sweep.backend)
    if run.waived:  # refused before anything runs: never a fake comparison
        return run
    with jobs.workspace(f"sweep-{fabric.name}") as ws:
        out = ws / "out.jsonl"
        # the fabric by its name: a custom fabric's values travel in the child's environment (fabrics.env.carry)
        cmd = sweep_command(sweep, SweepDelivery(fabric=fabric.name, out=str(out), resume=prior is not None))
        run.command = cmd
        if prior:  # --resume in the child: it skips what these hold (and does not write them again)
            with open(out, "w", encoding="utf-8") as fh:
                fh.writelines(json.dumps(r) + "\n" for r in prior)
        reader = _Reader(ws, fabric, nccl, extra, run, on_record)
        # NCCL logging only where NCCL runs: gloo ranks would just carry the variables into the records.
        try:
            res = jobs.run(cmd, workspace=ws, env=base_env, fabric=fabric, log_dir=str(ws) if nccl else None,
                           budget_s=wall_timeout_s, on_record=reader.record, records_from=[out],
                           on_start=reader.start)
        except errors.UsageError as e:  # the fabric cannot run here as given (an interface this host lacks):
            run.returncode, run.error = Exit.USAGE, str(e)  # this fabric's failure; a compare keeps the others
            return run
        run.warnings = res.warnings
        if res.waived:
            run.waived = res.waived
            return run
        run.summary = reader.summary()
    run.stderr = res.stderr
    run.returncode = Exit.TIMEOUT if res.timed_out else (res.returncode if res.returncode is not None else Exit.FAILED)
    if res.timed_out:
        run.error = f"did not finish within {wall_timeout_s:g} s"
    elif run.returncode:
        run.error = _last_error(res.stderr) or f"exit status {run.returncode}"
    nranks = run.records[0].get("nranks") if run.records else None
    run.transport = _label(run.summary, nccl, nranks)
    run.mismatch = mismatch(fabric, run.summary)
    return run


class _Reader:
    """Annotates each collective record the child writes with the transport NCCL's log shows so far."""

    def __init__(self, ws, fabric, uses_nccl, extra, run, on_record) -> None:
        self.ws, self.fabric, self.uses_nccl, self.extra, self.run, self.on_record = \
            ws, fabric, uses_nccl, extra, run, on_record
        self.launch = None

    def start(self, launch) -> None:
        self.launch = launch

    @staticmethod
    def read(path) -> str:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                return fh.read()
        except FileNotFoundError:
            return ""

    def summary(self) -> TransportSummary:
        """NCCL's log so far: the files fabricbench chose, or the child's output where the user set
        NCCL_DEBUG (then NCCL writes to stdout)."""
        log_dir = self.launch.log_dir if self.launch is not None else None
        return read_logs(log_dir, *(self.read(self.ws / f) for f in ("job.stdout", "job.stderr")))

    def record(self, rec: dict[str, Any]) -> None:
        if rec.get("kind") != "collective":
            return
        facts = self.launch.facts if self.launch is not None else {"shaped_rate_bps": None, "fabric_env": {}}
        annotate(rec, self.fabric, facts, self.summary(), self.uses_nccl, self.extra)
        self.run.records.append(rec)
        if self.on_record is not None:
            self.on_record(rec)


def annotate(rec: dict[str, Any], fabric: Fabric, facts: dict[str, Any], summary: TransportSummary,
             uses_nccl: bool, extra: dict[str, Any] | None = None) -> None:
    """The observed transport, the mismatch flag and the fabric's facts, written into one record."""
    rec["transport"] = _label(summary, uses_nccl, rec.get("nranks"))
    if uses_nccl and summary.log_lines:  # what NCCL's log says: NVLS connected or not
        rec["nvls"] = summary.nvls
    rec["shaped_rate_bps"] = facts["shaped_rate_bps"]
    rec_extra = dict(rec.get("extra") or {})
    rec_extra["transport_detail"] = {**summary.to_dict(), "expected": fabric.expected,
                                     "fabric_env": facts["fabric_env"]}
    if extra:
        rec_extra.update(extra)
    rec["extra"] = rec_extra
    flag = mismatch(fabric, summary)
    if flag:
        rec["transport_mismatch"] = flag


def _label(summary: TransportSummary, uses_nccl: bool, nranks: int | None) -> str:
    return summary.label(nranks) if uses_nccl else "gloo (no NCCL)"


def _last_error(stderr: str) -> str | None:
    lines = [l.strip() for l in stderr.splitlines() if l.strip()]
    errs = [l for l in lines if l.startswith("Error") or "Error:" in l]
    return (errs or lines or [None])[-1]
