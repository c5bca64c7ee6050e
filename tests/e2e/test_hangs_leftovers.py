"""No leftovers: every orchestrating command, killed by SIGINT, SIGTERM, SIGHUP or SIGKILL, leaves no process,
temporary folder or network namespace behind (checked by pid, never by name).

    python3 -m pytest -q -m slow tests/e2e/test_hangs_leftovers.py
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fabricbench import procs
from proctree import assert_gone, children, cmd_fixture, wait_for  # noqa: F401 - cmd_fixture: the `cmd` fixture
from roots import DATA

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")


QUALIFY_SPEC = DATA / "qualify" / "gloo_e2e.toml"
LONG_GLOO = ["--engine", "torch", "--backend", "gloo", "--nprocs", "2", "--ops", "all_reduce", "--sizes",
             "1K-64K:x2", "--iters", "3000", "--warmup", "1", "--timeout", "30"]
ORCHESTRATORS = {
    # name: (argv, how deep the process tree must be before the signal: a measuring process is running;
    # `ip netns exec` execs the child, fabricbench.procs runs a training rank in the same process; on one
    # node the job layer starts train's ranks itself, so a study's tree is study -> train -> ranks)
    "sweep --fabric": (["sweep", *LONG_GLOO, "--fabric", "lo:GLOO_SOCKET_IFNAME=lo", "--quiet"], 2),
    "compare": (["compare", "--fabrics", "shaped:1gbit,default", *LONG_GLOO], 2),
    "qualify": (["qualify", "--spec", str(QUALIFY_SPEC), "--quiet"], 2),
    "study": (["study", "--device", "cpu", "--nprocs", "2", "--model", "tiny-mistral", "--strategies", "ddp",
               "--fabrics", "default,shaped:1gbit", "--steps", "2000", "--warmup-steps", "1", "--batch-size", "2",
               "--seq-len", "16", "--quiet"], 2),
}


def descendants(pid: int) -> list[list[int]]:
    """The process tree under pid, level by level (children, grandchildren...)."""
    levels, level = [], children(pid)
    while level:
        levels.append(level)
        level = sum((children(p) for p in level), [])
    return levels


def our_netns(pid: int) -> list[str]:
    """Network namespaces the process made (shaped fabrics name them fb-<pid>-...)."""
    res = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return [ln.split()[0] for ln in res.stdout.splitlines() if ln.startswith(f"fb-{pid}-")]


def left_in(tmp_root: Path) -> list[Path]:
    return [p for p in tmp_root.iterdir() if p.name.startswith((procs.TEMP_PREFIX, "torchelastic_"))]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL],
                         ids=["INT", "TERM", "HUP", "KILL"])
@pytest.mark.parametrize("name", list(ORCHESTRATORS))
def test_killed_orchestrator_leaves_nothing(cmd, tmp_path, name, sig):
    """No process, temp folder (fabricbench's, torchrun's) or network namespace outlives the
    command. SIGINT exits 130, SIGTERM 143 and SIGHUP 129 with one line; after SIGKILL nothing could run in the
    command, so its children die by the death signal and the next start removes its folders and namespaces."""
    from fabricbench.fabrics import shaped

    argv, depth = ORCHESTRATORS[name]
    tmp_root = tmp_path / "tmp"  # the command's TMPDIR: what it leaves there is ours to see
    tmp_root.mkdir()
    c = cmd([*argv, "--out", str(tmp_path / ("out" if name in ("qualify", "study") else "out.jsonl"))],
            {"TMPDIR": str(tmp_root)})

    def measuring() -> list[list[int]] | None:
        """The tree once a process at `depth` is still there a second later: a short-lived helper at that
        depth (`ldconfig -p`, a fork before its exec) is not the measurement, and CI caught one once."""
        if c.p.poll() is not None:
            return [[-1]]
        before = descendants(c.p.pid)
        if len(before) < depth:
            return None
        time.sleep(1.0)  # let the measurement get going (and a namespace be made)
        after = descendants(c.p.pid)
        return after if len(after) >= depth and set(before[depth - 1]) & set(after[depth - 1]) else None

    tree = wait_for(measuring, 240, "a measuring process")
    assert c.p.poll() is None, c.stderr
    pids = sum(tree, [])
    assert left_in(tmp_root) and len(tree) >= depth  # there was something to clean up
    os.kill(c.p.pid, sig)
    rc, took = c.wait(60)
    print(f"{name}: ended {took:.1f} s after {sig.name}")
    assert rc == {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129, signal.SIGKILL: -9}[sig], c.stderr
    if sig != signal.SIGKILL:
        said = [ln for ln in c.stderr.splitlines() if ln.startswith(("Interrupted", "Terminated", "Hung up"))]
        assert len(said) == 1 and "Traceback" not in c.stderr, c.stderr
    assert_gone(pids, within=procs.GRACE_S + 10)
    if sig == signal.SIGKILL:  # the next fabricbench start removes what a SIGKILL left
        procs.clean_stale(tmp_root)
        if os.geteuid() == 0:
            shaped.remove_stale()
    assert not left_in(tmp_root), left_in(tmp_root)
    assert not our_netns(c.p.pid)
