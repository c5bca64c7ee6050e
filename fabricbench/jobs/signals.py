"""One policy for SIGINT and SIGTERM in every orchestrating command.

    fabricbench sweep ... (SIGTERM)  ->  "Terminated; results measured so far were written."  exit 143
    fabricbench sweep ... (Ctrl-C)   ->  "Interrupted; results measured so far were written." exit 130

SIGTERM raises Terminated, a KeyboardInterrupt: every path that already stops cleanly on Ctrl-C (kills its
children's process groups, keeps what was measured, removes namespaces and temp folders in `finally`)
does the same on SIGTERM. The CLI turns either into one line and the shell's exit status 128 + signal.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived; ends the run as Ctrl-C does, with exit status 143."""

    signum = signal.SIGTERM


def exit_status(e: BaseException) -> int:
    """130 for Ctrl-C, 143 for SIGTERM."""
    return 128 + int(getattr(e, "signum", signal.SIGINT))


def message(e: BaseException) -> str:
    word = "Terminated" if isinstance(e, Terminated) else "Interrupted"
    return f"{word}; results measured so far were written."


def _raise_terminated(signum, frame) -> None:
    raise Terminated()


def install() -> None:
    """SIGTERM -> Terminated in this (main) thread, for the whole process (the CLI's entry calls it)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)


@contextlib.contextmanager
def terminated_as_interrupt() -> Iterator[None]:
    """install() for a block only (library callers that want clean-up on SIGTERM), then the old handler."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is _raise_terminated:
        yield
        return
    old = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
