"""`fabricbench.import_results`: other tools' results as fabricbench records, as `fabricbench import` reads them.

    fabricbench import all_reduce.log nvbandwidth.txt --out imported.jsonl --fabric nvswitch
    r = fabricbench.import_results(fabricbench.ImportConfig(files=["all_reduce.log"], out="imported.jsonl"))
    r.records, r.files[0]["peaks"], r.warnings
    fabricbench.import_results(fabricbench.ImportConfig(files=["all_reduce.log"])).imported  # no out: in memory

The formats are the rows of FORMATS (this package's __init__.py); this module is the command's one config
and result. The config refuses what it can know without reading (an output that is also an input, an empty
label, a rank count out of range); the call reads every file before --out is replaced (output.py), so a
file that fails leaves --out as it was.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from fabricbench.declare import check, declare
from fabricbench.errors import UsageError, expect_config
from fabricbench.files import refuse_collisions
from fabricbench.importing import import_into
from fabricbench.importing.output import Appending

MAX_RANKS = 2**20  # --nranks: the most ranks a file's records may be given

NO_OUT = "FILE"  # where the next commands read the records from when they were not written (out None)


@dataclass(frozen=True, kw_only=True)
class ImportConfig:
    """Which files, where their records go and what they are labelled; checked once, here, for the CLI and
    the library alike."""

    files: tuple[str, ...]  # other tools' output files, read in this order (one path is taken as one file)
    out: str | None = field(default=None, metadata=declare(  # None: the records are returned, not written
        "--out", "output file", "Append the records (JSON lines) to this file."))
    fabric: str | None = field(default=None, metadata=declare(  # a label in the records, never applied
        "--fabric", "text", "The fabric label to give the records (what compare/relate group by)."))
    nranks: int | None = field(default=None, metadata=declare(  # None: each file's own, where it tells it
        "--nranks", "count", "Rank count where a file does not tell it.", lo=1, hi=MAX_RANKS))

    def __post_init__(self) -> None:
        files = (self.files,) if isinstance(self.files, (str, os.PathLike)) else self.files
        object.__setattr__(self, "files", tuple(str(f) for f in files))
        if self.out is not None:
            object.__setattr__(self, "out", str(self.out))
        check(self)
        if not self.files:
            raise UsageError("give at least one file to import (nccl-tests output, an NCCL log, nvbandwidth, ...)")
        refuse_collisions({"--out": self.out}, {f: f for f in self.files})
        if self.fabric is not None and not self.fabric.strip():
            raise UsageError("--fabric is empty; give a label such as nvswitch or p2p-off")


@dataclass(frozen=True, kw_only=True)
class ImportResult:
    out: str | None  # the file the records were appended to; None: they are in `imported`
    records: int  # records imported, every file's
    files: list[dict[str, Any]]  # per file what it holds and whether that is normal (answer.Tally.summary)
    imported: list[dict[str, Any]] = field(default_factory=list)  # the records themselves, where out is None

    @property
    def warnings(self) -> list[str]:
        """Every file's warnings, in file order (the CLI prints each as `warning: ...`)."""
        return [w for f in self.files for w in f["warnings"]]

    def to_dict(self) -> dict[str, Any]:
        """What `fabricbench import --json` prints."""
        return {"out": self.out, "records": self.records, "files": self.files}


def import_results(config: ImportConfig) -> ImportResult:
    """Read config.files (each streamed, a piece at a time) into fabricbench records, appended to config.out,
    or returned where it is None. UsageError (one line naming the file) for a file no format reads."""
    expect_config(config, ImportConfig, "import_results")
    kw = {"fabric": config.fabric, "nranks": config.nranks}
    lines: list[str] = []
    if config.out is None:
        tallies = [import_into(f, lines.append, **kw) for f in config.files]
    else:
        out = Appending(config.out)
        try:  # every file read (as a stream) before --out is replaced: a file that fails leaves it as it was
            tallies = [import_into(f, out.write, **kw) for f in config.files]
        except BaseException:
            out.abort()
            raise
        out.commit()
    return ImportResult(out=config.out, records=sum(t.records for t in tallies),
                        files=[t.summary(config.out or NO_OUT) for t in tallies],
                        imported=[json.loads(x) for x in lines])
