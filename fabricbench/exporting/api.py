"""`fabricbench.export`: results out to a simulator's format, as `fabricbench export` writes them.

    fabricbench export sweep.jsonl --format simai-busbw --out busbw.yaml --group DP
    r = fabricbench.export(fabricbench.ExportConfig(results="sweep.jsonl", format="simai-busbw", out="busbw.yaml"))
    r.notes

The formats are the rows of EXPORTERS (this package's __init__.py); this module is the command's one config
and result. The config refuses what it can know without reading: an unknown format, a bad size, an output
that is also an input; the call refuses an output that cannot be written before it reads the results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fabricbench.declare import check, declare
from fabricbench.errors import UsageError, expect_config
from fabricbench.exporting import EXPORTERS, SimaiOptions, SimumaxOptions, write
from fabricbench.files import check_output, refuse_collisions
from fabricbench.sizes import parse_size

GROUPS = ("TP", "DP", "EP", "PP")  # SimAI's busbw.yaml sections
TAKES = {"simai-busbw": ("group", "fabric", "size"), "simumax": ("fabric", "base")}  # format -> its options


@dataclass(frozen=True, kw_only=True)
class ExportConfig:
    """One export; checked once, here, for the CLI and the library alike."""

    results: str  # a results file, or a study folder (its results.jsonl)
    format: str = field(metadata=declare(  # a name in EXPORTERS
        "--format", "choice", f"One of: {', '.join(EXPORTERS.names())}.", choices=tuple(EXPORTERS.names())))
    out: str = field(metadata=declare("--out", "output file", "The file to write (replaced)."))
    group: str = field(default="TP", metadata=declare(
        "--group", "choice", "simai-busbw: the section the sweep fills (TP, DP, EP, PP).", choices=GROUPS))
    fabric: str | None = field(default=None, metadata=declare(  # a label in the records, never applied
        "--fabric", "text", "The fabric to export, when the results hold several."))
    # bytes; a size text (1G) is read as the CLI reads it. None: the largest size swept
    size: int | str | None = field(default=None, metadata=declare(
        "--size", "size", "simai-busbw: take busbw at this size (e.g. 1G), not the largest swept."))
    base: str | None = field(default=None, metadata=declare(
        "--base", "input file", "simumax: a SimuMax system config to fill (its accelerator and other networks "
        "are kept)."))

    def __post_init__(self) -> None:
        object.__setattr__(self, "results", str(self.results))
        object.__setattr__(self, "out", str(self.out))
        if self.base is not None:
            object.__setattr__(self, "base", str(self.base))
        check(self)  # the format and the group first, as the command line's choices refuse them
        # two names of one file would read what is being replaced; said before the size, as the CLI did
        refuse_collisions({"--out": self.out}, {self.results: self.results, "--base": self.base})
        if isinstance(self.size, str):
            try:
                object.__setattr__(self, "size", parse_size(self.size))
            except ValueError as e:
                raise UsageError(f"--size {self.size}: {e}") from None

    @property
    def ignored(self) -> list[str]:
        """The options given that config.format does not read, each said once."""
        given = (("group", self.group != "TP"), ("size", self.size is not None), ("base", self.base is not None),
                 ("fabric", self.fabric is not None))
        takes = TAKES.get(self.format, ())
        return [f"--{key} is ignored by --format {self.format}" for key, on in given if on and key not in takes]

    def options(self) -> SimaiOptions | SimumaxOptions | None:
        """The format's own options (comm-trace takes none)."""
        return {"simai-busbw": SimaiOptions(group=self.group, fabric=self.fabric, size=self.size),
                "simumax": SimumaxOptions(fabric=self.fabric, base=self.base)}.get(self.format)


@dataclass(frozen=True, kw_only=True)
class ExportResult:
    format: str
    out: str  # the file written
    notes: list[str]  # what was taken from where (the CLI prints each as `note: ...`)
    warnings: list[str]  # options the format ignored (ExportConfig.ignored)

    def to_dict(self) -> dict[str, Any]:
        return {"format": self.format, "out": self.out, "notes": self.notes, "warnings": self.warnings}


def export(config: ExportConfig) -> ExportResult:
    """Write config.results as config.format to config.out (replaced)."""
    expect_config(config, ExportConfig, "export")
    check_output(config.out, what="--out")
    notes = write(config.results, config.format, config.out, config.options())
    return ExportResult(format=config.format, out=config.out, notes=notes, warnings=config.ignored)
