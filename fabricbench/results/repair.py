"""Repairing a results file before appending to it: every line parses afterwards, nothing is deleted.

    fabricbench sweep --out r.jsonl --resume      (the resume store repairs r.jsonl first: jobs/store.py)

A torn last line (a crash mid-write) is cut off so that its measurement is done again; damaged lines
further up are moved aside to FILE.unreadable, never deleted.
"""

from __future__ import annotations

import os
from pathlib import Path

from fabricbench.errors import UsageError
from fabricbench.files import OutputError, check_input, write_text_atomic
from fabricbench.results.records import loads_record


def repair(path: str | os.PathLike) -> list[str]:
    """Make every line of a results file parse, for a writer about to append to it (--resume).

    A torn last line (no newline, not JSON: a crash mid-write) is cut off, so its measurement is done
    again. Other lines that do not parse are moved to PATH.unreadable (appended) and the file rewritten
    atomically without them. Returns one warning per line moved or cut; [] when the file was whole or
    does not exist. A newline is added after a last record that lacks one, so the next append starts a
    line of its own.
    """
    p = Path(path)
    if not os.path.lexists(p):
        return []
    check_input(p, what="results file")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise UsageError(f"results file {p}: cannot read it ({e.strerror})") from None
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
    if not bad and not cut_tail and (not data or data.endswith(b"\n")):
        return []
    try:
        if not bad:
            # only the tail: truncate in place (no rewrite of a large file) and end with a newline
            end = data.rfind(b"\n") + 1 if cut_tail else len(data)
            with open(p, "r+b") as fh:
                fh.truncate(end)
                if end and data[end - 1:end] != b"\n":
                    fh.seek(end)
                    fh.write(b"\n")
            return warnings
        with open(p.with_name(p.name + ".unreadable"), "ab") as fh:
            fh.write(b"".join(b + b"\n" for b in bad))
        write_text_atomic(p, "".join(b.decode("utf-8") + "\n" for b in keep), what="results file")
    except OSError as e:
        raise OutputError(f"results file {p}: cannot repair it ({e.strerror}); copy the good lines aside") \
            from None
    return warnings
