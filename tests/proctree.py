"""Processes of a test's commands, found through /proc/<pid>/task/*/children (by pid, never by name), and the
`cmd` fixture that starts `python -m fabricbench ARGS` in a session of its own (test_hangs*.py share them).
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


children = procs.children  # by pid, every thread's (fabricbench/procs.py)


def alive(pid: int) -> bool:
    """Running, sleeping or stopped; a zombie (dead, not yet reaped by init) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_for(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")


def assert_gone(pids, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    left = [p for p in pids if alive(p)]
    assert not left, f"processes left: {left}"


class Cmd:
    """`python -m fabricbench ARGS` in a session of its own (the test can always clean up), output in files."""

    def __init__(self, tmp: Path, args: list[str], env: dict[str, str] | None = None) -> None:
        self.err_path = tmp / "stderr.txt"
        self.out_fh, self.err_fh = open(tmp / "stdout.txt", "w"), open(self.err_path, "w")
        e = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
        e.update(env or {})
        self.p = subprocess.Popen([sys.executable, "-m", "fabricbench", *args], stdout=self.out_fh,
                                  stderr=self.err_fh, env=e, start_new_session=True)

    def wait(self, timeout: float) -> tuple[int, float]:
        t0 = time.monotonic()
        rc = self.p.wait(timeout=timeout)
        return rc, time.monotonic() - t0

    @property
    def stderr(self) -> str:
        self.err_fh.flush()
        return self.err_path.read_text()

    def close(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()
        self.out_fh.close()
        self.err_fh.close()


@pytest.fixture(name="cmd")
def cmd_fixture(tmp_path):  # a test module imports it to take `cmd`
    started = []

    def start(args, env=None):
        c = Cmd(tmp_path, args, env)
        started.append(c)
        return c

    yield start
    for c in started:
        c.close()
