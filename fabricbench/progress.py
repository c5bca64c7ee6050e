"""Progress of anything that takes more than a few seconds, the same way for every command and the library.

    fabricbench compare --fabrics default,lo:GLOO_SOCKET_IFNAME=lo --engine torch --backend gloo --nprocs 2

On a terminal: a bar on stderr (rich, transient: it goes when the work ends, leaving the results). Not on a
terminal (a CI log, a file): no bar, but a plain line every LOG_EVERY_S seconds and one at the end, so a
log shows that the work is alive and how far it got. quiet (`--quiet`, `--json`): nothing.

    with Progress("compare", total=12, quiet=quiet) as p:
        p.advance(item="p2p-off all_reduce 1M")
        p.say("p2p-off: transport SHM")         # a line above the bar, never through it
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, TextIO

LOG_EVERY_S = 30.0  # not on a terminal: one progress line at most this often


def _elapsed(s: float) -> str:
    s = int(s)
    return f"{s // 3600}h{s // 60 % 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class Progress:
    """Progress through `total` steps (None: unknown), on `stream` (default stderr)."""

    def __init__(self, what: str, total: int | None = None, *, quiet: bool = False, stream: TextIO | None = None,
                 log_every_s: float = LOG_EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.what, self.total, self.done = what, total, 0
        self.stream = stream if stream is not None else sys.stderr
        self.clock, self.log_every_s = clock, log_every_s
        isatty = getattr(self.stream, "isatty", None)
        self.mode = "off" if quiet else ("bar" if isatty is not None and isatty() else "log")
        self.item = ""
        self._bar: Any = None
        self._task: Any = None
        self._start = self._last = clock()

    def __enter__(self) -> "Progress":
        if self.mode == "bar":
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeElapsedColumn

            self._bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("{task.fields[item]}"),
                            console=Console(file=self.stream), transient=True,
                            # stdout lines (tables, records) print above the bar only where stdout is this
                            # terminal too; a piped stdout stays untouched
                            redirect_stdout=sys.stdout.isatty(), redirect_stderr=True)
            self._bar.start()
            self._task = self._bar.add_task(self.what, total=self.total, item="")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        elif self.mode == "log" and self.done and self.clock() - self._start >= self.log_every_s:
            self._line(final=True)  # long work ends with a line in the log; short work stays quiet

    @property
    def live(self) -> bool:
        """A bar is on the terminal now (print through say(), not around it)."""
        return self._bar is not None

    def advance(self, n: int = 1, *, item: str = "") -> None:
        """`n` more steps done; `item` names what is running now (e.g. "p2p-off all_reduce 1M")."""
        self.done += n
        self.item = item
        if self._bar is not None:
            self._bar.update(self._task, advance=n, item=item)
        elif self.mode == "log" and self.clock() - self._last >= self.log_every_s:
            self._line()

    def update(self, *, item: str | None = None, completed: int | None = None) -> None:
        """Name what is running now, and/or set how many steps are done (e.g. the slowest rank's step)."""
        if item is not None:
            self.item = item
        if completed is not None and completed != self.done:
            self.done = completed
            if self.mode == "log" and self.clock() - self._last >= self.log_every_s:
                self._line()
        if self._bar is not None:
            self._bar.update(self._task, item=self.item, completed=self.done)

    def say(self, line: str) -> None:
        """A message line (a warning, a failure): above the bar on a terminal (never garbling it), plain
        otherwise, quiet or not (the caller leaves out what quiet should hide)."""
        if self._bar is not None:
            from rich.markup import escape

            self._bar.console.print(escape(line))
        else:
            print(line, file=self.stream, flush=True)

    def _line(self, *, final: bool = False) -> None:
        self._last = self.clock()
        of = f"/{self.total}" if self.total is not None else ""
        pct = f" ({100 * self.done // self.total}%)" if self.total else ""
        now = "" if final or not self.item else f", now {self.item}"
        print(f"{self.what}: {self.done}{of}{pct} done after {_elapsed(self._last - self._start)}{now}",
              file=self.stream, flush=True)
