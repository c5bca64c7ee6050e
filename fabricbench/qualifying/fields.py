"""The typed keys a spec table may hold: one Field per key, each able to read and check its TOML value.

    [[check]]
    name = "allreduce_1g"          # Field("str")
    min_busbw_gbps = 300           # Field("number", positive)

A Field turns a raw TOML value into what the check uses, or raises FieldError with what is expected;
spec.py adds the file, line and key. Nothing here runs anything.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Callable

from fabricbench import dtypes
from fabricbench.collectives import COLLECTIVES
from fabricbench.errors import UsageError
from fabricbench.fabrics import get_fabric
from fabricbench.fabrics.env import remember
from fabricbench.gpus import parse_gpus
from fabricbench.results.status import MISS_SEVERITIES, Severity
from fabricbench.sizes import SizeSweep, parse_size

# Sanity bounds: no threshold, count or time in a spec comes near these; a value beyond is a typo (1e9 GB/s)
# or a hostile file, refused before it reaches a verdict. A Field may set its own, tighter, `at_most`.
MAX_NUMBER = 1e6
MAX_SIZE = 1 << 40  # 1 TiB: more than any GPU holds
MAX_LIST = 4096  # sizes, GPU sets, ops in one key
LEVELS = (1, 2, 3)


class FieldError(ValueError):
    """A value is not what its key expects; the message says what is."""


def _number(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise FieldError(f"expected a number, got {_short(v)}")
    if not math.isfinite(v):
        raise FieldError(f"expected a finite number, got {_short(v)}")
    if abs(v) > MAX_NUMBER:
        raise FieldError(f"{v:g} is beyond any sane value (|x| <= {MAX_NUMBER:g}); check the unit")
    return float(v)


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise FieldError(f"expected a whole number, got {_short(v)}")
    if abs(v) > MAX_NUMBER:
        raise FieldError(f"{v} is beyond any sane value (<= {MAX_NUMBER:g})")
    return v


def printable(text: str) -> str | None:
    """Why `text` cannot be shown (a control character: invalid in XML, a terminal escape), else None."""
    for ch in text:
        if ch not in "\t\n" and unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn"):
            return f"holds the control character {ascii(ch)}"
    return None


def _str(v: Any) -> str:
    if not isinstance(v, str) or not v.strip():
        raise FieldError(f"expected a non-empty string, got {_short(v)}")
    why = printable(v)
    if why:
        raise FieldError(f"{_short(v)} {why}; use printable text")
    return v.strip()


def _short(v: Any) -> str:
    text = ascii(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _levels(v: Any) -> tuple[int, ...]:
    """The levels (--level) a check runs at: 2, or [2, 3]."""
    vals = v if isinstance(v, list) else [v]
    if not vals or not all(isinstance(x, int) and not isinstance(x, bool) and x in LEVELS for x in vals):
        raise FieldError(f"expected levels among {', '.join(map(str, LEVELS))}, e.g. [2, 3], got {_short(v)}")
    return tuple(sorted(set(vals)))


def _severity(v: Any) -> Severity:
    s = _str(v).lower()
    if s not in MISS_SEVERITIES:
        raise FieldError(f"expected one of {', '.join(MISS_SEVERITIES)} (the severity of a miss), got {_short(v)}")
    return Severity(s)


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise FieldError(f"expected true or false, got {_short(v)}")
    return v


def _size(v: Any) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        n = v
    elif isinstance(v, str):
        try:
            n = parse_size(_str(v))
        except UsageError as e:
            raise FieldError(str(e)) from None
    else:
        raise FieldError(f"expected a size such as \"1G\" or 1073741824, got {_short(v)}")
    if not 0 < n <= MAX_SIZE:
        raise FieldError(f"expected a size from 1 B to 1 TiB, got {_short(v)}")
    return n


def _sizes(v: Any) -> tuple[int, ...]:
    """A list of sizes, or one sweep string ("1M-1G:x4"); expanded to the sizes that will run."""
    if isinstance(v, list):
        if not v:
            raise FieldError("expected at least one size")
        if len(v) > MAX_LIST:
            raise FieldError(f"{len(v)} sizes: at most {MAX_LIST}")
        return tuple(sorted({_size(x) for x in v}))
    if isinstance(v, str):
        try:
            sizes = tuple(sorted(set(SizeSweep.parse(_str(v)).expand())))
        except UsageError as e:
            raise FieldError(str(e)) from None
        if len(sizes) > MAX_LIST or max(sizes) > MAX_SIZE:
            raise FieldError(f"{v!r} expands to {len(sizes)} sizes up to {max(sizes)} B: at most {MAX_LIST}, "
                             f"each at most 1 TiB")
        return sizes
    return (_size(v),)


def _op(v: Any) -> str:
    try:
        return COLLECTIVES.get(_str(v)).name
    except UsageError as e:
        raise FieldError(str(e)) from None


def _dtype(v: Any) -> str:
    try:
        return dtypes.resolve(_str(v))
    except UsageError as e:
        raise FieldError(str(e)) from None


def _fabric(v: Any) -> str:
    """A fabric (built-in, shaped:RATE, or name:VAR=VAL), checked as `--fabric` would be -> its name: a
    custom fabric is parsed once here and named by its name from then on (its values never reach a
    verdict, a report, JUnit or a child's argv; fabrics.env.remember)."""
    try:
        return remember(get_fabric(_str(v)))
    except UsageError as e:
        raise FieldError(str(e)) from None


GPU_SETS = ("all", "each_island", "each_pair")


def _gpu_sets(v: Any) -> str | tuple[tuple[int, ...], ...]:
    """"all", "each_island", "each_pair", or a list of GPU lists ([[0,1],[2,3]] or ["0-3", "4-7"])."""
    if isinstance(v, str):
        if v in GPU_SETS:
            return v
        raise FieldError(f"expected one of {', '.join(GPU_SETS)} or a list of GPU lists "
                         f"such as [[0,1],[2,3]], got {_short(v)}")
    if not isinstance(v, list) or not v:
        raise FieldError(f"expected one of {', '.join(GPU_SETS)} or a list of GPU lists, got {_short(v)}")
    if len(v) > MAX_LIST:
        raise FieldError(f"{len(v)} GPU sets: at most {MAX_LIST}")
    sets = []
    for item in v:
        if isinstance(item, str):
            try:
                sets.append(parse_gpus(item))
            except UsageError as e:
                raise FieldError(str(e)) from None
        elif isinstance(item, list) and item and len(item) <= MAX_LIST and all(
                isinstance(g, int) and not isinstance(g, bool) and 0 <= g < MAX_LIST for g in item):
            if len(set(item)) != len(item):
                raise FieldError(f"GPU list {item} names a GPU twice")
            sets.append(tuple(item))
        else:
            raise FieldError(f"expected a GPU list such as [0, 1] or \"0-3\", got {_short(item)}")
    return tuple(sets)


_LINK = re.compile(r"^(NV\d+|PIX|PXB|PHB|NODE|SYS)$")


def _link(v: Any) -> str:
    s = _str(v).upper()
    if not _LINK.match(s):
        raise FieldError(f"expected a `nvidia-smi topo -m` link such as NV18, NV6, PIX, PXB, PHB, NODE or "
                         f"SYS, got {_short(v)}")
    return s


def _islands(v: Any) -> tuple[tuple[int, ...], ...]:
    if not isinstance(v, list) or not v or not all(isinstance(i, list) and i for i in v):
        raise FieldError(f"expected a list of GPU lists such as [[0,1,2,3],[4,5,6,7]], got {_short(v)}")
    out = []
    for isl in v:
        if not all(isinstance(g, int) and not isinstance(g, bool) and 0 <= g < MAX_LIST for g in isl):
            raise FieldError(f"island {isl!r}: expected GPU indices (whole numbers >= 0)")
        out.append(tuple(sorted(isl)))
    return tuple(sorted(out))


def _str_map(v: Any) -> dict[str, str]:
    if not isinstance(v, dict) or not v:
        raise FieldError(f"expected a table of name = \"value\" such as {{default = \"P2P\"}}, got {_short(v)}")
    if len(v) > MAX_LIST:
        raise FieldError(f"{len(v)} entries: at most {MAX_LIST}")
    return {_str(k): _str(x) for k, x in v.items()}


def _str_list(v: Any) -> tuple[str, ...]:
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not v or len(v) > MAX_LIST:
        raise FieldError(f"expected a list of up to {MAX_LIST} strings, got {_short(v)}")
    return tuple(_str(x) for x in v)


READERS: dict[str, tuple[Callable[[Any], Any], str]] = {
    # type name -> (reader, what a user should write)
    "number": (_number, "a number"),
    "int": (_int, "a whole number"),
    "str": (_str, "a string"),
    "bool": (_bool, "true or false"),
    "size": (_size, "a size such as \"1G\""),
    "sizes": (_sizes, "sizes such as [\"8\", \"1G\"] or \"1M-1G:x4\""),
    "op": (_op, "a collective such as \"all_reduce\""),
    "dtype": (_dtype, "a dtype such as \"float32\""),
    "fabric": (_fabric, "a fabric such as \"default\", \"p2p-off\" or \"shaped:1gbit\""),
    "gpu_sets": (_gpu_sets, "\"all\", \"each_island\", \"each_pair\" or [[0,1],[2,3]]"),
    "link": (_link, "a link such as \"NV18\""),
    "islands": (_islands, "GPU lists such as [[0,1,2,3],[4,5,6,7]]"),
    "str_map": (_str_map, "a table such as {default = \"P2P\", \"p2p-off\" = \"SHM\"}"),
    "str_list": (_str_list, "a list of strings"),
    "levels": (_levels, "levels such as [2, 3]"),
    "severity": (_severity, "critical, warning or info"),
}


@dataclass(frozen=True)
class Field:
    type: str  # a key of READERS
    doc: str = ""
    required: bool = False
    default: Any = None
    positive: bool = False  # numbers: > 0
    fraction: bool = False  # numbers: 0 < x <= 1 (a share of a median or of a reference)
    at_least: float | None = None  # numbers: >= this
    at_most: float | None = None  # numbers: <= this (MAX_NUMBER bounds every number anyway)
    choices: tuple[str, ...] = ()
    # the command-line option this key feeds (declare.Declared) and the command that has it: its range is
    # checked when the spec is read, in its words, so that `qualify --dry-run` refuses what the run would
    as_option: tuple[Any, str] | None = None

    def read(self, raw: Any) -> Any:
        reader, _ = READERS[self.type]
        v = reader(raw)
        if self.choices and v not in self.choices:
            raise FieldError(f"expected one of {', '.join(self.choices)}, got {raw!r}")
        if self.positive and v <= 0:
            raise FieldError(f"expected a number > 0, got {raw!r}")
        if self.fraction and not 0 < v <= 1:
            raise FieldError(f"expected a fraction in (0, 1], e.g. 0.9, got {raw!r}")
        if self.at_least is not None and v < self.at_least:
            raise FieldError(f"expected at least {self.at_least:g}, got {raw!r}")
        if self.at_most is not None and v > self.at_most:
            raise FieldError(f"expected at most {self.at_most:g}, got {raw!r}")
        if self.as_option is not None:
            declared, command = self.as_option
            why = declared.refusal(v)
            if why is not None:
                raise FieldError(f"{v!r} is {why}, the range `fabricbench {command} {declared.flag}` takes"
                                 if why.startswith("outside") else f"expected {why}, got {raw!r}")
        return v

    @property
    def expects(self) -> str:
        return READERS[self.type][1]
