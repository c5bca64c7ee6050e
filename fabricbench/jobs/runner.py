"""The one child runner: every job fabricbench starts in another process goes through `run`.

    from fabricbench import jobs
    with jobs.workspace("train-ddp") as ws:                  # a private folder, removed on every exit
        out = jobs.run(argv, workspace=ws, fabric=fabric, env=env, stall_s=20, budget_s=None,
                       on_record=print, records_from=[ws / "out.jsonl"])
        out.returncode, out.stalled, out.message             # "rank 1 stopped answering ..."

One policy for all jobs:
- the job runs under its fabric (fabrics.apply: environment, shaped namespace, torn down on exit), in a
  process group of its own that dies with this process (procs.spawn: PR_SET_PDEATHSIG);
- records stream back over one channel, the workspace: plain JSONL files the caller names (a sweep's
  --out) and the `*.chan.jsonl` files each speaking process writes (jobs.channel); `on_record` sees each
  record as soon as its line is complete;
- a rank's own stall watchdog (jobs/heartbeat.py, across nodes) that names who stalled ends the job at
  once, with its message (Outcome.stalled: the rank it named, which may run on another node);
- stall: a process whose channel pulse (jobs.channel) has stood still for `stall_s` is named as the one
  that stopped answering (SIGSTOP, a frozen process); once every process has reported a
  step, when all are alive but none made progress (a step, a record) for `stall_s`, the one furthest
  behind is named; start-up (building a model) is bounded by `startup_s` instead. Either way the whole
  group is killed and Outcome.stalled / Outcome.message say who;
- several processes: a job may be several named processes (`fabricbench sweep --nprocs N`'s ranks, each
  `{"rank 0": argv, ...}`), each in a group of its own. When one fails (exits non-zero, or says "error"
  on its channel), the others get SETTLE_S to show themselves, then all are killed and the cause is
  named: one that died without saying why ("rank 1 died (killed by SIGKILL) before it finished"), else
  one that stopped answering meanwhile, else the first that said why (Outcome.errors). A process that
  ended well is never named for its silence afterwards;
- budget: `budget_s` bounds the whole job (Outcome.timed_out);
- interruption (KeyboardInterrupt, procs.Terminated): the group is killed, the records already
  complete are handed to on_record, and the exception goes on up (the CLI exits 130 or 143);
- no leftovers: the workspace is the job's TMPDIR too, so what a launcher leaves there (torchrun's
  torchelastic_* folders) goes with it;
- a user's own command (`user_job`, fabricbench exec): Ctrl-C and SIGTERM reach it as themselves, with
  `grace_s` to end before its group is killed, and what it started in sessions of its own (torchrun's
  ranks) and left behind is adopted while it runs (procs.adopting) and killed when it ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection, Iterator, Mapping, Sequence

from fabricbench import procs
from fabricbench.errors import FabricWaived
from fabricbench.fabrics.apply import Launch, applied
from fabricbench.fabrics.model import Fabric
from fabricbench.jobs import bytecode, channel
from fabricbench.jobs.liveness import DEAD_AFTER_S

POLL_S = 0.2  # how often the workspace is read while the job runs
SETTLE_S = 1.0  # after one process of several failed: time for the one that made it fail to show itself


@dataclass(kw_only=True)
class Outcome:
    returncode: int | None  # negative: killed by that signal; None: killed by the runner
    stdout: str = ""
    stderr: str = ""
    records: list[dict[str, Any]] = field(default_factory=list)
    stalled: str | None = None  # who stopped answering ("rank 1"), when the stall policy ended the job
    timed_out: bool = False  # the budget ran out
    message: str | None = None  # why the runner ended the job, naming who
    waived: str | None = None  # the fabric cannot be applied here; nothing ran
    warnings: list[str] = field(default_factory=list)
    progress: dict[str, dict[str, Any]] = field(default_factory=dict)  # who -> its last progress message
    errors: dict[str, dict[str, Any]] = field(default_factory=dict)  # who -> what it said failed, in order
    failed: str | None = None  # of several processes: the one whose failure ended the job
    returncodes: dict[str, int | None] = field(default_factory=dict)  # of several processes: each one's
    command: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.message and not self.waived


@contextlib.contextmanager
def workspace(tag: str) -> Iterator[Path]:
    """A private folder (0700) for one job: its channel, its outputs, its TMPDIR; removed on every exit
    (Ctrl-C and SIGTERM included), and by the next start after a SIGKILL (procs.temp_dir)."""
    with procs.temp_dir(tag) as path:
        os.chmod(path, 0o700)
        yield path


@dataclass
class _Speaker:
    who: str
    path: Path | None  # None: expected, not yet heard from
    offset: int = 0
    last_progress: float = field(default_factory=time.monotonic)
    last_alive: float = field(default_factory=time.monotonic)
    progress: dict[str, Any] = field(default_factory=dict)
    stepping: bool = False  # it reported a step: start-up is over
    records: int = 0  # records it sent


class _Watch:
    """Reads the workspace as it grows and applies the stall policy."""

    def __init__(self, ws: Path, records_from: Sequence[Path], expect: Sequence[str], on_record, out: Outcome,
                 on_progress=None, on_message=None):
        self.ws, self.on_record, self.out, self.on_progress = ws, on_record, out, on_progress
        self.on_message = on_message
        self.plain = {Path(p): (os.path.getsize(p) if os.path.exists(p) else 0) for p in records_from}
        self.speakers: dict[str, _Speaker] = {channel.file_name(w): _Speaker(w, None) for w in expect}
        self.started = time.monotonic()

    def poll(self) -> None:
        for path, offset in list(self.plain.items()):
            lines, self.plain[path] = _read_lines(path, offset)
            for line in lines:
                rec = _parse(line)
                if rec is not None:
                    self._record(rec)
        for entry in sorted(self.ws.glob("*" + channel.SUFFIX)):
            sp = self.speakers.get(entry.name)
            if sp is None or sp.path is None:
                sp = self.speakers[entry.name] = _Speaker(entry.name[:-len(channel.SUFFIX)], entry)
            try:
                age = time.time() - entry.stat().st_mtime
            except OSError:
                continue
            sp.last_alive = max(sp.last_alive, time.monotonic() - max(age, 0.0))
            lines, sp.offset = _read_lines(entry, sp.offset)
            for line in lines:
                msg = _parse(line)
                if msg is None:
                    continue
                sp.who = str(msg.get("who") or sp.who)
                sp.last_alive = sp.last_progress = time.monotonic()
                kind = msg.get("m")
                if kind == "record" and isinstance(msg.get("record"), dict):
                    sp.records += 1
                    self._record(msg["record"])
                elif kind == "progress":
                    sp.progress = {k: v for k, v in msg.items() if k not in ("m", "who")}
                    sp.stepping = sp.stepping or "step" in sp.progress
                    self.out.progress[sp.who] = sp.progress
                    if self.on_progress is not None:  # a progress bar: each rank's step as it happens
                        self.on_progress(sp.who, sp.progress)
                elif kind == "error":
                    self.out.errors.setdefault(sp.who, {k: v for k, v in msg.items() if k not in ("m", "who")})
                elif kind != "hello" and self.on_message is not None:
                    self.on_message(sp.who, msg)  # the job's own messages, in order with its records

    def _record(self, rec: dict[str, Any]) -> None:
        self.out.records.append(rec)
        if self.on_record is not None:
            self.on_record(rec)

    def stall(self, stall_s: float, startup_s: float | None, ended: Collection[str] = ()) -> tuple[str, str] | None:
        """(who, message) when the stall policy ends the job now; None otherwise. `ended`: processes that
        have exited (their silence says nothing)."""
        for said in self.out.errors.values():  # a rank's own watchdog named who stalled, maybe on another node
            if said.get("stalled"):
                return str(said["stalled"]), str(said.get("message"))
        now = time.monotonic()
        live = [sp for sp in self.speakers.values() if sp.who not in ended]
        first = startup_s if startup_s is not None else stall_s  # bound on a process's first word
        if now - self.started > first:
            if not self.speakers:
                return "the job", f"the job said nothing for {first:g} s after it started"
            for sp in live:
                if sp.path is None:
                    return sp.who, f"{sp.who} stopped answering: it never started within {first:g} s"
        heard = [sp for sp in live if sp.path is not None]
        if not heard:
            return None
        silent = max(heard, key=lambda sp: now - sp.last_alive)
        if now - silent.last_alive > stall_s:
            return silent.who, _silent(silent, now)
        if not all(sp.stepping for sp in live):
            if startup_s is not None and now - self.started > startup_s:
                late = next(sp for sp in live if not sp.stepping)
                return late.who, f"{late.who} did not start within {startup_s:g} s ({_where(late)})"
            return None
        if all(now - sp.last_progress > stall_s for sp in heard):
            behind = min(heard, key=lambda sp: (now - sp.last_alive <= DEAD_AFTER_S, sp.last_progress))
            return behind.who, (f"{behind.who} stopped answering: no progress from any process for "
                                f"{stall_s:g} s, {behind.who} furthest behind ({_where(behind)})")
        return None

    def silent_one(self, among: Collection[str]) -> tuple[str, str] | None:
        """(who, message) for a process of `among` whose pulse is older than DEAD_AFTER_S (stopped)."""
        now = time.monotonic()
        for sp in self.speakers.values():
            if sp.who in among and sp.path is not None and now - sp.last_alive > DEAD_AFTER_S:
                return sp.who, _silent(sp, now)
        return None


def _silent(sp: _Speaker, now: float) -> str:
    return (f"{sp.who} stopped answering: no sign of life for {now - sp.last_alive:.0f} s "
            f"({_where(sp)}; stopped, or hung where no time-out reaches)")


def _where(sp: _Speaker) -> str:
    if sp.path is None:
        return "it never started"
    p = sp.progress
    if "step" in p:
        total = f" of {p['steps']}" if p.get("steps") is not None else ""
        return f"last at step {p['step']}{total}"
    if p.get("phase"):
        return f"last at {p['phase']}"
    if sp.records:
        return f"after {sp.records} record(s)"
    return "before its first step"


def _read_lines(path: Path, offset: int) -> tuple[list[bytes], int]:
    """Complete lines past `offset`; a line still being written waits for the next poll."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            chunk = fh.read()
    except FileNotFoundError:
        return [], offset
    end = chunk.rfind(b"\n") + 1
    return chunk[:end].splitlines(), offset + end


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        v = json.loads(line.decode("utf-8", errors="replace"))
    except json.JSONDecodeError:
        return None
    return v if isinstance(v, dict) else None


