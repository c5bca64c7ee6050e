"""Analysis of collective records shared by the commands, the reports and the tests: which bandwidth to
compare, the comparison rows of `compare`, the rows of `scaling`, and the one number formatter.

    fabricbench compare --fabrics default,p2p-off --json     ("comparison" is comparison()'s rows)
    fabricbench scaling --num-gpus 2,4,8 --json                 ("rows" is scaling_rows())

Per size, "slower" = the metric on the first fabric named / the metric on a fabric (N× slower: the
direction every ratio is printed in); "ratio" (JSON only) is its inverse, the bandwidth ratio.
The metric is busbw, or
algbw when every record has one rank (busbw's factor is 0 there; nccl-tests' PERFORMANCE.md).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

from fabricbench.sizes import format_size

METRIC_LABEL = {"busbw_gbps": "busbw", "algbw_gbps": "algbw"}


def metric_for(records: list[dict[str, Any]]) -> tuple[str, str | None]:
    """busbw, unless every record is single-rank (busbw factor 0): then algbw, with the reason."""
    if records and all((r.get("nranks") or 0) <= 1 for r in records):
        return "algbw_gbps", "n = 1: the busbw factor is 0, so algbw is compared"
    return "busbw_gbps", None


def comparison(runs: Sequence[Any]) -> dict[str, Any]:
    """Rows keyed by (op, dtype, inplace, bytes): the metric per fabric and its ratio to the first fabric.

    `runs` are objects with `.fabric.name` and `.records` (fabricbench.measuring.child.ChildRun), in the
    order the fabrics were named.
    """
    records = [rec for r in runs for rec in r.records]
    metric, note = metric_for(records)
    names = [r.fabric.name for r in runs]
    rows: dict[tuple, dict[str, Any]] = {}
    for r in runs:
        for rec in r.records:
            key = (rec["op"], rec["dtype"], bool(rec.get("inplace")), rec["bytes"])
            row = rows.setdefault(key, {"op": key[0], "dtype": key[1], "inplace": key[2], "bytes": key[3],
                                        metric: {}, "ratio": {}, "slower": {}, "cv": {}})
            row[metric][r.fabric.name] = rec.get(metric)
            row["cv"][r.fabric.name] = rec.get("cv")
    base = names[0] if names else None
    for row in rows.values():
        b = row[metric].get(base)
        for n in names:
            v = row[metric].get(n)
            row["ratio"][n] = (v / b) if (v is not None and b) else None
            row["slower"][n] = slower(b, v)
    ordered = sorted(rows.values(), key=lambda x: (x["op"], x["inplace"], x["bytes"]))
    return {"metric": metric, "note": note, "fabrics": names, "rows": ordered}


def comparison_series(table: dict[str, Any]) -> dict[str, dict[str, list[tuple[int, float | None]]]]:
    """series[op][fabric] = [(bytes, metric), ...] for a plot of comparison()'s rows."""
    series: dict[str, dict[str, list]] = {}
    metric = table["metric"]
    for row in table["rows"]:
        op = row["op"] + (" (in-place)" if row["inplace"] else "")
        for n in table["fabrics"]:
            series.setdefault(op, {}).setdefault(n, []).append((row["bytes"], row[metric].get(n)))
    return series


def scaling_rows(results: Iterable[tuple[Any, Any]]) -> list[dict[str, Any]]:
    """(placement, child run) pairs -> one row per record: count, placement, GPU set, bandwidths."""
    rows = []
    for p, run in results:
        for rec in run.records:
            rows.append({"op": rec["op"], "bytes": rec["bytes"], "inplace": bool(rec.get("inplace")),
                         "count": p.count, "placement": p.label, "gpus": rec["extra"]["placement_gpus"],
                         "slowest_link": p.worst_link, "nranks": rec.get("nranks"),
                         "busbw_gbps": rec.get("busbw_gbps"), "algbw_gbps": rec.get("algbw_gbps"),
                         "time_us": rec.get("time_us"), "transport": rec.get("transport")})
    return sorted(rows, key=lambda r: (r["op"], r["inplace"], r["bytes"], r["count"], r["placement"]))


def scaling_series(rows: list[dict[str, Any]]) -> dict[str, dict[str, list[tuple[int, float | None]]]]:
    """series["op SIZE"][placement] = [(GPU count, busbw), ...] at each op's largest size, out-of-place."""
    series: dict[str, dict[str, list]] = {}
    for op in dict.fromkeys(r["op"] for r in rows):
        largest = max(r["bytes"] for r in rows if r["op"] == op)
        key = f"{op} {format_size(largest)}"
        for r in rows:
            if r["op"] == op and r["bytes"] == largest and not r["inplace"]:
                series.setdefault(key, {}).setdefault(r["placement"], []).append((r["count"], r["busbw_gbps"]))
    return series


def fmt(v: float | None, digits: int = 2) -> str:
    """A figure for people: thousands separated and no decimals from 1,000 up (2,157 GB/s, 1,233 samples/s),
    `digits` decimals from 1 (as nccl-tests prints), three significant digits below 1 so that small values
    show (0.00233), never an exponent; '-' for nothing measured."""
    if v is None:
        return "-"
    if v != v or v in (float("inf"), float("-inf")):
        return str(v)
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 1 or a == 0:
        return f"{v:.{digits}f}"
    decimals = 2 - math.floor(math.log10(a))  # three significant digits
    return f"{v:.{decimals}f}"


def fmt_count(n: float) -> str:
    """A large count in words: 7.24 billion, 124 million, 8,192."""
    for scale, word in ((1e12, "trillion"), (1e9, "billion"), (1e6, "million")):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {word}"
    return f"{n:,.0f}"


CV_NOISY = 0.5  # a coefficient of variation above this: the spread is over half the median, the figure is noise


def noisy(cv: float | None) -> bool:
    """A figure whose spread is over half its median: marked '!' wherever it is printed."""
    return cv is not None and cv > CV_NOISY


def fmt_cv(cv: float | None) -> str:
    """cv, marked '!' above CV_NOISY (the legend under each table says what the mark means)."""
    if cv is None:
        return "-"
    return fmt(cv) + (" !" if noisy(cv) else "")


def byte_unit(largest: float) -> tuple[str, int]:
    """The binary unit a set of byte counts reads best in, largest first: GiB for real models, MiB or KiB
    for the CPU-lab ones (whose states would all print as 0.00 GiB)."""
    return next(((u, b) for u, b in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)) if largest >= b), ("B", 1))


def slower(reference: float | None, value: float | None) -> float | None:
    """How many times slower `value` is than `reference`, for bandwidths (higher is better): reference /
    value. The one direction every ratio fabricbench prints takes: above 1 is slower, below 1 faster."""
    if reference is None or value is None or value <= 0:
        return None
    return reference / value


def fmt_ratio(v: float | None) -> str:
    """An "N× slower" figure: '5.21×' (above 1: slower; below 1: faster)."""
    if v is None:
        return "-"
    return (fmt(v) if abs(v) >= 1000 else f"{v:.2f}") + "×"
