"""Read what other tools wrote: nccl-tests (text of every era, -J JSON), NCCL_DEBUG=INFO logs, nvbandwidth,
NCCL Inspector (JSON and Prometheus), NCCL RAS (text and JSON), NCCL_RUN_DIAGNOSTICS reports and DCGM
diagnostics (JSON).

    fabricbench import ar.log ag.json nvb.txt --out imported.jsonl --fabric nvswitch --nranks 8
    fabricbench import host-pid42.log.gz ras.json dcgm.json --out node.jsonl
    records = fabricbench.import_results("ar.log")

Every format is one module (sniff + read) and one row of FORMATS below; the first row whose sniff claims a
file reads it, so the order matters: the formats that name themselves first (Inspector, DCGM, RAS: RAS's
JSON holds "nccl_version" like nccl-tests -J, its text "NCCL version" like a log), JSON before text,
nccl-tests text (which reads the NCCL log mixed into it) before nvbandwidth, a bare NCCL log last. A file
that starts with gzip's magic bytes is decompressed first. Records come out in our one schema, ready for
qualify, compare, report, relate and jobfit.
"""

from __future__ import annotations

import gzip
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fabricbench.errors import UsageError
from fabricbench.files import check_input, max_input_bytes, read_input
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
)
from fabricbench.importing.base import Source
from fabricbench.registry import Registry


@dataclass(frozen=True, kw_only=True)
class Format:
    description: str
    sniff: Callable[[str], bool]
    read: Callable[[Source], list[dict[str, Any]]]


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


def import_file(path: str | os.PathLike, *, fabric: str | None = None, nranks: int | None = None,
                fmt: str | None = None) -> Imported:
    """Read one file; UsageError (one line naming the file) when it cannot be read as any known format."""
    if nranks is not None and nranks < 1:
        raise UsageError(f"--nranks {nranks}: need at least 1 rank")
    text = _read_text(path)
    if not text.strip():
        raise UsageError(f"{path}: empty, nothing to import; the tool that wrote it recorded nothing (NCCL "
                         f"Inspector does so on a 1-rank communicator: NCCL runs its collectives as a local copy)")
    src = Source(path=str(path), text=text, fabric=fabric, nranks=nranks)
    name = fmt or sniff(text)
    if name == "fabricbench":
        raise UsageError(f"{path}: already fabricbench records; use it as it is (no import needed)")
    if name is None:
        raise UsageError(f"{path}: not a format fabricbench imports (nccl-tests text or -J JSON, an NCCL_DEBUG=INFO "
                         f"log, nvbandwidth output, NCCL Inspector JSON or .prom, ncclras text or JSON, "
                         f"an NCCL_RUN_DIAGNOSTICS report, dcgmi diag -j JSON)")
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
        raise UsageError(f"{path}: read as {name}, but it holds no measurement (no table row, matrix value, "
                         f"collective call or test result){why}")
    return Imported(path=str(path), format=name, records=records, warnings=list(src.warnings))


def _read_text(path: str | os.PathLike) -> str:
    """The file's text; a gzip file (Inspector's .log.gz, .jsonl.gz) is decompressed, under the same size cap."""
    check_input(path, what="import")
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic != b"\x1f\x8b":
        return read_input(path, what="import")
    cap = max_input_bytes()
    try:
        with gzip.open(path, "rb") as fh:
            data = fh.read(cap + 1)
    except (OSError, EOFError) as e:
        raise UsageError(f"{path}: a gzip file that cannot be read ({e})") from None
    if len(data) > cap:
        raise UsageError(f"{path}: decompresses to over the {cap:,}-byte cap; raise it with --max-input-size")
    return data.decode("utf-8", errors="replace")


def import_results(path: str | os.PathLike, *, fabric: str | None = None,
                   nranks: int | None = None) -> list[dict[str, Any]]:
    """The records one file of another tool's output becomes (warnings go to Python's warnings)."""
    got = import_file(path, fabric=fabric, nranks=nranks)
    for w in got.warnings:
        warnings.warn(w, stacklevel=2)
    return got.records


__all__ = ["FORMATS", "Format", "Imported", "import_file", "import_results", "sniff"]
