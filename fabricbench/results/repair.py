"""Repairing a results file before appending to it: every line parses afterwards, nothing is deleted.

    fabricbench sweep --out r.jsonl --resume      (the resume store repairs r.jsonl first: jobs/store.py)

A torn last line (a crash mid-write) is cut off so that its measurement is done again; damaged lines
further up are moved aside to FILE.unreadable, never deleted.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from fabricbench.errors import UsageError
from fabricbench.files import OutputError, check_input
from fabricbench.outputs import folder, refuse_link
from fabricbench.results.records import loads_record, schema_version


def repair(path: str | os.PathLike) -> list[str]:
    """Make every line of a results file parse, for a writer about to append to it (--resume).

    A torn last line (no newline, not JSON: a crash mid-write) is cut off, so its measurement is done
    again. Other lines that do not parse are moved to PATH.unreadable (appended, with the file's own
    mode) and the file rewritten atomically without them. Returns one warning per line moved or cut; []
    when the file was whole or does not exist. A newline is added after a last record that lacks one, so
    the next append starts a line of its own. Only a regular file whose records are fabricbench's is
    changed, and never through a link (a link at --out is refused): a --resume pointed at another file
    must not cut it.
    """
    p = Path(path)
    if not os.path.lexists(p):
        return []
    refuse_link(p, what="results file")  # a link at --out is never cut or appended to
    check_input(p, what="results file")
    with folder(p.parent, what="results file", create=False, follow=True, shown=p) as d:
        with d.open(p.name, "rb") as fh:  # O_NOFOLLOW: a link swapped in since is refused too
            st = os.fstat(fh.fileno())
            try:
                data = fh.read()
            except OSError as e:
                raise UsageError(f"results file {p}: cannot read it ({e.strerror})") from None
        keep, bad, cut_tail, warnings = _sort(p, data)
        if not bad and not cut_tail and (not data or data.endswith(b"\n")):
            return []
        _refuse_foreign(p, keep)
        try:
            if not bad:
                _truncate(d, p, data, cut_tail, st)
                return warnings
            with d.open(p.name + ".unreadable", "ab", perm=stat.S_IMODE(st.st_mode)) as fh:
                os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode))  # 0600 lines stay 0600 when moved aside
                fh.write(b"".join(b + b"\n" for b in bad))
            d.write_atomic(p.name, b"".join(b + b"\n" for b in keep))
        except OSError as e:
            raise OutputError(f"results file {p}: cannot repair it ({e.strerror}); copy the good lines aside") \
                from None
    return warnings


def _sort(p: Path, data: bytes) -> tuple[list[bytes], list[bytes], bool, list[str]]:
    """The lines to keep, the damaged ones, whether the last was torn, and a warning for each damaged."""
    raw = data.split(b"\n")
    keep: list[bytes] = []
    bad: list[bytes] = []
    warnings: list[str] = []
    cut_tail = False
    for i, line in enumerate(raw):
        if not line.strip():
            continue
        try:
            rec = loads_record(line.decode("utf-8"))
            ok = isinstance(rec, dict)
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            ok = False
        if ok:
            keep.append(line)
        elif i == len(raw) - 1:
            cut_tail = True
            warnings.append(f"results file {p}: its last line was cut short (a run stopped mid-write); "
                            f"removed, and that measurement is done again")
        else:
            bad.append(line)
            warnings.append(f"results file {p}: line {i + 1} does not parse; moved to {p.name}.unreadable")
    return keep, bad, cut_tail, warnings


def _refuse_foreign(p: Path, keep: list[bytes]) -> None:
    """UsageError unless every whole line is a fabricbench record (its "schema": "fabricbench/N" header):
    a file that is not fabricbench's is left exactly as it is."""
    foreign = sum(1 for b in keep if schema_version(loads_record(b.decode("utf-8"))) is None)
    if not keep or foreign:
        said = f"{foreign} of its {len(keep)} whole line(s) are" if keep else "none of its lines is"
        raise UsageError(f"results file {p}: {said} not fabricbench records, so it is not repaired (cut or "
                         f"rewritten) for appending; give --out a fabricbench results file or a new path")


def _truncate(d, p: Path, data: bytes, cut_tail: bool, st: os.stat_result) -> None:
    """Only the tail: truncate in place (no rewrite of a large file) and end with a newline, through a
    descriptor of the same regular file that was read."""
    end = data.rfind(b"\n") + 1 if cut_tail else len(data)
    with d.open(p.name, "r+b") as fh:
        now = os.fstat(fh.fileno())
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise UsageError(f"results file {p}: was replaced while it was read; run again")
        fh.truncate(end)
        if end and data[end - 1:end] != b"\n":
            fh.seek(end)
            fh.write(b"\n")
