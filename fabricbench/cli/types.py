"""The option types: one click type per kind of value, each with its validation and its one-line message.

    fabricbench sweep --sizes 1M-1G:x2 --iters 20 --timeout 60 --gpus 0-3 --out run.jsonl

Every option of every command takes one of these (tests/cli/test_cli_property.py fails for a bare click
int/float/str/Path, and drives each option with hostile values of its type). They reuse the library's
parsers (sizes.py, gpus.py, fabrics, the registries) and add what the command line needs before anything
runs: numbers are ASCII digits (int() reads '١٢' as 12; a size or GPU must not), finite, inside a
documented range; a list has no empty item; text holds no control character and is not huge; an output
that is a folder, device or FIFO where a file is wanted (or a file where a folder is) is refused by name.
A refusal is click's BadParameter, which fabricbench.cli.main prints as one `Error:` line, exit 2.
The ranges and messages are listed in docs/options.md. A type returns the text as given (stripped) where
the library takes text (sizes, GPU lists, fabric specs), so library calls stay as they are.
"""

from __future__ import annotations

import importlib
import math
import os
import re
import shutil

import click

from fabricbench.cli.option_type import CONTROL, MAX_TEXT, OptionError, OptionType, refuse  # noqa: F401 (named here)
from fabricbench.declare import WEEK_S
from fabricbench.gpus import parse_gpus
from fabricbench.masking import shown_spec
from fabricbench.sizes import SizeSweep, parse_size

_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_REAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
STRATEGY_REGISTRY = "fabricbench.training.strategies:STRATEGIES"
OP_REGISTRY = "fabricbench.collectives:COLLECTIVES"


def _human(x: float) -> str:
    if x == WEEK_S:
        return "604800 (7 days)"
    return f"{x:,}" if isinstance(x, int) else f"{x:g}"


class Text(OptionType):
    """A name or free text (a model, a host, a label): one line, at most `max_len` characters."""

    name = "text"
    kind = "text"

    def __init__(self, max_len: int = 256) -> None:
        self.max_len = max_len

    def describe(self) -> str:
        return f"text, 1 to {self.max_len} characters, no control character"

    def convert(self, value, param, ctx):
        s = self.text(value, param, ctx)
        if len(s) > self.max_len:
            self.fail(f"{len(s):,} characters is too long (at most {self.max_len})", param, ctx)
        return s


class Program(OptionType):
    """The program a command line runs (exec): an executable file, or a name found on PATH."""

    name = "program"
    kind = "program"

    def describe(self) -> str:
        return "a program: an executable file, or a name found on PATH"

    def convert(self, value, param, ctx):
        s = self.text(value, param, ctx)
        found = shutil.which(s)
        if found is None or not os.path.isfile(found):  # a socket has its x bits too
            self.fail(f"{s[:60]!r} is not a program here (not an executable file, nor a name found on PATH)",
                      param, ctx)
        return s


class Passed(OptionType):
    """A program's own arguments (exec): passed to it as they are, so no value is refused."""

    name = "args"
    kind = "arguments"

    def describe(self) -> str:
        return "the program's own arguments, passed as they are"

    def convert(self, value, param, ctx):
        return str(value)


class Count(OptionType):
    """A whole number in [lo, hi], ASCII digits only."""

    name = "count"
    kind = "count"

    def __init__(self, lo: int = 1, hi: int = 10_000_000) -> None:
        self.lo, self.hi = lo, hi

    def describe(self) -> str:
        return f"whole number {self.lo:,} to {self.hi:,}"

    def convert(self, value, param, ctx):
        if isinstance(value, int) and not isinstance(value, bool):
            n = value
        else:
            s = self.text(value, param, ctx)
            if not _INT.fullmatch(s):
                self.fail(f"{s[:40]!r} is not a whole number (ASCII digits, e.g. {self._example()})", param, ctx)
            n = int(s)
        if not self.lo <= n <= self.hi:
            self.fail(f"{n} is outside {self.lo:,} to {self.hi:,}", param, ctx)
        return n

    def _example(self) -> int:
        return _count_example(self.lo, self.hi)


def _count_example(lo: int, hi: int) -> int:
    return 20 if lo <= 20 <= hi else lo


