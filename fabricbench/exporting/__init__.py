"""Out to simulators: fabricbench results in the formats other tools read.

    fabricbench export sweep.jsonl --format simai-busbw --out busbw.yaml
    fabricbench export sweep.jsonl --format simumax --out system.json [--base configs/system/a100_pcie.json]
    fabricbench export train.jsonl --format comm-trace --out trace.json

One module per format (simai.py, simumax.py, trace.py), one row of EXPORTERS each;
`write(path_or_folder, fmt, out)` reads the records (a results file, or a study folder's results.jsonl) and
writes the file; `fabricbench.export(ExportConfig(...))` (api.py) is the command's call around it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from fabricbench.errors import UsageError
from fabricbench.exporting import simai, simumax, trace
from fabricbench.exporting.simai import SimaiOptions
from fabricbench.exporting.simumax import SimumaxOptions
from fabricbench.files import dumps, write_text_atomic
from fabricbench.registry import Registry
from fabricbench.results import records as results_records


@dataclass(frozen=True, kw_only=True)
class Exporter:
    description: str
    write: Callable[..., tuple[str, list[str]]]  # (records, source=, options=) -> (text, notes)
    options: type | None = None  # the one options type it takes (None: it takes none)


def _simai(recs: list[dict[str, Any]], *, source: str, options: SimaiOptions | None) -> tuple[str, list[str]]:
    o = options or SimaiOptions()
    tab, notes = simai.table(recs, group=o.group, fabric=o.fabric, size=o.size)
    return simai.render(tab, name=f"fabricbench {Path(source).name}"), notes


def _simumax(recs: list[dict[str, Any]], *, source: str, options: SimumaxOptions | None) -> tuple[str, list[str]]:
    o = options or SimumaxOptions()
    doc, notes = simumax.system(recs, fabric=o.fabric, base=o.base, source=Path(source).name)
    return dumps(doc, indent=4) + "\n", notes


def _trace(recs: list[dict[str, Any]], *, source: str, options: None = None) -> tuple[str, list[str]]:
    doc = trace.trace(recs, source=source)
    return dumps(doc, indent=2) + "\n", [f"{len(doc['runs'])} train run(s) written"]


EXPORTERS: Registry[Exporter] = Registry("export format")
EXPORTERS.register("simai-busbw", Exporter(description="SimAI analytical busbw.yaml (format 3, TP/DP/EP/PP)",
                                           write=_simai, options=SimaiOptions))
EXPORTERS.register("simumax", Exporter(description="SimuMax system.json, its networks fitted from the sweep",
                                        write=_simumax, options=SimumaxOptions))
EXPORTERS.register("comm-trace", Exporter(description="per-step (op, bytes, group) JSON of a train run's trace",
                                          write=_trace))


def write(results: str | os.PathLike, fmt: str, out: str | os.PathLike,
           options: SimaiOptions | SimumaxOptions | None = None) -> list[str]:
    """Write `results` as `fmt` to `out`; the notes say what was taken from where. `options`: the format's
    own (SimaiOptions, SimumaxOptions; comm-trace takes none)."""
    p = Path(results)
    if p.is_dir():
        p = p / "results.jsonl"
    if fmt not in EXPORTERS.names():
        raise UsageError(f"--format {fmt}: choose from {', '.join(EXPORTERS.names())}")
    got = results_records.read_nonempty(p, what="export")
    exporter = EXPORTERS.get(fmt)
    if options is not None and not (exporter.options and isinstance(options, exporter.options)):
        takes = exporter.options.__name__ if exporter.options else "no options"
        raise UsageError(f"--format {fmt} takes {takes}, not {type(options).__name__}")
    text, notes = exporter.write(list(got.records), source=str(results), options=options)
    write_text_atomic(out, text, what="--out")
    return notes + got.warnings


__all__ = ["EXPORTERS", "Exporter", "SimaiOptions", "SimumaxOptions", "write"]
