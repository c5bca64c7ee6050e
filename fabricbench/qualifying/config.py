"""What one qualification and one fleet comparison are: QualifyConfig and FleetConfig, checked once, when
built (frozen: a variant is dataclasses.replace, which checks it again), for the CLI and the library alike.

    fabricbench qualify --spec builtin:h200-sxm-8 --level 1 --out q/
    q = fabricbench.qualify(fabricbench.QualifyConfig(spec="builtin:h200-sxm-8", level=1, out="q/"))
    plan = fabricbench.qualify_plan(fabricbench.QualifyConfig(spec="builtin:h200-sxm-8", level=1))
    f = fabricbench.fleet(fabricbench.FleetConfig(inputs=("node1/", "node2/"), out="fleet/"))

Every option is declared on its field (fabricbench/declare.py) and fabricbench/cli/qualify.py is made from
them. A config is checked without touching the disk: the spec is read, and --only/--skip checked against its
checks, by the call (api.py), as are the files it reads and the outputs it writes.
"""

from __future__ import annotations

import math
import os
import shlex
from dataclasses import dataclass, field
from typing import Any, Sequence

from fabricbench.declare import check, declare, of, shared
from fabricbench.errors import UsageError
from fabricbench.fabrics.model import shown
from fabricbench.measuring.config import SweepConfig
from fabricbench.qualifying.spec import DEFAULT_LEVEL, Spec, load_spec, parse_spec
from fabricbench.topology import TOPO_FILE

MAX_SPEC_TEXT = 4096  # --spec: a path or builtin:NAME, as long as any option's text may be (cli MAX_TEXT)


def _path(value: Any) -> str | None:
    return None if value is None else str(value)


def _names(value: Any, flag: str) -> tuple[str, ...] | None:
    """A comma text or a sequence of check names as a tuple; None (or an empty sequence): every check."""
    if value is None:
        return None
    if isinstance(value, str):
        names = tuple(n.strip() for n in value.split(",") if n.strip())
        if not names:
            raise UsageError(f"{flag} is empty; give check names separated by commas")
        return names
    return tuple(str(n) for n in value) or None