class Real(OptionType):
    """A finite number in [lo, hi] (`lo_open`: lo itself excluded; `zero`: 0 also allowed, meaning off)."""

    name = "number"
    kind = "number"

    def __init__(self, lo: float, hi: float, *, lo_open: bool = False, hi_open: bool = False,
                 zero: bool = False, unit: str = "") -> None:
        self.lo, self.hi, self.lo_open, self.hi_open, self.zero, self.unit = lo, hi, lo_open, hi_open, zero, unit

    def describe(self) -> str:
        left, right = "(" if self.lo_open else "[", ")" if self.hi_open else "]"
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.kind} in {left}{_human(self.lo)}, {_human(self.hi)}{right}{unit}" + \
            (", or 0 (off)" if self.zero else "")

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            x = float(value)
        else:
            s = self.text(value, param, ctx)
            if not _REAL.fullmatch(s):
                self.fail(f"{s[:40]!r} is not a number (ASCII digits, e.g. {self._example()})", param, ctx)
            x = float(s)
        if not math.isfinite(x):
            self.fail(f"{value!s:.40} is not a finite number", param, ctx)
        if self.zero and x == 0:
            return 0.0
        below = x < self.lo or (self.lo_open and x == self.lo)
        above = x > self.hi or (self.hi_open and x == self.hi)
        if below or above:
            self.fail(f"{x:g} is outside {self.describe().split(' in ', 1)[1]}", param, ctx)
        return x

    def _example(self) -> str:
        return "0.05" if self.hi <= 1 else "60"


class Fraction(Real):
    """A fraction: inside (0, 1) by default."""

    name = "fraction"
    kind = "fraction"

    def __init__(self, lo: float = 0.0, hi: float = 1.0, *, lo_open: bool = True, hi_open: bool = True,
                 zero: bool = False) -> None:
        super().__init__(lo, hi, lo_open=lo_open, hi_open=hi_open, zero=zero)


class Duration(Real):
    """Seconds, finite, 1 s to 7 days by default."""

    name = "seconds"
    kind = "seconds"

    def __init__(self, lo: float = 1.0, hi: float = WEEK_S, *, lo_open: bool = False) -> None:
        super().__init__(lo, hi, lo_open=lo_open, unit="s")


class Size(OptionType):
    """A byte size: 8, 64K, 1M, 1.5G, 8GiB (binary) or 80GB (decimal); 1 B to 2^63 - 1 B."""

    name = "size"
    kind = "size"

    def describe(self) -> str:
        return "size 1 B to 8 EiB: 64K, 1M, 8G (binary) or 80GB (decimal)"

    def convert(self, value, param, ctx):
        s = self.text(value, param, ctx)
        self.library(lambda: parse_size(s), param, ctx)
        return s


class SizeList(OptionType):
    """A size sweep: 8-8G, 1M-1G:x4 (factor) or a list 64K,1M; no empty item."""

    name = "sizes"
    kind = "size list"

    def describe(self) -> str:
        return "sizes: MIN-MAX, MIN-MAX:xF (F >= 2) or a list A,B,C, no empty item"

    def convert(self, value, param, ctx):
        s = self.text(value, param, ctx)
        self.library(lambda: SizeSweep.parse(s), param, ctx)
        return s


class GpuList(OptionType):
    """CUDA ordinals: 0-7, 0,2,5, 0-3,6; each once, 0 to 1023 (what is visible is checked when it runs)."""

    name = "gpus"
    kind = "GPU list"

    def describe(self) -> str:
        return "GPU list: 0-7, 0,2,5 or 0-3,6; ordinals 0 to 1023, each once, no empty item"

    def convert(self, value, param, ctx):
        s = self.text(value, param, ctx)
        self.library(lambda: parse_gpus(s), param, ctx)
        return s


class GpuCount(OptionType):
    """How many GPUs, where no GPU is touched (estimate): a count N, or a GPU list whose entries count.
    A bare number is a count here, and an ordinal in every command that runs on GPUs (docs/options.md)."""

    name = "gpus"
    kind = "GPU count"

    def describe(self) -> str:
        return "a count 1 to 1,048,576 (8), or a GPU list (0-7) whose entries are counted"

    def convert(self, value, param, ctx):
        s = self.text(value, param, ctx)
        if _INT.fullmatch(s):
            return Count(1, 2**20).convert(s, param, ctx)
        return len(self.library(lambda: parse_gpus(s), param, ctx))


