"""The process primitives under the one child runner (fabricbench/jobs/runner.py): its own process group
per child, dead with its parent, killed as a group; temp folders; the SIGINT/SIGTERM/SIGHUP policy; the guard.

A child run goes through jobs.run, never through these directly (the runner applies the fabric, the stall
and budget policy and the workspace); what else uses this module is the signal policy (the CLI's entry,
fabrics.apply, study) and the guard that torchrun's ranks start under (training/launch.py).

    from fabricbench import procs
    p = procs.spawn(argv, env=env)        # a Popen; procs.kill_tree(p) ends it and all it started
    procs.wait_any([p, q], 0.2)           # back when one of them exits, or after 0.2 s
    with procs.temp_dir("train") as tmp:  # removed on exit, Ctrl-C included; stale ones at the next start
    procs.install()                       # SIGTERM, SIGHUP -> procs.Terminated (a KeyboardInterrupt), 143, 129
    python -m fabricbench.procs MODULE ARGS...   # run MODULE as __main__, dying with this process's parent

Why each piece:
- A process group per child, so that a timeout or Ctrl-C ends everything the child started, not only
  the child (`os.killpg`). The group is not the terminal's, so a Ctrl-C in the terminal reaches only
  fabricbench, which then ends the children itself (and knows what it measured).
- PR_SET_PDEATHSIG(SIGKILL) on Linux: when fabricbench is killed with SIGKILL it can run no clean-up, so
  the kernel kills its children. The signal is sent when the *thread* that forked the child exits:
  spawn from a thread that outlives the child (the main thread, everywhere in fabricbench).
- A launcher that puts its own children in new sessions (torchrun does, start_new_session=True) hides
  them from our group kill; have it start them as `python -m fabricbench.procs MODULE`, which sets the
  death signal in the grandchild itself, so SIGKILL flows down the chain: us -> torchrun -> ranks. The
  guard then checks that the fabricbench process that started the chain is still among its ancestors
  (FABRICBENCH_PARENT_PID), so a launcher that died before the ask cannot leave it running.
- Temporary folders (tempdirs.py, re-exported here) carry the pid of the process that made them: one
  whose process is gone is left over from a SIGKILL and removed by the next temp_dir().
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

from fabricbench.exitcodes import Exit, by_signal
# the runner's primitives in one import: the temporary folders are tempdirs.py's concern
from fabricbench.tempdirs import TEMP_PREFIX, clean_stale, temp_dir  # noqa: F401

GRACE_S = 5.0  # SIGTERM -> SIGKILL: time for a child to shut its own children down
REAP_S = 10.0  # after SIGKILL: a process in uninterruptible sleep (D state) is left to init past this
PARENT_ENV = "FABRICBENCH_PARENT_PID"  # the pid a `python -m fabricbench.procs` child must find as parent
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _prctl():
    """libc's prctl, looked up here (never in a freshly forked child, where dlopen is unsafe)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


def die_with_parent(parent_pid: int | None) -> None:
    """Ask the kernel for SIGKILL when our parent ends; if it already ended (the race before the ask), die.

    `parent_pid`: the parent we expect (None: take the current one as it is, no check)."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent_pid is not None and os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGKILL)


def spawn(argv: Sequence[str], *, env: dict[str, str] | None = None, cwd: str | os.PathLike | None = None,
          stdin: Any = subprocess.DEVNULL, stdout: Any = None, stderr: Any = None,
          text: bool = True) -> subprocess.Popen:
    """Start argv in a new process group that dies with this process (Linux). stdin defaults to
    /dev/null: a background process group that reads the terminal would be stopped by SIGTTIN."""
    parent = os.getpid()
    env = dict(os.environ if env is None else env)
    env[PARENT_ENV] = str(parent)
    return subprocess.Popen(list(argv), env=env, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr,
                            process_group=0,
                            preexec_fn=lambda: die_with_parent(parent),
                            text=text, errors="replace" if text else None)


def signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to a process group; False when no process is left in it."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:  # a member changed credentials (setuid helper); the leader is ours to kill
        return False


def kill_tree(p: subprocess.Popen, grace_s: float = GRACE_S) -> int | None:
    """End p's process group: SIGTERM (and SIGCONT, so a stopped member can act on it), wait up to
    grace_s for the leader, then SIGKILL the whole group (it works on stopped processes) and reap the
    leader. Returns the leader's exit status."""
    pgid = p.pid  # spawn() made the child the leader of its own group
    if grace_s > 0 and p.poll() is None:
        signal_group(pgid, signal.SIGTERM)
        signal_group(pgid, signal.SIGCONT)
        try:
            p.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    # Also after the leader exited: whatever it left in the group goes too. The group id cannot name a
    # stranger's group while a member lives (Linux keeps a pid allocated while it is in use as a pgid).
    signal_group(pgid, signal.SIGKILL)
    try:
        p.kill()
    except ProcessLookupError:
        pass
    try:
        return p.wait(timeout=REAP_S)
    except subprocess.TimeoutExpired:
        return p.returncode