def run(argv: Sequence[str] | Mapping[str, Sequence[str]], *, workspace: Path, env: dict[str, str] | None = None,
        fabric: Fabric | None = None, log_dir: str | None = None, stall_s: float | None = None,
        startup_s: float | None = None, budget_s: float | None = None,
        on_record: Callable[[dict[str, Any]], None] | None = None, records_from: Sequence[Path] = (),
        expect: Sequence[str] = (), grace_s: float = procs.GRACE_S, capture: bool = True,
        on_poll: Callable[[], None] | None = None, on_start: Callable[[Launch], None] | None = None,
        on_progress: Callable[[str, dict[str, Any]], None] | None = None,
        on_message: Callable[[str, dict[str, Any]], None] | None = None, user_job: bool = False,
        outcome: Outcome | None = None) -> Outcome:
    """Run argv to its end under the policy in the module docstring; see Outcome for what comes back.

    `argv`: one command, or {who: command} for a job of several processes (each speaks as `who`; they
    are the expected speakers unless `expect` says otherwise). `env`: the base environment (this
    process's by default); `fabric`: applied around the child (None: nothing to apply); `log_dir`: where
    NCCL's INFO log goes (fabrics/env.py); `expect`: the speakers that must show up (e.g. "rank 0",
    "rank 1"), so one that never starts is named too; `capture`: False leaves the children's stdout and
    stderr on ours (as they happen); `on_start` gets the applied fabric's Launch (its facts: masked
    variables, namespace) before the child starts; `on_poll` is called after each read of the workspace;
    `on_progress`: (who, what it said) for each progress message (e.g. ("rank 1", {"step": 3, "steps":
    8})); `on_message`: (who, message) for the job's other messages on its channel (Channel.send);
    `user_job`: a command of the user's own (module docstring); `outcome`: the Outcome to fill, for a caller
    that reads it after an interruption (which goes on up as an exception, with returncode and command set)."""
    ws = Path(workspace)
    out = outcome if outcome is not None else Outcome(returncode=None)
    base = dict(os.environ if env is None else env)
    bytecode.apply(base)  # where each child would compile torch from source: bytecode in fabricbench's cache
    base[channel.ENV] = str(ws)
    # a child's traceback goes to one log file that outlives the workspace (named once, by the outermost job)
    base.setdefault(channel.LOG_ENV, os.path.join(tempfile.gettempdir(), f"fabricbench-{os.getpid()}.log"))
    for var in ("TMPDIR", "TEMP", "TMP"):  # what the job's tools leave in a temp folder goes with ws
        base[var] = str(ws)
    named = dict(argv) if isinstance(argv, Mapping) else None
    try:
        ctx = applied(fabric, base, log_dir=log_dir) if fabric is not None else contextlib.nullcontext(None)
        with ctx as launch:
            child_env = launch.env if launch is not None else base
            wrap = launch.argv if launch is not None else list
            cmds = {who: wrap(a) for who, a in named.items()} if named is not None else {None: wrap(argv)}
            out.command = next(iter(cmds.values())) if named is None else []
            out.warnings = list(launch.warnings) if launch is not None else []
            if on_start is not None and launch is not None:
                on_start(launch)
            watch = _Watch(ws, records_from, expect or list(named or ()), on_record, out, on_progress, on_message)
            with procs.terminated_as_interrupt(), \
                    (procs.adopting() if user_job else contextlib.nullcontext(None)) as before:
                try:
                    _supervise(cmds, child_env, ws, out, watch, stall_s=stall_s, startup_s=startup_s,
                               budget_s=budget_s, grace_s=grace_s, capture=capture, on_poll=on_poll,
                               forward=user_job)
                finally:
                    if before is not None:
                        procs.kill_adopted(before)
    except FabricWaived as e:
        out.waived = str(e)
    return out


