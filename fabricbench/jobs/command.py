"""`fabricbench exec`: a user's own command run under a fabric, as fabricbench's own runs get it.

    fabricbench exec --fabric shaped:200mbit --out runs.jsonl -- torchrun --nproc-per-node 2 train.py
    fabricbench.execute(ExecConfig(command=("python3", "train.py"), fabric="p2p-off"), out="runs.jsonl")

The command goes through the one child runner (jobs.run) with the fabric applied by fabrics/apply.py:
NCCL environment fabrics set their variables, `shaped:RATE` runs it in a network namespace whose loopback
tc shapes, and NCCL's INFO log goes to the job's workspace so that the transport NCCL really used is read
from it (fabrics/transport.py, as sweep does). A variable the fabric sets that the user already set to
another value is refused before anything runs: exec never overrides the user's NCCL_* (nor any other),
and a run labelled p2p-off with P2P on would be a false record. NVLS is never touched (fabrics/model.py).

The command's output is its own (not captured); its exit status is passed through (a signal's death as
128 + signal, as a shell does). Ctrl-C, SIGTERM and SIGHUP reach it as themselves; --timeout ends it (SIGTERM,
then SIGKILL GRACE_S later); nothing is left: its process group, what it started in sessions of its own
(runner: user_job) and the namespace all go. One record of kind "exec" is appended per run (jobs/kinds.py):
the fabric, the command with secret values masked (masking.py: VAR=VALUE outside NCCL_*/GLOO_*/CUDA_*),
wall time, exit status, the transport NCCL used (or that none was logged) and the host's load.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from fabricbench import hostload, masking, procs
from fabricbench.declare import check, declare
from fabricbench.errors import UsageError, expect_config
from fabricbench.exitcodes import Exit
from fabricbench.fabrics import get_fabric
from fabricbench.fabrics.model import Fabric
from fabricbench.fabrics.transport import mismatch, read_logs
from fabricbench.jobs import kinds
from fabricbench.jobs.runner import Outcome, run, workspace
from fabricbench.masking import public_value
from fabricbench.results.context import allowed_env
from fabricbench.results.schema import header
from fabricbench.results.status import Status
from fabricbench.results.writer import ResultWriter

GRACE_S = procs.GRACE_S  # after --timeout's SIGTERM (or a forwarded Ctrl-C): then SIGKILL
TIMEOUT_EXIT = Exit.TIMEOUT  # what timeout(1) exits with when it stopped the command


@dataclass(frozen=True, kw_only=True)
class ExecConfig:
    """One command under one fabric; checked once, here, for the CLI and the library alike."""

    command: tuple[str, ...]  # the program and its arguments, as given after `--`
    fabric: str = field(default="default", metadata=declare(
        "--fabric", "fabric", "The NCCL environment to run under (see `fabricbench fabrics`)."))
    timeout_s: float | None = field(default=None, metadata=declare(
        "--timeout", "seconds", f"Seconds the command may run; then SIGTERM, and SIGKILL {GRACE_S:g} s later.",
        unit="s", concept="job_timeout_s", default_by="no limit"))

    def __post_init__(self) -> None:
        object.__setattr__(self, "command", tuple(str(a) for a in self.command))
        if not self.command or not self.command[0].strip():
            raise UsageError("no command to run; give it after `--`, e.g. fabricbench exec --fabric p2p-off "
                             "-- torchrun --nproc-per-node 2 train.py")
        check(self)
        get_fabric(self.fabric)  # an unknown or malformed fabric fails before anything runs

    @property
    def secrets(self) -> list[str]:
        """The values never shown or written: a custom fabric's, and any VAR=VALUE of the command's."""
        return masking.secret_values([self.fabric, *self.command])

    @property
    def shown_command(self) -> list[str]:
        return [masking.redact(a, self.secrets) for a in self.command]


@dataclass(kw_only=True)
class ExecResult:
    record: dict[str, Any]  # what was appended to --out (kind "exec")
    exit_status: int  # what `fabricbench exec` exits with: the command's own, 128 + signal, 124 on timeout
    warnings: list[str] = field(default_factory=list)  # already masked

    @property
    def status(self) -> str:
        status: str = self.record["status"]  # a Status value, written by _record
        return status


def overridden(fabric: Fabric, environ: dict[str, str]) -> list[str]:
    """The fabric's variables that the user already set to another value (shown masked)."""
    return [f"{var}={public_value(var, environ[var])} (the fabric sets {public_value(var, val)})"
            for var, val in fabric.env if var in environ and environ[var] != val]


