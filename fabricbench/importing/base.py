"""What every reader of another tool's output shares: the file being read, its warnings, record headers.

    fabricbench import all_reduce.log --out imported.jsonl

Imported records use the one result schema (fabricbench/results/schema.py). Nothing is invented: a field
the file does not tell stays null, and `source` says which tool, version, file and run each came from.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn

from fabricbench.dtypes import ALIASES, DTYPES
from fabricbench.errors import UsageError
from fabricbench.importing import stream
from fabricbench.results.context import allowed_env, package_version
from fabricbench.results.schema import SCHEMA

# mpirun --tag-output ("[1,3]<stdout>:"), srun --label ("3: "), torchrun ("[rank3]:", "[3] "), pdsh
# ("node01: "), and a bracketed time stamp that log collectors put first ("[2026-04-28 14:14:42] ").
# Stripped before a line is read.
_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\[rank\d+\]:|\d+: |\[\d+\] (?=\S+:\d+:\d+ \[)"
                     # MPICH/Intel MPI -prepend-rank: "[0]" glued to a table line ("[0]#  size", "[0]   1048576")
                     r"|\[\d+\](?=#|\s+\d)"
                     r"|\[\d{4}-\d\d-\d\d[ T][\d:.,]+\] ?"
                     # pdsh/clush "node01: " before a table, a '#' line or an NCCL line
                     r"|[A-Za-z][\w.-]*: (?=\s*(?:#|\d|[^\s:]+:\d+:\d+ \[)))")

# nccl-tests' program names -> our op names; a name not here keeps its own (reduce, sendrecv, gather...).
OPS = {"all_reduce": "all_reduce", "allreduce": "all_reduce", "all_gather": "all_gather",
       "allgather": "all_gather", "reduce_scatter": "reduce_scatter", "reducescatter": "reduce_scatter",
       "alltoall": "all_to_all", "all_to_all": "all_to_all", "broadcast": "broadcast", "reduce": "reduce",
       "sendrecv": "sendrecv", "scatter": "scatter", "gather": "gather", "alltoallv": "alltoallv",
       "hypercube": "hypercube"}

# nccl-tests' type names (both eras) -> ours; unknown names are kept as printed.
_TYPES = {"char": "int8", "int": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
          "bfloat16": "bfloat16", "f8e4m3": "float8_e4m3", "f8e5m2": "float8_e5m2"}


# the same launcher tags glued inside a line: each chunk a process flushed is tagged, and nccl-tests flushes a
# row in pieces ("  1048576  262144  float  sum  -1[0]    1626.5  ...  0[0]    2302.3 ..."; NVIDIA/nccl#1453)
_GLUED = re.compile(r"(?<=[\d\s])(?:\[\d+\]|\[\d+,\d+\]<std(?:out|err)>:)(?=\s|$)")
_NCCL_LINE = re.compile(r"[^\s:]*:\d+:\d+ \[\d+\] NCCL |NCCL version \d")


def unglue_tags(line: str) -> str:
    """A table line without the launcher tags glued inside it; an NCCL line's own `[dev]` is left alone."""
    m = _NCCL_LINE.search(line)
    head, tail = (line[:m.start()], line[m.start():]) if m else (line, "")
    return _GLUED.sub("", head) + tail


def strip_prefix(line: str) -> str:
    """A line without the launcher's tags (they may repeat: a collector's stamp, then mpirun's tag)."""
    for _ in range(3):
        m = _PREFIX.match(line)
        if not m:
            break
        line = line[m.end():]
    return line


def op_name(program: str) -> str | None:
    """'all_reduce_perf' / './build/alltoall_perf_mpi' / 'allreduce' -> our op name; None if not an op."""
    base = program.rsplit("/", 1)[-1].lower()
    base = re.sub(r"(_perf|_test)?(_mpi)?(\.\w+)?$", "", base)
    return OPS.get(base)


def dtype_name(printed: str) -> str:
    p = printed.strip().lower()
    if p in DTYPES:
        return p
    return ALIASES.get(p) or _TYPES.get(p, p)


def nccl_version_from_code(code: int) -> str | None:
    """NCCL_VERSION_CODE -> '2.27.3': 22703 since 2.9 (x10000 + x100), 2708 before (x1000 + x100)."""
    if code <= 0:
        return None
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def number(token: str | None) -> float | None:
    """A printed figure, or None for N/A, nan, inf and anything else that is not a finite number."""
    if token is None:
        return None
    try:
        v = float(token)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


WARNINGS_KEPT = 50  # warnings kept per file; the rest are counted
TEXT_LINE = 64 << 10  # characters of a text format's line (a table row is ~150, an NCCL line < 1,000)


