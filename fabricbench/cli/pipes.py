"""A reader that stops reading is no failure: `fabricbench qualify --list-codes | head -2` exits 0.

    fabricbench sweep --list-ops | head -1; echo "${PIPESTATUS[0]}"     (0)

Python meets a closed pipe as BrokenPipeError at the next write (it ignores SIGPIPE), and click turns that
into exit 1, the status that means "a measurement failed", and a script under `set -o pipefail` would read
it so. Here a stream whose reader has gone becomes a sink instead: the command finishes what it was doing
(whatever it measures still reaches --out, its files are still written) and exits with its own status, 0
where it succeeded. Nothing is said about it: the reader that would read the message has gone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO


def _closed_pipe(e: BaseException) -> bool:
    return isinstance(e, BrokenPipeError) or (isinstance(e, OSError) and e.errno == errno.EPIPE)


class Sinking:
    """`stream`, until its reader goes; from then on, what is written is dropped. Everything but write
    and flush (encoding, isatty, fileno, ...) is the stream's own, so click and rich treat it as it."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.gone = False

    def write(self, text: Any) -> int:
        if self.gone:
            return len(text)
        try:
            return self._stream.write(text)
        except OSError as e:  # a wrong type (TypeError) is the caller's bug and passes, as click's probe needs
            if not _closed_pipe(e):
                raise
            self._sink()
            return len(text)

    def flush(self) -> None:
        if self.gone:
            return
        try:
            self._stream.flush()
        except OSError as e:
            if not _closed_pipe(e):
                raise
            self._sink()

    def _sink(self) -> None:
        self.gone = True
        # The file descriptor itself goes to /dev/null: the stream's own buffer, flushed again at the
        # interpreter's exit, and children started from now on, then write to nothing rather than fail.
        try:
            fd = self._stream.fileno()
        except (OSError, ValueError, AttributeError):  # an in-memory stream has no descriptor to move
            return
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, fd)
        finally:
            os.close(null)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def sinking() -> Iterator[None]:
    """sys.stdout and sys.stderr, each a sink once its reader goes, for the time of one command."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Sinking(saved[0]), Sinking(saved[1])  # type: ignore[assignment]
    try:
        yield
    finally:
        # flushed here, through the sinks: the interpreter's own last flush would meet the closed pipe
        # with neither of them in between, and print a traceback
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = saved