def execute(config: ExecConfig, *, out: str | os.PathLike[str] | None = None,
            environ: dict[str, str] | None = None) -> ExecResult:
    """Run config.command under config.fabric to its end; append its record to `out`. Ctrl-C or SIGTERM
    go to the command, the record is written (status "interrupted"), and the interruption goes on up."""
    expect_config(config, ExecConfig, "execute")
    env = dict(os.environ if environ is None else environ)
    fabric = get_fabric(config.fabric)
    clash = overridden(fabric, env)
    if clash:
        raise UsageError(f"fabric {fabric.name} would override what you set: {'; '.join(clash)}; exec never "
                         f"overrides your variables: unset them, or choose a fabric that leaves them alone")
    found = shutil.which(config.command[0], path=env.get("PATH", os.defpath))
    if found is None or not os.path.isfile(found):  # a socket or a folder with x bits is no program
        raise UsageError(f"{masking.redact(config.command[0], config.secrets)!r} is not a command here (not an "
                         f"executable file, nor found on PATH); give a program, e.g. python3 train.py")
    why = fabric.unavailable()
    if why:
        raise UsageError(f"fabric {fabric.name} cannot be applied here: {why}")
    writer = ResultWriter(out)  # an output that cannot be written fails here, before the command runs
    facts: dict[str, Any] = {}
    outcome = Outcome(returncode=None)
    stopped: KeyboardInterrupt | None = None
    t0 = time.monotonic()
    with writer, workspace("exec") as ws:
        with hostload.watch() as watched:
            try:
                run(list(config.command), workspace=ws, env=env, fabric=fabric, log_dir=str(ws),
                    budget_s=config.timeout_s, capture=False, user_job=True, outcome=outcome,
                    on_start=lambda launch: facts.update(launch.facts))
            except KeyboardInterrupt as e:  # procs.Terminated too: the job was sent the same signal
                stopped = e
        wall_s = time.monotonic() - t0
        summary = read_logs(str(ws))  # before the workspace (and NCCL's log in it) is removed
        record = _record(config, fabric, outcome, facts, summary, wall_s, watched.load, stopped, env)
        writer.write(record)
    warnings = [masking.redact(w, config.secrets) for w in outcome.warnings]
    if stopped is not None:
        where = f"; its record (status interrupted) was appended to {out}" if out is not None else ""
        stopped.kept = f"the command was sent {procs.said_by(stopped)} too{where}"  # type: ignore[attr-defined]
        raise stopped
    return ExecResult(record=record, exit_status=_exit_status(outcome), warnings=warnings)


def _record(config: ExecConfig, fabric: Fabric, outcome: Outcome, facts: dict[str, Any], summary, wall_s: float,
            load, stopped: KeyboardInterrupt | None, env: dict[str, str]) -> dict[str, Any]:
    rec = header(kinds.EXEC, run_id=uuid.uuid4().hex[:12], fabric=fabric.name)
    rec["env"] = allowed_env({**env, **fabric.public_variables})  # what the job ran with, by the one allow-list
    rc = outcome.returncode
    if stopped is not None:
        status = Status.INTERRUPTED
        message = f"stopped by {procs.said_by(stopped)}, which the command was sent too"
    elif outcome.waived:
        status, message = Status.WAIVED, outcome.waived
    elif outcome.timed_out:
        status, message = Status.TIMEOUT, f"did not finish within {config.timeout_s:g} s; stopped (SIGTERM, " \
                                          f"then SIGKILL {GRACE_S:g} s later)"
    elif rc == 0:
        status, message = Status.OK, None
    else:
        status, message = Status.ERROR, _how(rc)
    uses_nccl = summary.log_lines > 0
    # NCCL's log goes where fabricbench reads it only when the user did not set NCCL_DEBUG (fabrics/env.py)
    unread = "unknown (NCCL_DEBUG is yours: its log went where you sent it, unread)" if "NCCL_DEBUG" in env else None
    rec.update({
        "command": config.shown_command,
        "status": status.value,
        "message": masking.redact(message, config.secrets) if message else None,
        "exit_status": rc,
        "wall_s": round(wall_s, 6),
        "timeout_s": config.timeout_s,
        # what NCCL used, from its own log; a job that started no NCCL communicator logged nothing
        "transport": summary.label() if uses_nccl else unread or "none (no NCCL communicator)",
        "transport_mismatch": mismatch(fabric, summary) if uses_nccl else None,
        "nvls": summary.nvls if uses_nccl else None,
        "nccl_version": summary.nccl_version,
        **{k: v for k, v in facts.items() if k != "fabric"},
    })
    if load is not None:
        rec[hostload.FIELD] = load.to_dict()
    return rec


def _how(rc: int | None) -> str:
    if rc is None:
        return "the command was stopped"
    if rc < 0:
        try:
            return f"the command was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"the command was killed by signal {-rc}"
    return f"the command exited with status {rc}"


def _exit_status(outcome: Outcome) -> int:
    """The shell's view: the command's own status, 128 + N for a death by signal N, 124 at --timeout."""
    if outcome.timed_out:
        return TIMEOUT_EXIT
    if outcome.waived:
        return Exit.FAILED
    rc = outcome.returncode
    if rc is None:
        return Exit.FAILED
    return 128 - rc if rc < 0 else rc
