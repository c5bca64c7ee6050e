"""What `fabricbench import` does with the files it read: their records appended to --out in one atomic
write, and a summary per file (format, runs, record kinds, ops, warnings) for the JSON and the lines.

    fabricbench import all_reduce.log nvbandwidth.txt --out imported.jsonl
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from fabricbench.files import check_input, dumps, read_input, write_text_atomic


def append(out_path: str, records: list[dict[str, Any]]) -> None:
    """`records` appended to `out_path` (created if absent), the whole file written atomically."""
    old = read_input(out_path, what="--out") if _exists(out_path) else ""
    if old and not old.endswith("\n"):
        old += "\n"  # a torn last line stays torn (readers skip it); ours start on a line of their own
    write_text_atomic(out_path, old + "".join(dumps(r) + "\n" for r in records), what="--out")


def summary(got) -> list[dict[str, Any]]:
    """One dict per Imported (importing.import_file's result): file, format, records, kinds, ops, runs,
    warnings."""
    return [{"file": g.path, "format": g.format, "records": len(g.records),
             "kinds": dict(Counter(r["kind"] for r in g.records)),
             "ops": sorted({r["op"] for r in g.records if r.get("op")}),
             "runs": len({r["run_id"] for r in g.records}), "warnings": g.warnings} for g in got]


def line(s: dict[str, Any]) -> str:
    """A summary dict as the one line the command prints for its file."""
    kinds = ", ".join(f"{n} {k}" for k, n in s["kinds"].items())
    ops = f" ({', '.join(s['ops'])})" if s["ops"] else ""
    return f"{s['file']}: {s['format']}, {s['runs']} run(s), {kinds}{ops}"


def _exists(path: str) -> bool:
    if not os.path.exists(path):  # new (or a dangling link): the writer creates it
        return False
    check_input(path, what="--out")  # there: a FIFO, device or oversize file is refused before it is read
    return True