@dataclass(kw_only=True)
class Source:
    """One input file being read: its lines (streamed, stream.py), what the user added (--fabric, --nranks)
    and its warnings. `text` is the whole file, only for the formats that are one JSON document (bounded by
    stream.DOC_CAP)."""

    path: str
    fabric: str | None = None
    nranks: int | None = None
    warnings: list[str] = field(default_factory=list)
    unsaid: int = 0  # warnings past WARNINGS_KEPT
    long_lines: int = 0  # lines skipped for their length
    refused: int = 0  # measurements left out because their figures are impossible
    refused_why: list[str] = field(default_factory=list)  # the first few of them, with their line
    _digest: str | None = None
    _text: str | None = None

    @property
    def name(self) -> str:
        return self.path.replace("\\", "/").rsplit("/", 1)[-1]

    @property
    def digest(self) -> str:
        if self._digest is None:
            self._digest = stream.digest(self.path)
        return self._digest

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = stream.document(self.path)
        return self._text

    def lines(self, longest: int | None = TEXT_LINE) -> Iterator[tuple[int, str]]:
        """(number, line) of the file, read as they are asked for; a line over `longest` characters is
        skipped (said once): no text format writes one, and a line-oriented pattern would crawl over it."""
        return stream.lines(self.path, longest, self._long_line)

    def _long_line(self, n: int, length: int) -> None:
        self.long_lines += 1
        if self.long_lines == 1:
            self.warn(n, f"skipped a line of {length:,} characters (and any later ones that long): no line of "
                         f"this format is")

    def loads(self, text: str, **kw: Any) -> Any:
        """JSON from this file, its nesting checked first (one line naming the file, never a RecursionError)."""
        return stream.loads(text, self.path, **kw)

    def refuse(self, line: int | None, why: str) -> None:
        """A measurement left out because its figures are impossible (said once per file, with the count)."""
        self.refused += 1
        if len(self.refused_why) < 2:
            self.refused_why.append(f"line {line}: {why}" if line else why)

    def say_refused(self) -> None:
        """The one warning for the file's refused measurements, if any."""
        if self.refused:
            self.warnings.append(f"{self.path}: left out {self.refused} measurement(s) with impossible figures, which fabricbench's "
                            f"own reader would reject ({'; '.join(self.refused_why)})")

    def warn(self, line: int | None, message: str) -> None:
        where = f"{self.path}:{line}" if line else self.path
        if len(self.warnings) < WARNINGS_KEPT:
            self.warnings.append(f"{where}: {message}")
        else:
            self.unsaid += 1  # a file of garbage lines must not grow a list as long as itself

    def said(self) -> list[str]:
        """The warnings, the ones past WARNINGS_KEPT counted in one last line."""
        more = [f"{self.path}: {self.unsaid} more warning(s) like these"] if self.unsaid else []
        return [*self.warnings, *more]

    def fail(self, line: int | None, message: str) -> NoReturn:
        where = f"{self.path}:{line}" if line else self.path
        raise UsageError(f"{where}: {message}")

    def header(self, kind: str, run: int, *, tool: str, tool_version: str | None, line: int | None,
               host: str | None = None, timestamp: str | None = None,
               env: dict[str, str] | None = None) -> dict[str, Any]:
        """The common header (schema.header's keys) for a record read from this file.

        host and timestamp are the file's (null when it does not say): never this machine's or now.
        """
        return {"schema": SCHEMA, "kind": kind, "run_id": f"import-{self.digest}-{run}",
                "timestamp": timestamp, "fabric": self.fabric, "host": host, "platform": None,
                "python": None, "fabricbench_version": package_version("fabricbench"),
                "env": allowed_env(env or {}),
                "source": {"tool": tool, "tool_version": tool_version, "file": self.name, "run": run,
                           "line": line}}

    def ranks(self, told: int | None, line: int | None) -> int | None:
        """The file's rank count, else --nranks; a --nranks that the file contradicts is warned about."""
        if told is not None:
            if self.nranks is not None and self.nranks != told:
                self.warn(line, f"--nranks {self.nranks} ignored: the file says {told} ranks")
            return told
        return self.nranks


def env_from_list(entries: list[Any]) -> dict[str, str]:
    """'K=V' strings (nccl-tests -J writes the whole environment) -> only the allow-listed variables."""
    out: dict[str, str] = {}
    for e in entries:
        if isinstance(e, str) and "=" in e:
            k, _, v = e.partition("=")
            out[k] = v
    return allowed_env(out)
