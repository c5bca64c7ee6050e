"""Read what other tools wrote: nccl-tests (text of every era, -J JSON), NCCL_DEBUG=INFO logs, nvbandwidth,
NCCL Inspector (JSON and Prometheus), NCCL RAS (text and JSON), NCCL_RUN_DIAGNOSTICS reports and DCGM
diagnostics (JSON).

    fabricbench import ar.log ag.json nvb.txt --out imported.jsonl --fabric nvswitch --nranks 8
    fabricbench import host-pid42.log.gz ras.json dcgm.json --out node.jsonl
    r = fabricbench.import_results(fabricbench.ImportConfig(files=["ar.log"]))   (api.py: the command's call)

Every format is one module (sniff + read) and one row of FORMATS below; the first row whose sniff claims a
file reads it, so the order matters: the formats that name themselves first (Inspector, DCGM, RAS: RAS's
JSON holds "nccl_version" like nccl-tests -J, its text "NCCL version" like a log), JSON before text,
nccl-tests text (which reads the NCCL log mixed into it) before nvbandwidth, a bare NCCL log last. A file
that starts with gzip's magic bytes is decompressed first. Records come out in our one schema, ready for
qualify, compare, report, relate and jobfit.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from fabricbench.errors import UsageError
from fabricbench.files import dumps
from fabricbench.importing import (
    dcgm_diag,
    inspector,
    inspector_prom,
    nccl_diag,
    nccl_log,
    nccl_ras,
    nccl_tests_json,
    nccl_tests_text,
    nvbandwidth,
    nvbandwidth_json,
    stream,
)
from fabricbench.importing.answer import Tally
from fabricbench.importing.base import Source
from fabricbench.results.records import check_record, loads_record
from fabricbench.registry import Registry


@dataclass(frozen=True, kw_only=True)
class Format:
    description: str
    sniff: Callable[[str], bool]
    read: Callable[[Source], Iterable[dict[str, Any]]]


FORMATS: Registry[Format] = Registry("input format")
FORMATS.register("nccl-inspector", Format(description="NCCL Inspector JSON (v4.0-v4.3, plain or verbose, .gz)",
                                          sniff=inspector.sniff, read=inspector.read))
FORMATS.register("nccl-inspector-prom", Format(description="NCCL Inspector Prometheus textfile (size buckets)",
                                               sniff=inspector_prom.sniff, read=inspector_prom.read))
FORMATS.register("dcgm-diag", Format(description="dcgmi diag -j JSON (DCGM 3.x and 4.x)", sniff=dcgm_diag.sniff,
                                     read=dcgm_diag.read))
FORMATS.register("nccl-ras", Format(description="ncclras text or JSON (communicator health)", sniff=nccl_ras.sniff,
                                    read=nccl_ras.read))
FORMATS.register("nvbandwidth-json", Format(description="nvbandwidth -j JSON", sniff=nvbandwidth_json.sniff,
                                            read=nvbandwidth_json.read))
FORMATS.register("nccl-tests-json", Format(description="nccl-tests -J JSON (file version 3)",
                                           sniff=nccl_tests_json.sniff, read=nccl_tests_json.read))
FORMATS.register("nccl-diag", Format(description="NCCL_RUN_DIAGNOSTICS report (NCCL >= 2.31), alone or in a log",
                                     sniff=nccl_diag.sniff, read=nccl_diag.read))
FORMATS.register("nccl-tests", Format(description="nccl-tests text output, any era, NCCL log lines mixed in",
                                      sniff=nccl_tests_text.sniff, read=nccl_tests_text.read))
FORMATS.register("nvbandwidth", Format(description="nvbandwidth matrices", sniff=nvbandwidth.sniff,
                                       read=nvbandwidth.read))
FORMATS.register("nccl-log", Format(description="an NCCL_DEBUG=INFO log on its own", sniff=nccl_log.sniff,
                                    read=nccl_log.read))


# the formats that may share one text file (the JSON and a bare log stand alone): NCCL_RUN_DIAGNOSTICS'
# report is printed at communicator init, so into the nccl-tests log of the run it diagnosed
TABLES = ("nccl-diag", "nccl-tests", "nvbandwidth")


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


# the text formats whose marks may come anywhere in a file (a table after megabytes of NCCL log): looked
# for through the whole file, a piece at a time; the others name themselves in the head. Past the head, a
# format's sniff runs only on a piece that holds one of its words (found at memory speed; the sniffs'
# patterns cost ~0.1 s per MiB, which over a 200 MB file would be most of the import)
_ANYWHERE = (*TABLES, "nccl-log")
_WORDS = {"nccl-diag": ("NCCL DIAG",), "nccl-tests": ("size", "Collective test", "nThread", "bytes"),
          "nvbandwidth": ("memcpy", "MEMCPY", "nvbandwidth"), "nccl-log": ("NCCL INFO", "NCCL version")}


def _sniff_file(path: str) -> tuple[str | None, list[str], list[str]]:
    """(the format that reads the file, the other table formats it also holds, every text format whose
    marks it holds), reading it in pieces."""
    with stream.open_bytes(path) as fh:
        raw = fh.read(stream.HEAD)
    h = raw.decode("utf-8", errors="replace")
    first = sniff(h)
    if first not in (None, *_ANYWHERE) or len(raw) < stream.HEAD:  # the head is the whole file
        claimed = [n for n in _ANYWHERE if FORMATS.get(n).sniff(h)] if first in (None, *_ANYWHERE) else []
    else:
        claimed = []
        for piece in stream.chunks(path):
            claimed += [n for n in _ANYWHERE if n not in claimed and any(w in piece for w in _WORDS[n])
                        and FORMATS.get(n).sniff(piece)]
            if all(n in claimed for n in TABLES):
                break
    if first not in (None, *_ANYWHERE):
        return first, [], []
    ordered = [n for n in FORMATS.names() if n in claimed]
    if not ordered:
        return None, [], []
    name = ordered[0]
    return name, [n for n in TABLES if n != name and name in TABLES and n in claimed], claimed


def import_into(path: str | os.PathLike, write: Callable[[str], None], *, fabric: str | None = None,
                nranks: int | None = None, fmt: str | None = None) -> Tally:
    """Read one file a piece at a time, each record checked and handed to `write` as its JSON line as soon
    as it is made; the file's Tally (counts, largest sizes, warnings). UsageError (one line naming the
    file) when it cannot be read as any known format or holds nothing."""
    if nranks is not None and nranks < 1:
        raise UsageError(f"--nranks {nranks}: need at least 1 rank")
    path = str(path)
    src = Source(path=path, fabric=fabric, nranks=nranks)
    if not stream.head(path).strip():
        raise UsageError(f"{path}: empty, nothing to import; the tool that wrote it recorded nothing (NCCL "
                         f"Inspector does so on a 1-rank communicator: NCCL runs its collectives as a local copy)")
    name, also, claimed = (fmt, [], []) if fmt else _sniff_file(path)
    if name == "fabricbench":
        raise UsageError(f"{path}: already fabricbench records; use it as it is (no import needed)")
    if name is None:
        raise UsageError(f"{path}: not a format fabricbench imports (nccl-tests text or -J JSON, an NCCL_DEBUG=INFO "
                         f"log, nvbandwidth output, NCCL Inspector JSON or .prom, ncclras text or JSON, "
                         f"an NCCL_RUN_DIAGNOSTICS report, dcgmi diag -j JSON)")
    tally = Tally(path=path)
    for reader in [name, *also]:
        for rec in FORMATS.get(reader).read(src):
            _checked(src, rec, tally, write)
    if not tally.records and name == "nccl-tests" and "nccl-log" in claimed and not src.refused:
        name = "nccl-log"  # the table never came: keep what its log says
        for rec in FORMATS.get(name).read(src):
            _checked(src, rec, tally, write)
    tally.format = "+".join([name, *also]) if also and tally.records else name
    src.say_refused()
    if not tally.records:
        why = f"; {src.warnings[0]}" if src.warnings else ""
        raise UsageError(f"{path}: read as {tally.format}, but it holds no measurement (no table row, matrix value, "
                         f"collective call or test result){why}")
    tally.warnings = src.said()
    return tally


def _checked(src: Source, rec: dict[str, Any], tally: Tally, write: Callable[[str], None]) -> None:
    """A record written only if fabricbench's own reader reads it back as it is; else refused (counted)."""
    line = dumps(rec)
    back = loads_record(line)
    why = check_record(back)
    if why is None and _LONG_WHOLE.search(line) and back != json.loads(line):
        why = "a whole number past 64 bits"
    if why:
        src.refuse((rec.get("source") or {}).get("line"), why)
        return
    tally.add(rec)
    write(line)


_LONG_WHOLE = re.compile(r"\d{19}")  # a whole number the reader may read as null (past 64 bits)


def import_file(path: str | os.PathLike, *, fabric: str | None = None, nranks: int | None = None,
                fmt: str | None = None) -> Imported:
    """Read one file into a list of records (for relate, jobfit and qualify; the command streams: api.py)."""
    lines: list[str] = []
    tally = import_into(path, lines.append, fabric=fabric, nranks=nranks, fmt=fmt)
    return Imported(path=str(path), format=tally.format, records=[json.loads(x) for x in lines],
                    warnings=tally.warnings)


__all__ = ["FORMATS", "Format", "Imported", "Tally", "import_file", "import_into", "sniff"]
