"""How long the README's test commands take here: each one run once, one line each, as the README quotes them.

    python3 benchmarks/test_times/times.py [default] [slow] [multinode] [--out FILE] [--log FILE]

Each line: the command, its wall, pytest's own count line, the machine's CPUs and its load average at the
start and the end (the README's times are a 2-core VM's; other work on it slows them). Exit status: 0 when
every command passed, else the first failing command's pytest status.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone

COMMANDS = {
    "default": ["-q"],
    "slow": ["-q", "-m", "slow"],
    "multinode": ["-q", "-m", "multinode"],
}
COUNTS = re.compile(r"^=*\s*(\d[^=]*(?:passed|failed|error)[^=]*?) in [\d.]+s", re.M)


def minutes(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s} s" if m else f"{s} s"


def _terminal_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def run(name: str, log: str | None = None) -> tuple[int, str]:
    args = [sys.executable, "-m", "pytest", *COMMANDS[name]]
    load0 = os.getloadavg()[0]
    start = time.monotonic()
    # a shell's background job starts with Ctrl-C ignored, and one under nohup with SIGHUP ignored, which
    # their children inherit: the tests that send these signals to a command would see them ignored (as
    # the CLI rightly keeps an ignored one), so each run starts with both at their defaults, as in a terminal
    done = subprocess.run(args, capture_output=True, text=True, preexec_fn=_terminal_signals)
    wall = time.monotonic() - start
    if log:  # the whole output, to read what failed
        with open(log, "a", encoding="utf-8") as f:
            f.write(done.stdout + done.stderr)
    counts = COUNTS.findall(done.stdout)
    line = (f"{datetime.now(timezone.utc):%Y-%m-%d} `python3 -m pytest {' '.join(COMMANDS[name])}`: {minutes(wall)}, "
            f"{counts[-1].strip() if counts else 'no count line (pytest exit ' + str(done.returncode) + ')'}; "
            f"{os.cpu_count()} CPUs, load {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    return done.returncode, line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("which", nargs="*", default=["default"], help="default, slow, multinode")
    ap.add_argument("--out", help="append the lines to this file too")
    ap.add_argument("--log", help="append each command's whole output to this file")
    a = ap.parse_args(argv)
    unknown = [w for w in a.which if w not in COMMANDS]
    if unknown:
        ap.error(f"unknown command(s) {unknown}: choose from {sorted(COMMANDS)}")
    status = 0
    for name in a.which:
        code, line = run(name, a.log)
        print(line, flush=True)
        if a.out:
            with open(a.out, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        status = status or code
    return status


if __name__ == "__main__":
    sys.exit(main())
