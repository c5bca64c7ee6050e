"""A check that misses on a busy host is measured once more after the load passes; a miss that no quiet
attempt settles is unknown ("busy host", FB_BUSY_HOST), never critical on the load alone.

    fabricbench qualify --spec builtin:cpu-lab --out q/     (while another job loads the host)

Every sweep and training record carries the other processes' load while it measured (hostload.py); a
check whose units hold a busy record says so in its verdict (`busy_host`), in report.md, junit.xml and
verdicts.json. Before the retry the host is watched in windows of WINDOW_S for up to WAIT_S: the first
quiet window starts it; a host busy throughout gets no retry, as a second busy figure would say no more.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable

from fabricbench import hostload

WAIT_S = 60.0  # how long a busy miss waits for the load to pass before it is reported unknown
WINDOW_S = hostload.LAP_S  # one look at the load: the shortest window whose reading means anything


def note(units: Iterable[Any]) -> str | None:
    """hostload's sentence for the records these units measured, where any was taken on a busy host, with
    the busiest other processes of the busiest of them (whom to wait for)."""
    recs = [r for u in units for r in (u.records or []) if isinstance(r, dict) and r.get("kind") != "qualify_unit"]
    said = hostload.records_note(recs)
    if said is None:
        return None
    loads = [d for d in map(hostload.of, recs) if d and d.get("busy")]
    top = max(loads, key=lambda d: d.get("others_cpus") or 0).get("top") or []
    who = ", ".join(f"{t.get('name')} (pid {t.get('pid')}) {t.get('cpus', 0):.2f}" for t in top if isinstance(t, dict))
    return said + (f"; the busiest: {who}" if who else "")


def wait_for_quiet(name: str, *, echo: Callable[[str], None] | None = None, wait_s: float = WAIT_S,
                   window_s: float = WINDOW_S) -> bool:
    """Watch the host in windows of `window_s` until one is quiet (True) or `wait_s` has passed (False).
    A line per window on `echo`, so that the wait is never silent."""
    say = echo or (lambda line: None)
    start = time.monotonic()
    while True:
        with hostload.watch() as w:
            time.sleep(window_s)
        if w.load is None or not w.load.busy:  # off Linux nothing is read, and nothing says busy
            say(f"{name}: the host is quiet after {time.monotonic() - start:.0f} s; measuring it again")
            return True
        waited = time.monotonic() - start
        if waited + window_s > wait_s:
            say(f"{name}: the host stayed busy for {waited:.0f} s ({hostload.note(w.load)}); no quiet retry")
            return False
        say(f"{name}: missed on a busy host; waiting for the load to pass ({waited:.0f} of {wait_s:.0f} s: "
            f"{hostload.note(w.load)})")
