"""Progress of anything that takes more than a few seconds, the same way for every command and the library.

    fabricbench compare --fabrics default,lo:GLOO_SOCKET_IFNAME=lo --engine torch --backend gloo --nprocs 2

On a terminal (stderr and stdout both): a bar on stderr (rich, transient: it goes when the work ends,
leaving the results). Otherwise (a CI log, a file, `... | tee log`): no bar, but a plain line on stderr
every LOG_EVERY_S seconds while the work runs, whether a step ended or not (a thread of its own says where
it is when a study unit or a sweep's ranks take a minute), and one at the end, so a log shows that the work
is alive and how far it got. quiet (`--quiet`, `--json`): nothing.

    with Progress("compare", total=12, quiet=quiet) as p:
        p.advance(item="p2p-off all_reduce 1M")
        p.say("p2p-off: transport SHM")         # a line above the bar, never through it
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable, TextIO

LOG_EVERY_S = 5.0  # not on a terminal: one progress line at most this often ("every few seconds")


def _elapsed(s: float) -> str:
    s = int(s)
    return f"{s // 3600}h{s // 60 % 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def piped_width(environ: dict[str, str] | None = None) -> int | None:
    """The width a pipe asked for with COLUMNS (a whole number from 20 to 10,000), else None. The one
    reading of COLUMNS: progress lines here, tables and listings in report.table."""
    raw = (os.environ if environ is None else environ).get("COLUMNS", "").strip()
    return int(raw) if raw.isascii() and raw.isdigit() and 20 <= int(raw) <= 10_000 else None


def _tty(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:  # a closed stream
        return False


class Progress:
    """Progress through `total` steps (None: unknown), on `stream` (default stderr)."""

    def __init__(self, what: str, total: int | None = None, *, quiet: bool = False, stream: TextIO | None = None,
                 log_every_s: float = LOG_EVERY_S, clock: Callable[[], float] = time.monotonic,
                 periodic: bool = True) -> None:
        self.what, self.total, self.done = what, total, 0
        self.stream = stream if stream is not None else sys.stderr
        self.clock, self.log_every_s = clock, log_every_s
        # a bar only where the whole output is a terminal: with stdout piped (`| tee log`), a bar redrawn on
        # stderr would leave the log silent until the end
        self.mode = "off" if quiet else ("bar" if _tty(self.stream) and _tty(sys.stdout) else "log")
        self.item = ""
        self._bar: Any = None
        self._task: Any = None
        self._start = self._last = clock()
        self._said: int | None = None  # the count the last line showed (the end says it once)
        # log mode: a line every log_every_s even while nothing advances (a unit that runs a minute)
        self._periodic = periodic and self.mode == "log"
        self._lock = threading.Lock()  # the periodic lines and the caller's never interleave
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

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
        elif self._periodic:
            self._thread = threading.Thread(target=self._say_periodically, name=f"progress-{self.what}", daemon=True)
            self._thread.start()
        return self

    def _say_periodically(self) -> None:
        while not self._stop.wait(self.log_every_s / 5):  # checked often, said every log_every_s
            with self._lock:
                if self.clock() - self._last >= self.log_every_s:
                    self._line()

    def __exit__(self, *exc: Any) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        elif self.mode == "log" and self.done and self.clock() - self._start >= self.log_every_s \
                and self._said != self.done:
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
            with self._lock:
                self._line()

    def update(self, *, item: str | None = None, completed: int | None = None) -> None:
        """Name what is running now, and/or set how many steps are done (e.g. the slowest rank's step)."""
        moved = (item is not None and item != self.item) or (completed is not None and completed != self.done)
        if item is not None:
            self.item = item
        if completed is not None:
            self.done = completed
        if moved and self.mode == "log" and self.clock() - self._last >= self.log_every_s:
            with self._lock:
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
            with self._lock:
                print(line, file=self.stream, flush=True)

    def _line(self, *, final: bool = False) -> None:
        self._last, self._said = self.clock(), self.done
        of = f"/{self.total}" if self.total is not None else ""
        pct = f" ({100 * self.done // self.total}%)" if self.total else ""
        line = f"{self.what}: {self.done}{of}{pct} done after {_elapsed(self._last - self._start)}"
        if not final and self.item:  # what runs now, cut to COLUMNS where a pipe set it (a log line, not a figure)
            room = (piped_width() or 10_000) - len(line) - len(", now ")
            item = self.item if len(self.item) <= room else self.item[:max(room - 1, 0)].rstrip() + "…"
            line += f", now {item}" if room > 8 else ""
        print(line, file=self.stream, flush=True)
