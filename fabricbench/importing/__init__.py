"""Read what other tools wrote: nccl-tests (text of every era, -J JSON), NCCL_DEBUG=INFO logs, nvbandwidth.

    fabricbench import ar.log ag.json nvb.txt --out imported.jsonl --fabric nvswitch --nranks 8
    records = fabricbench.import_results("ar.log")

Every format is one module (sniff + read) and one row of FORMATS below; the first row whose sniff claims a
file reads it, so the order matters: JSON before text, nccl-tests text (which reads the NCCL log mixed
into it) before nvbandwidth, a bare NCCL log last. Records come out in our one schema, ready for qualify,
compare, report and relate.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fabricbench.errors import UsageError
from fabricbench.files import read_input
from fabricbench.importing import (
    nccl_log,
    nccl_tests_json,
    nccl_tests_text,
    nvbandwidth,
    nvbandwidth_json,
)
from fabricbench.importing.base import Source
from fabricbench.registry import Registry


@dataclass(frozen=True, kw_only=True)
class Format:
    description: str
    sniff: Callable[[str], bool]
    read: Callable[[Source], list[dict[str, Any]]]


FORMATS: Registry[Format] = Registry("input format")
FORMATS.register("nvbandwidth-json", Format(description="nvbandwidth -j JSON", sniff=nvbandwidth_json.sniff,
                                            read=nvbandwidth_json.read))
FORMATS.register("nccl-tests-json", Format(description="nccl-tests -J JSON (file version 3)",
                                           sniff=nccl_tests_json.sniff, read=nccl_tests_json.read))
FORMATS.register("nccl-tests", Format(description="nccl-tests text output, any era, NCCL log lines mixed in",
                                      sniff=nccl_tests_text.sniff, read=nccl_tests_text.read))
FORMATS.register("nvbandwidth", Format(description="nvbandwidth matrices", sniff=nvbandwidth.sniff,
                                       read=nvbandwidth.read))
FORMATS.register("nccl-log", Format(description="an NCCL_DEBUG=INFO log on its own", sniff=nccl_log.sniff,
                                    read=nccl_log.read))


# the formats that may share one text file (the JSON and a bare log stand alone)
TABLES = ("nccl-tests", "nvbandwidth")


@dataclass(frozen=True, kw_only=True)
class Imported:
    path: str
    format: str
    records: list[dict[str, Any]]
    warnings: list[str]


def sniff(text: str) -> str | None:
    """The name of the first format that claims the text, or None."""
    if text.lstrip().startswith('{"schema": "fabricbench/') or text.lstrip().startswith('{"schema":"fabricbench/'):
        return "fabricbench"
    names = FORMATS.names()
    return next((n for n in names if FORMATS.get(n).sniff(text)), None)


def import_file(path: str | os.PathLike, *, fabric: str | None = None, nranks: int | None = None,
                fmt: str | None = None) -> Imported:
    """Read one file; UsageError (one line naming the file) when it cannot be read as any known format."""
    if nranks is not None and nranks < 1:
        raise UsageError(f"--nranks {nranks}: need at least 1 rank")
    text = read_input(path, what="import")
    src = Source(path=str(path), text=text, fabric=fabric, nranks=nranks)
    name = fmt or sniff(text)
    if name == "fabricbench":
        raise UsageError(f"{path}: already fabricbench records; use it as it is (no import needed)")
    if name is None:
        raise UsageError(f"{path}: not a format fabricbench imports (nccl-tests text or -J JSON, an NCCL_DEBUG=INFO "
                         f"log, nvbandwidth output)")
    records = FORMATS.get(name).read(src)
    # a health-check log may hold nccl-tests tables and nvbandwidth matrices together: both are read
    also = [n for n in TABLES if n != name and name in TABLES and fmt is None and FORMATS.get(n).sniff(text)]
    for other in also:
        records += FORMATS.get(other).read(src)
    name = "+".join([name, *also]) if also and records else name
    if not records and name == "nccl-tests" and nccl_log.sniff(text):
        name, records = "nccl-log", nccl_log.read(src)  # the table never came: keep what its log says
    if not records:
        why = f"; {src.warnings[0]}" if src.warnings else ""
        raise UsageError(f"{path}: read as {name}, but it holds no measurement (no table row or matrix value){why}")
    return Imported(path=str(path), format=name, records=records, warnings=list(src.warnings))


def import_results(path: str | os.PathLike, *, fabric: str | None = None,
                   nranks: int | None = None) -> list[dict[str, Any]]:
    """The records one file of another tool's output becomes (warnings go to Python's warnings)."""
    got = import_file(path, fabric=fabric, nranks=nranks)
    for w in got.warnings:
        warnings.warn(w, stacklevel=2)
    return got.records


__all__ = ["FORMATS", "Format", "Imported", "import_file", "import_results", "sniff"]
