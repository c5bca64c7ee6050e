"""Imported results shown beside fabricbench's: the label a line or column gets, and the records of a file.

    fabricbench compare --fabrics default,p2p-off --with imported.jsonl     (a column per imported fabric)
    fabricbench import nt.log --fabric nvswitch --out run/results.jsonl && fabricbench report run/

An imported record keeps its `fabric` (what --fabric gave at import, else null); beside fabricbench's own,
it is shown as "<fabric> (<tool>)", e.g. "nvswitch (nccl-tests)", so the two are never mistaken for one.
"""

from __future__ import annotations

import os
from typing import Any

from fabricbench.errors import UsageError
from fabricbench.files import read_input
from fabricbench.importing import import_file, sniff
from fabricbench.results.writer import read_results


def is_imported(rec: dict[str, Any]) -> bool:
    return isinstance(rec.get("source"), dict) and bool(rec["source"].get("tool"))


def label(rec: dict[str, Any]) -> str:
    """'nvswitch (nccl-tests)' for an imported record; a fabricbench record's own fabric name otherwise."""
    fabric = rec.get("fabric") or ("imported" if is_imported(rec) else "default")
    return f"{fabric} ({rec['source']['tool']})" if is_imported(rec) else fabric


def records_of(path: str | os.PathLike) -> list[dict[str, Any]]:
    """A results file's records, or another tool's output imported on the fly (same records as `import`)."""
    text = read_input(path, what="--with")
    if sniff(text) == "fabricbench":
        return [r for r in read_results(path) if isinstance(r, dict)]
    if not text.strip():
        raise UsageError(f"--with {path}: empty file")
    return import_file(path).records


def collective_groups(records: list[dict[str, Any]], *, ops: list[str] | None = None,
                      dtype: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Usable collective records by label, keeping only the ops and dtype asked for (where given)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("kind") != "collective" or not r.get("op") or not r.get("dtype") or not r.get("bytes"):
            continue
        if (ops and r["op"] not in ops) or (dtype and r["dtype"] != dtype):
            continue
        out.setdefault(label(r), []).append(r)
    return out
