"""SizeSweep: the message sizes a sweep runs, as a value object that expands to an explicit list.

    fabricbench sweep --sizes 8-8G          (doubling from 8 B to 8 GiB)
    fabricbench sweep --sizes 1M-1G:x4      (factor 4)
    fabricbench sweep --sizes 64K,1M,256M   (an explicit list)

One rule for every size and memory option: a bare suffix is binary, as in nccl-tests (1K = 1024 B,
1M = 2^20 B, 1G = 2^30 B), and so is KiB/MiB/GiB/TiB; KB/MB/GB/TB are decimal (1GB = 10^9 B, as GPU
vendors quote memory). `--dry-run` prints the expansion and every results file stores the spec it came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fabricbench.errors import UsageError

_SUFFIX = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_DECIMAL = {"K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
# number, then: nothing or B (bytes); K/M/G/T alone or with iB (binary); K/M/G/T with B alone (decimal)
# ASCII digits only: \d alone would read '١٢' (Arabic-Indic) or '１２' (fullwidth) as 12
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(?:([KMGT])(IB|B)?|B)?\s*$", re.IGNORECASE | re.ASCII)
UNITS_HELP = "K/M/G and KiB/MiB/GiB are binary (1G = 2^30 B); KB/MB/GB are decimal (1GB = 10^9 B)"


MAX_BYTES = 2**63 - 1  # sizes travel as int64 to the engine and to NCCL's counts


def parse_size(text: str) -> int:
    """'8', '64K', '1M', '1.5G', '8GiB' -> bytes (binary); '80GB', '500MB' -> bytes (decimal)."""
    if text.strip().startswith("-"):
        raise UsageError(f"size {text.strip()!r} is negative; sizes start at 1 B (write e.g. 8, 64K, 1M)")
    m = _SIZE.match(text)
    if not m:
        raise UsageError(f"cannot read size {text!r}; write e.g. 8, 64K, 1M, 8G or 8GiB (binary: 1K = 1024 B), "
                         f"or 8GB (decimal: 10^9 B)")
    letter, tail = (m.group(2) or "").upper(), (m.group(3) or "").upper()
    number, unit = m.group(1), (_DECIMAL[letter] if tail == "B" else _SUFFIX[letter])
    if "." in number:  # exact arithmetic: a float would round sizes past 2^53
        whole, frac = number.split(".")
        scaled = int(whole + frac) * unit
        value, rest = divmod(scaled, 10 ** len(frac))
        if rest:
            raise UsageError(f"size {text!r} is not a whole number of bytes")
    else:
        value = int(number) * unit
    if value <= 0:
        raise UsageError(f"size {text!r} is zero; sizes start at 1 B")
    if value > MAX_BYTES:
        raise UsageError(f"size {text.strip()!r} is {value:.3g} B, beyond the largest size a run can address "
                         f"(2^63 - 1 B = 8 EiB)")
    return value


GIB = 2**30


def gib(nbytes: object) -> float | None:
    """Bytes in GiB (binary), or None where there is no number (a memory figure a run never reached)."""
    return nbytes / GIB if isinstance(nbytes, (int, float)) and not isinstance(nbytes, bool) else None


def format_gib(nbytes: object, *, digits: int = 1, missing: str = "-", unit: bool = False) -> str:
    """Bytes as GiB for a table cell ("13.5") or a sentence ("13.5 GiB", unit=True); `missing` where gib()
    has no number."""
    v = gib(nbytes)
    return missing if v is None else f"{v:.{digits}f}" + (" GiB" if unit else "")


def format_size(nbytes: int) -> str:
    """Shortest exact binary form: 8 -> '8B', 1048576 -> '1M', 1536 -> '1.5K'."""
    for suffix in ("T", "G", "M", "K"):
        unit = _SUFFIX[suffix]
        if nbytes >= unit and (nbytes * 4) % unit == 0:
            value = nbytes / unit
            return f"{value:g}{suffix}"
    return f"{nbytes}B"


@dataclass(frozen=True, kw_only=True)
class SizeSweep:
    """Either a geometric range (min, max, factor) or an explicit list of sizes in bytes."""

    min_bytes: int | None = None
    max_bytes: int | None = None
    factor: int = 2
    explicit: tuple[int, ...] = ()
    spec: str = ""  # the text it was parsed from, stored with results

    @classmethod
    def parse(cls, text: str) -> "SizeSweep":
        text = text.strip()
        if not text:
            raise UsageError("--sizes is empty; write e.g. 8-8G, 1M-1G:x2 or 64K,1M")
        if "," in text:
            if any(not part.strip() for part in text.split(",")):
                raise UsageError(f"--sizes {text!r} has an empty item; write e.g. 64K,1M")
            sizes = tuple(parse_size(part) for part in text.split(","))
            return cls(explicit=sizes, spec=text)
        if text.startswith("-"):
            raise UsageError(f"--sizes {text!r}: sizes cannot be negative; write e.g. 8-8G, 1M-1G:x2 or 64K,1M")
        rng, _, fac = text.partition(":")
        factor = 2
        if fac:
            m = re.fullmatch(r"\s*[x*]?([0-9]+)\s*", fac, re.ASCII)
            if not m or int(m.group(1)) < 2:
                raise UsageError(f"bad factor {fac!r} in --sizes {text!r}; write e.g. 1M-1G:x2 (factor >= 2)")
            factor = int(m.group(1))
        lo_text, dash, hi_text = rng.partition("-")
        if not dash:
            return cls(explicit=(parse_size(rng),), spec=text)
        lo, hi = parse_size(lo_text), parse_size(hi_text)
        if hi < lo:
            raise UsageError(f"--sizes {text!r} descends ({format_size(lo)} > {format_size(hi)}); "
                             f"write the smaller size first")
        return cls(min_bytes=lo, max_bytes=hi, factor=factor, spec=text)

    def expand(self) -> list[int]:
        """The sizes that will run, in order, without duplicates."""
        if self.explicit:
            return list(dict.fromkeys(self.explicit))
        assert self.min_bytes is not None and self.max_bytes is not None
        out, size = [], self.min_bytes
        while size <= self.max_bytes:
            out.append(size)
            size *= self.factor
        return out

    def __str__(self) -> str:
        return self.spec or ",".join(format_size(s) for s in self.expand())