@dataclass(frozen=True, kw_only=True)
class QualifyConfig:
    """One qualification: the spec, which of its checks, and where the results go."""

    # a spec path, builtin:NAME, TOML text, or a Spec already read (the call reads the others). Paths are
    # kept as text (str) once built, as are --only and --skip as tuples of names and inputs as a tuple
    spec: Spec | str | os.PathLike[str] = field(metadata=declare(
        "--spec", "text", "A TOML spec, or builtin:NAME (see --list-specs).", hi=MAX_SPEC_TEXT))
    out: str | os.PathLike[str] | None = field(default=None, metadata=declare(
        "--out", "output folder", "Folder for results.jsonl, verdicts.json, junit.xml, report."))
    resume: bool = field(default=False, metadata=declare(
        "--resume", "flag", "Continue the run in --out: measured units are reused."))
    # check names; a comma text is read as the CLI reads it
    only: str | Sequence[str] | None = field(default=None, metadata=declare(
        "--only", "check list", "Run only these checks (comma list of names)."))
    skip: str | Sequence[str] | None = field(default=None, metadata=declare(
        "--skip", "check list", "Skip these checks (comma list of names)."))
    fabric: str | None = field(default=None, metadata=shared(
        of(SweepConfig, "fabric"), help="Run the checks that use the default fabric under this one instead."))
    topo_file: str | os.PathLike[str] | None = field(default=None, metadata=shared(
        TOPO_FILE, help="Judge topology checks on a saved `nvidia-smi topo -m` output."))
    # None: DEFAULT_LEVEL, said in the help's words rather than as a default the spec's levels would hide
    level: int | None = field(default=None, metadata=declare(
        "--level", "count", "1 quick (~1 min), 2 standard (~5 min; the default), 3 long (~20 min): the spec's "
        "checks and run settings for that level.", lo=1, hi=3))
    prometheus: str | os.PathLike[str] | None = field(default=None, metadata=declare(
        "--prometheus", "output file", "Also write a node_exporter textfile (.prom) here, atomically."))
    baseline: str | os.PathLike[str] | None = field(default=None, metadata=declare(
        "--baseline", "input file or folder", "An earlier results.jsonl of this node: flag regressions."))
    # None: the spec's [run] baseline_tolerance
    tolerance: float | None = field(default=None, metadata=declare(
        "--tolerance", "fraction", "Regression tolerance against --baseline [default: the spec's "
        "baseline_tolerance, 0.05].", lo=0, hi=1, hi_open=True))
    # judge these results (fabricbench's, or `fabricbench import`ed) instead of measuring
    records_from: str | os.PathLike[str] | None = field(default=None, metadata=declare(
        "--from", "input file or folder", "Results to read: --init writes a spec from them; --spec judges them, "
        "measuring nothing."))

    def __post_init__(self) -> None:
        check(self)  # the declared ranges, in the words every config uses
        if not isinstance(self.spec, Spec):
            object.__setattr__(self, "spec", str(self.spec))
        for name in ("out", "topo_file", "prometheus", "baseline", "records_from"):
            object.__setattr__(self, name, _path(getattr(self, name)))
        object.__setattr__(self, "only", _names(self.only, "--only"))
        object.__setattr__(self, "skip", _names(self.skip, "--skip"))
        if self.records_from is not None and self.resume:
            raise UsageError("--from judges recorded results and measures nothing: --resume does not apply")
        if self.resume and self.out is None:
            raise UsageError("--resume continues the run in --out; give --out DIR")

    @property
    def run_level(self) -> int:
        return DEFAULT_LEVEL if self.level is None else self.level

    def read_spec(self) -> Spec:
        """The spec as given: read from its file or built-in, parsed from TOML text given inline."""
        if isinstance(self.spec, Spec):
            return self.spec
        if "\n" in self.spec and "[" in self.spec:  # TOML given inline
            return parse_spec(self.spec, "<inline spec>")
        return load_spec(self.spec)

    def reproduce_line(self, spec_path: str) -> str:
        """The command that runs this qualification again: every flag that shaped it, quoted for a shell. A
        custom fabric's secret values show as *** (fabrics.model.shown): put them back by hand."""
        argv = ["fabricbench", "qualify", "--spec", str(spec_path)]
        for flag, value in (("--level", self.run_level), ("--only", ",".join(self.only) if self.only else None),
                            ("--skip", ",".join(self.skip) if self.skip else None),
                            ("--fabric", shown(self.fabric) if self.fabric is not None else None),
                            ("--topo-file", self.topo_file), ("--from", self.records_from),
                            ("--baseline", self.baseline),
                            ("--tolerance", f"{self.tolerance:g}" if self.tolerance is not None else None),
                            ("--prometheus", self.prometheus), ("--out", self.out)):
            if value is not None:
                argv += [flag, str(value)]
        return shlex.join(argv)


@dataclass(frozen=True, kw_only=True)
class FleetConfig:
    """Many nodes' qualification runs compared (fleet.py): the inputs and where the report goes."""

    # one node each: a `qualify --out` folder or a results file (a node per host it holds); the CLI's INPUTS
    inputs: Sequence[str | os.PathLike[str]] | str | os.PathLike[str]
    out: str | os.PathLike[str] | None = field(default=None, metadata=shared(of(QualifyConfig, "out")))
    # 1 is allowed: any node below the median is then an outlier, the strictest fleet a user may ask for
    fraction: float = field(default=0.9, metadata=declare(
        "--fraction", "fraction", "--fleet: a node below this x the median is an outlier.", lo=0, hi=1,
        lo_open=True))
    prometheus: str | os.PathLike[str] | None = field(default=None, metadata=shared(of(QualifyConfig, "prometheus")))
    mad_z: float = 3.5  # a robust z-score beyond this on the bad side is a warning (the library's own: no flag)

    def __post_init__(self) -> None:
        check(self)
        if not (isinstance(self.mad_z, (int, float)) and math.isfinite(self.mad_z) and self.mad_z > 0):
            raise UsageError(f"mad_z {self.mad_z!r}: a robust z-score above 0, e.g. 3.5 (FleetConfig.mad_z)")
        inputs = (self.inputs,) if isinstance(self.inputs, (str, os.PathLike)) else tuple(self.inputs or ())
        object.__setattr__(self, "inputs", tuple(map(str, inputs)))
        for name in ("out", "prometheus"):
            object.__setattr__(self, name, _path(getattr(self, name)))
        if not self.inputs:
            raise UsageError("--fleet needs the nodes' qualify --out folders or results files")