def kill_all(ps: Sequence[subprocess.Popen], grace_s: float = 0.0) -> None:
    """kill_tree for several children, with one grace for all of them rather than one after another."""
    if grace_s > 0:
        live = [p for p in ps if p.poll() is None]
        for p in live:
            signal_group(p.pid, signal.SIGTERM)
            signal_group(p.pid, signal.SIGCONT)
        wait_all(live, grace_s)
    for p in ps:
        kill_tree(p, grace_s=0)


def wait_all(ps: Sequence[subprocess.Popen], grace_s: float) -> None:
    """Wait up to grace_s for all of `ps` together (one deadline, not one grace each)."""
    deadline = time.monotonic() + grace_s
    for p in ps:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass


def wait_any(ps: Sequence[subprocess.Popen], timeout_s: float) -> None:
    """Return when one of `ps` has exited, or after `timeout_s`, whichever comes first.

    A supervisor that slept its whole poll interval noticed a job's end up to that interval late: 0.1 s on
    average of every train run's wall at POLL_S = 0.2. Linux's pidfds make the wait end at the
    exit itself; where they are missing (other systems, old kernels) it sleeps, as before."""
    running = [p for p in ps if p.poll() is None]
    if not running:
        return
    fds: list[int] = []
    try:
        for p in running:
            fds.append(os.pidfd_open(p.pid))
        select.select(fds, [], [], timeout_s)
    except (AttributeError, OSError):  # no pidfd_open here, or a process reaped meanwhile: sleep as before
        time.sleep(timeout_s)
    finally:
        for fd in fds:
            os.close(fd)


# -- signals: one policy for SIGINT, SIGTERM and SIGHUP in every command ------------------------------------
# SIGTERM raises Terminated, a KeyboardInterrupt: every path that already stops cleanly on Ctrl-C (kills its
# children's process groups, keeps what was measured, removes namespaces and temp folders in `finally`)
# does the same on SIGTERM, and on SIGHUP (a closed terminal or SSH session: HungUp). The CLI turns each
# into one line and the shell's status 128 + signal: 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP. A SIGHUP that
# was ignored when the process started (`nohup fabricbench ...`) stays ignored.
class Terminated(KeyboardInterrupt):
    """SIGTERM arrived; ends the run as Ctrl-C does, with exit status 143."""

    signum = signal.SIGTERM


class HungUp(Terminated):
    """SIGHUP arrived (the terminal or SSH session closed); ends the run as SIGTERM does, exit status 129."""

    signum = signal.SIGHUP


def age_s(pid: int | None = None) -> float:
    """Seconds since the process started (this one by default), from /proc (start time in clock ticks
    after boot) and the boot clock; 0.0 where that cannot be read."""
    try:
        with open(f"/proc/{pid or os.getpid()}/stat", encoding="ascii") as fh:
            ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


def exit_status(e: BaseException) -> Exit:
    """Exit.INTERRUPTED (130) for Ctrl-C, TERMINATED (143) for SIGTERM, HUNG_UP (129) for SIGHUP."""
    return by_signal(int(getattr(e, "signum", signal.SIGINT)))


def said_by(e: BaseException) -> str:
    """What stopped the run, in a person's words: "Ctrl-C", "SIGTERM" or "SIGHUP"."""
    return {signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}.get(getattr(e, "signum", None), "Ctrl-C")


def message(e: BaseException) -> str:
    """The one line for a run stopped by a signal. What was kept is the command's to say (`e.kept`, set
    where the command knows it); without it, a line that claims nothing was written."""
    word = "Hung up" if isinstance(e, HungUp) else "Terminated" if isinstance(e, Terminated) else "Interrupted"
    kept = getattr(e, "kept", None)
    if kept:
        return f"{word} ({said_by(e)}); children ended; {kept}."
    return f"{word} ({said_by(e)}); children ended, temporary folders removed; what was written before is kept."