class CountList(OptionType):
    """Whole numbers, comma-separated, each in [lo, hi] and given once; no empty item."""

    name = "counts"
    kind = "count list"

    def __init__(self, lo: int = 1, hi: int = 1024) -> None:
        self.item = Count(lo, hi)

    def describe(self) -> str:
        return f"comma list of whole numbers {self.item.lo} to {self.item.hi}, each once"

    def convert(self, value, param, ctx):
        s = self.text(value, param, ctx)
        items = [p.strip() for p in s.split(",")]
        if "" in items:
            self.fail(f"{s!r} has an empty item", param, ctx)
        nums = [self.item.convert(p, param, ctx) for p in items]
        if len(set(nums)) != len(nums):
            self.fail(f"{s!r} names a number twice", param, ctx)
        return s


class NameList(OptionType):
    """A comma list of names, each known to a registry (`registry` as 'module:ATTR'), none twice, no
    empty item. Without a registry: names of letters, digits, '_', '-' and '.'."""

    name = "names"
    kind = "name list"

    def __init__(self, registry: str | None = None, what: str = "name", allow_all: bool = False) -> None:
        self.registry, self.what, self.allow_all = registry, what, allow_all

    def describe(self) -> str:
        plural = self.what[:-1] + "ies" if self.what.endswith("y") else self.what + "s"
        return f"comma list of {plural}, each once, no empty item" + (" (or all)" if self.allow_all else "")

    def convert(self, value, param, ctx):
        s = self.text(value, param, ctx)
        items = [p.strip() for p in s.split(",")]
        if "" in items:
            self.fail(f"{s!r} has an empty item", param, ctx)
        if self.allow_all and items == ["all"]:
            return s
        twice = sorted({n for n in items if items.count(n) > 1})
        if twice:
            self.fail(f"names {', '.join(twice)} twice; give each {self.what} once", param, ctx)
        if self.registry is None:
            bad = [n for n in items if not re.fullmatch(r"[A-Za-z0-9_.-]+", n, re.ASCII)]
            if bad:
                self.fail(f"{bad[0][:40]!r} is not a {self.what} (letters, digits, '_', '-', '.')", param, ctx)
            return s
        module, _, attr = self.registry.partition(":")
        reg = getattr(importlib.import_module(module), attr)
        for n in items:
            self.library(lambda n=n: reg.get(n), param, ctx)
        return s


class FabricSpec(OptionType):
    """A fabric: default, p2p-off, net, shaped:RATE or name:VAR=VAL[,VAR=VAL]; `many`: a comma list of
    them. A message shows a custom fabric masked (masking.shown_spec), never its secret values."""

    name = "fabric"
    kind = "fabric"

    def __init__(self, many: bool = False) -> None:
        self.many = many
        if many:
            self.name, self.kind = "fabrics", "fabric list"

    def describe(self) -> str:
        one = "default, p2p-off, net, shaped:RATE or name:VAR=VAL[,VAR=VAL]"
        return f"comma list of fabrics ({one}), each once" if self.many else f"fabric: {one}"

    def convert(self, value, param, ctx):
        # fabrics (~35 ms: subprocess, secrets, the families) loads when a fabric is read, not for --help
        from fabricbench.fabrics import get_fabric, parse_fabric_list

        if len(str(value)) > MAX_TEXT or CONTROL.search(str(value)):  # never echo what may be a secret
            self.fail(f"{shown_spec(str(value)[:40])!r} is too long or holds a control character", param, ctx)
        s = self.text(value, param, ctx)
        self.library(lambda: parse_fabric_list(s) if self.many else get_fabric(s), param, ctx)
        return s


class Choice(click.Choice):
    """click's Choice, kept as the declared type of a closed set of words (engine, device, precision)."""

    kind = "choice"

    def fail(self, message, param=None, ctx=None) -> "NoReturn":  # noqa: F821
        refuse(message, param, ctx, library=True)

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value not in self.choices and not CONTROL.search(value):
            # the value, then the words (as every other refusal: "--buffers warm: choose rotate or reuse")
            words = list(map(str, self.choices))
            either = " or ".join(words) if len(words) <= 2 else ", ".join(words[:-1]) + " or " + words[-1]
            refuse(f"{value[:80]}: choose {either}", param, ctx)
        return super().convert(value, param, ctx)

    def describe(self) -> str:
        return "one of " + ", ".join(self.choices)


# The path types live in their own module (over option_type.py, as these are); named here too.
from fabricbench.cli.path_types import InputPath, OutputFile, OutputFolder, PathType  # noqa: E402,F401
