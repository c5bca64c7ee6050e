"""Slurm's word on a job's nodes while a run goes on: a node drained or set DOWN mid-job, named in one line.

    srun --nodes 2 --ntasks-per-node 1 python -m fabricbench train ... --stall-timeout 20
    scontrol update nodename=node1 state=drain reason=bad-gpu       (an admin, or a node health check)
    -> Warning: Slurm drained node1 mid-job (reason: bad-gpu); this run goes on, but node1 is out of service ...

A drained node keeps the jobs it runs (Slurm only stops giving it new ones), so nothing inside the run would
ever notice: the verdict of whoever drained it would go unseen beside figures measured on that node. A node
set DOWN ends the job's steps on it at once (srun says so); the line names it too when a poll comes first.
The poll is `sinfo` on the step's nodes, at most every POLL_S and at least twice per stall bound, so the
line comes within the bound the run already promises for a rank that stops. Only task 0 of an srun step
watches (one line per job, not one per node). A missing or failing sinfo ends the watch quietly: the watch
is a courtesy to the user's run, never a reason to stop it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from typing import Callable, Iterator, Mapping

from fabricbench.cluster import env

POLL_S = 5.0  # the longest wait between two looks at the nodes
SINFO_TIMEOUT_S = 10.0  # a slurmctld that does not answer in this long is skipped until the next poll
# sinfo's state words (%T) that mean the node is leaving service; a trailing *, ~, #, ! ... is a flag
LEAVING = ("drain", "down", "fail")


def poll_every(stall_s: float | None) -> float:
    """Seconds between polls: POLL_S, or less, so that two polls fall inside the stall bound."""
    return POLL_S if not stall_s else max(0.5, min(POLL_S, stall_s / 2))


def watched_nodes(environ: Mapping[str, str]) -> list[str]:
    """The nodes this process should watch: its srun step's, in task 0 only; [] elsewhere."""
    if environ.get("SLURM_PROCID") != "0" or not env.in_srun_step(environ):
        return []
    return env.expand_nodelist(environ.get("SLURM_STEP_NODELIST") or environ.get("SLURM_JOB_NODELIST", ""))


def leaving(sinfo_out: str) -> dict[str, tuple[str, str]]:
    """{node: (state, reason)} of the nodes `sinfo -h -N -o %N|%T|%E` lists as drained, draining, down or
    failing (a node in two partitions is listed twice: once here)."""
    out: dict[str, tuple[str, str]] = {}
    for line in sinfo_out.splitlines():
        node, _, rest = line.strip().partition("|")
        state, _, reason = rest.partition("|")
        word = state.strip().rstrip("*~#!%$@^-").lower()
        if node and word.startswith(LEAVING):
            out.setdefault(node, (word, reason.strip()))
    return out


def line(node: str, state: str, reason: str) -> str:
    """The one line for a node leaving service mid-job."""
    why = f" (reason: {reason})" if reason and reason.lower() != "none" else ""
    if state.startswith("drain"):
        return (f"Warning: Slurm drained {node} mid-job{why}; this run goes on, but {node} is out of service: "
                f"check it (sinfo -R) before trusting the figures measured there.")
    return (f"Warning: Slurm set {node} {state.upper()} mid-job{why}; Slurm ends this job's steps on it, "
            f"and the figures measured there since are suspect.")


def _sinfo(nodes: list[str], environ: Mapping[str, str]) -> str | None:
    exe = shutil.which("sinfo", path=environ.get("PATH"))
    if exe is None:
        return None
    try:
        p = subprocess.run([exe, "-h", "-N", "-n", ",".join(nodes), "-o", "%N|%T|%E"], capture_output=True,
                           text=True, timeout=SINFO_TIMEOUT_S, env=dict(environ))
    except (OSError, subprocess.TimeoutExpired):
        return ""  # this poll is lost, not the watch: slurmctld may be busy
    return p.stdout if p.returncode == 0 else None


@contextlib.contextmanager
def watch(say: Callable[[str], None], *, stall_s: float | None = None,
          environ: Mapping[str, str] | None = None) -> Iterator[None]:
    """While the block runs, `say` one line for each of the step's nodes that Slurm drains or sets DOWN
    (once per node). Does nothing outside task 0 of an srun step."""
    environ = dict(os.environ if environ is None else environ)
    nodes = watched_nodes(environ)
    if not nodes:
        yield
        return
    stop = threading.Event()
    every = poll_every(stall_s)

    def run() -> None:
        said: set[str] = set()
        while True:
            out = _sinfo(nodes, environ)
            if out is None:  # no sinfo here, or it refuses this cluster: nothing to watch with
                return
            for node, (state, reason) in leaving(out).items():
                if node not in said:
                    said.add(node)
                    say(line(node, state, reason))
            if stop.wait(every):
                return

    thread = threading.Thread(target=run, name="slurm-nodewatch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=SINFO_TIMEOUT_S + 1)  # a hung sinfo is left to its timeout, not waited for