def _raise_terminated(signum, frame) -> None:
    raise HungUp() if signum == signal.SIGHUP else Terminated()


def _signals() -> list[int]:
    """SIGTERM, and SIGHUP unless it was ignored (nohup): those install() turns into Terminated/HungUp."""
    return [signal.SIGTERM] + ([] if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN else [signal.SIGHUP])


def install() -> None:
    """SIGTERM (and SIGHUP) -> Terminated in this (main) thread, for the whole process (the CLI's entry)."""
    if threading.current_thread() is threading.main_thread():
        for sig in _signals():
            signal.signal(sig, _raise_terminated)


@contextlib.contextmanager
def terminated_as_interrupt() -> Iterator[None]:
    """install() for a block only (library callers that want clean-up on SIGTERM/SIGHUP), then the old
    handlers."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is _raise_terminated:
        yield
        return
    old = {sig: signal.signal(sig, _raise_terminated) for sig in _signals()}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


# -- `python -m fabricbench.procs MODULE ARGS...` ----------------------------------------------------------
def guard_argv(module: str, *args: str) -> list[str]:
    """The arguments that run `module` as __main__ under the death-signal guard (for torchrun's -m)."""
    return ["-m", "fabricbench.procs", module, *args]


def _ancestors(depth: int = 4) -> list[int]:
    """Our parent, its parent... (Linux /proc), nearest first."""
    out, pid = [], os.getppid()
    for _ in range(depth):
        out.append(pid)
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])  # field 4, after the "(comm)" field
        except (OSError, ValueError, IndexError):
            break
        if pid <= 1:
            break
    return out


def children(pid: int) -> list[int]:
    """The process's children, every thread's (Linux /proc/PID/task/*/children); [] once it has gone. A
    process or thread may end during the walk: what went is skipped, never raised."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").glob("*/children"))
    except OSError:  # it ended between Path.glob's look at the folder and its listing
        return []
    kids: list[int] = []
    for t in tasks:
        with contextlib.suppress(OSError, ValueError):
            kids += [int(k) for k in t.read_text().split()]
    return kids


# -- what a job leaves in sessions of its own ---------------------------------------------------------------
PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
PR_GET_CHILD_SUBREAPER = 37


@contextlib.contextmanager
def adopting() -> Iterator[set[int]]:
    """While inside, this process is a child subreaper (Linux): a process that a job started in a session of
    its own (torchrun's ranks: start_new_session=True) and left behind when it died becomes our child
    instead of init's, where `kill_adopted` finds it. Yields the pids that were our children before (never
    adopted, never killed). Where prctl is missing, nothing is adopted and the group kill is all there is."""
    before = set(children(os.getpid()))
    if _PRCTL is None:
        yield before
        return
    was = ctypes.c_int(0)
    _PRCTL(PR_GET_CHILD_SUBREAPER, ctypes.byref(was), 0, 0, 0)
    _PRCTL(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        yield before
    finally:
        if not was.value:
            _PRCTL(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def kill_adopted(before: set[int], within_s: float = REAP_S) -> list[int]:
    """SIGKILL every child of ours not in `before` (orphans adopted inside `adopting`) and reap it; each
    one's own children come to us in turn as it dies, so this goes on until none is left or `within_s`
    passed. Returns the pids killed. Only children of this process are ever touched, never a name match."""
    killed: list[int] = []
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        strays = [pid for pid in children(os.getpid()) if pid not in before]
        if not strays:
            break
        for pid in strays:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
            if pid not in killed:
                killed.append(pid)
        time.sleep(0.02)
    return killed


def _main(argv: list[str]) -> None:
    import runpy

    if not argv:
        sys.exit("usage: python -m fabricbench.procs MODULE [ARGS...]")
    die_with_parent(None)
    expected = os.environ.get(PARENT_ENV, "")
    if _PRCTL is not None and expected.isdigit() and int(expected) not in _ancestors():
        os.kill(os.getpid(), signal.SIGKILL)  # the chain above us ended before we asked to end with it
    os.environ[PARENT_ENV] = str(os.getpid())  # for what MODULE starts in turn
    sys.argv = [argv[0], *argv[1:]]
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _main(sys.argv[1:])