def _supervise(cmds: dict[str | None, list[str]], env, ws: Path, out: Outcome, watch: _Watch, *, stall_s,
               startup_s, budget_s, grace_s, capture: bool, on_poll, forward: bool = False) -> None:
    paths = (ws / "job.stdout", ws / "job.stderr")
    with contextlib.ExitStack() as files:
        so, se = (files.enter_context(open(pth, "w+")) for pth in paths) if capture else (None, None)
        ps: dict[str | None, Any] = {}
        ended: dict[str, int] = {}  # who -> exit status, of the named processes that have exited
        failing = None  # when the first of several processes failed
        deadline = None if budget_s is None else time.monotonic() + budget_s
        try:
            for who, cmd in cmds.items():
                ps[who] = procs.spawn(cmd, env=env, stdout=so, stderr=se)
            while any(p.poll() is None for p in ps.values()):
                procs.wait_any(list(ps.values()), POLL_S)  # at once when a process ends
                watch.poll()
                if on_poll is not None:
                    on_poll()
                now = time.monotonic()
                if deadline is not None and now > deadline:
                    out.timed_out = True
                    out.message = f"did not finish within {budget_s:g} s"
                    procs.kill_all(list(ps.values()), grace_s)
                    break
                ended.update({w: p.returncode for w, p in ps.items() if w is not None and p.poll() is not None})
                verdict = watch.stall(stall_s, startup_s, ended) if stall_s is not None else None
                if verdict is not None:
                    out.stalled, out.message = verdict
                    out.failed = verdict[0] if None not in ps else None
                    procs.kill_all(list(ps.values()), grace_s=0)  # a stopped process cannot act on SIGTERM
                    break
                several = None not in ps  # a single command's own failure is its exit, handled below
                if several and failing is None and (out.errors or any(rc != 0 for rc in ended.values())):
                    failing = now
                if failing is not None and now - failing > SETTLE_S:  # one of several failed: the job ends
                    _blame(out, watch, ps, ended)
                    procs.kill_all(list(ps.values()), grace_s=0)
                    break
        except BaseException as e:
            try:
                if forward and isinstance(e, KeyboardInterrupt):  # the user's job hears what we heard
                    _forward(ps, int(getattr(e, "signum", signal.SIGINT)), grace_s)
            finally:
                procs.kill_all(list(ps.values()), grace_s=min(grace_s, 1.0))
                if None in ps:
                    out.returncode = ps[None].returncode
            watch.poll()  # what was finished before the interruption is kept
            raise
        for p in ps.values():
            procs.signal_group(p.pid, 9)  # strays a child left in its group
        watch.poll()
        if named := {w: p for w, p in ps.items() if w is not None}:
            out.returncodes = {w: p.returncode for w, p in named.items()}
            if out.failed is None and not out.message:
                _blame(out, watch, ps, out.returncodes)
            bad = out.returncodes.get(out.failed) if out.failed else 0
            out.returncode = None if out.stalled or out.timed_out else bad
        else:
            out.returncode = None if out.message else ps[None].returncode
    if capture:
        out.stdout, out.stderr = (pth.read_text(errors="replace") for pth in paths)


def _forward(ps: dict, signum: int, grace_s: float) -> None:
    """Send `signum` to each process's group, and give them grace_s to end on it."""
    live = [p for p in ps.values() if p.poll() is None]
    for p in live:
        procs.signal_group(p.pid, signum)
    procs.wait_all(live, grace_s)


def _blame(out: Outcome, watch: _Watch, ps: dict, ended: dict[str, int | None]) -> None:
    """Of several processes, the one whose failure ends the job: one that died without saying why, else
    one still running that stopped answering, else the first that said why (None: every one ended well)."""
    watch.poll()
    for who, rc in ended.items():
        if rc and who not in out.errors:
            out.failed, out.message = who, f"{who} died ({_how(rc)}) before it finished"
            return
    silent = watch.silent_one([w for w, p in ps.items() if w is not None and p.poll() is None])
    if silent is not None:
        out.stalled, out.message = silent
        out.failed = silent[0]
        return
    if out.errors:
        out.failed = next(iter(out.errors))
    elif any(ended.values()):
        out.failed = next(w for w, rc in ended.items() if rc)


def _how(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit status {rc}"
