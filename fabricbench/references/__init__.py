"""Is this normal? A measurement beside the published figures of the same platform (table.py).

    fabricbench sweep --gpus 0-7 --sizes 1G-16G:x4
      expected on 8× H200 SXM (NVSwitch): 431-482 GB/s at >= 1G, NVLS on ... [nccl-tests#272, ...]

`matching(gpu_name, nranks, op, nbytes)` gives the rows a measurement falls under; `summary(records)`
one line per (GPU model, rank count, op) of measured collective records, at their largest size: the
measurement, then each matching reference with its sources, or "no published reference" and why.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

from fabricbench.references.table import REFERENCES, Reference
from fabricbench.results.status import TIMED_COLLECTIVE
from fabricbench.sizes import format_size


# fabrics whose figures the published rows hold under; any other fabric (net, shaped:RATE, a custom one)
# changes the paths in ways no published figure describes
UNDER = ("default", "p2p-off")


def _under(fabric: str | None) -> str | None:
    """The rows' fabric a measurement's fabric is compared under: p2p-off's own, else NCCL's default paths
    (a custom fabric may only set NCCL_DEBUG); None for net and shaped, which no published row describes."""
    f = (fabric or "default").split(":", 1)[0]
    if f == "p2p-off":
        return "p2p-off"
    return None if f in ("net", "shaped") else "default"


def matching(gpu_name: str | None, nranks: int | None, op: str | None, nbytes: int | None,
             fabric: str | None = None) -> list[Reference]:
    """The rows a measurement falls under; `fabric` (the record's): p2p-off rows hold only under p2p-off."""
    if not gpu_name or not nranks or not op or not nbytes:
        return []
    name = gpu_name.upper()
    under = _under(fabric)
    return [r for r in REFERENCES if any(g.upper() in name for g in r.gpu.split("|"))
            and not any(x.upper() in name for x in r.gpu_not)
            and r.gpus == nranks and r.op == op and nbytes >= r.min_bytes and r.under == under]


def why_none(gpu_name: str | None, nranks: int | None, op: str | None, nbytes: int | None,
             fabric: str | None = None) -> str:
    """Why `matching` finds no row for this measurement, in words (for "none matches (...)")."""
    if not gpu_name:
        return "the GPUs are not named: a gloo run, or a file without nccl-tests' '#  Rank' lines"
    if not nranks or not op or not nbytes:
        return f"the {'rank count' if not nranks else 'collective' if not op else 'size'} is not known"
    if _under(fabric) is None:
        return f"no published figure describes fabric {fabric}"
    name = gpu_name.upper()
    rows = [r for r in REFERENCES if any(g.upper() in name for g in r.gpu.split("|"))
            and not any(x.upper() in name for x in r.gpu_not)]
    if not rows:
        return f"none for {gpu_name}"
    counted = [r for r in rows if r.gpus == nranks and r.op == op and r.under == _under(fabric)]
    if not counted:
        have = sorted({f"{r.gpus}× {r.op}" for r in rows})
        return f"none for {nranks} × {gpu_name} {op} at {format_size(nbytes)}: published for {', '.join(have)}"
    return (f"none for {nranks} × {gpu_name} {op} at {format_size(nbytes)}: the rows start at "
            f"{format_size(min(r.min_bytes for r in counted))}")


def tag(source: str) -> str:
    """'https://github.com/NVIDIA/nccl-tests/issues/272 (...)' -> 'nccl-tests#272'; else the text before ':'."""
    m = re.match(r"https://github\.com/[^/]+/([^/]+)/(?:issues|pull)/(\d+)", source)
    return f"{m.group(1)}#{m.group(2)}" if m else source.split(":")[0]


def line(ref: Reference) -> str:
    cond = f", {ref.condition}" if ref.condition else ""
    srcs = f" [{', '.join(tag(s) for s in ref.sources)}]"
    if ref.lo_gbps is None or ref.hi_gbps is None:
        return f"expected on {ref.platform}: no published figure{cond}{srcs}"
    fig = f"{ref.lo_gbps:g}" if ref.lo_gbps == ref.hi_gbps else f"{ref.lo_gbps:g}-{ref.hi_gbps:g}"
    return f"expected on {ref.platform}: {fig} GB/s at >= {format_size(ref.min_bytes)}{cond}{srcs}"


def summary(records: list[dict[str, Any]], width: int = 79, *, unnamed_line: bool = True) -> list[str]:
    """Lines for a command's summary, each at most `width` columns: each group's largest measured size beside
    its references. Records whose GPUs are not named (gloo ranks, an imported table) have no platform to
    match: they get one line for all of them (unnamed_line), not one per collective."""
    best: dict[tuple, dict[str, Any]] = {}
    unnamed = False
    for r in records:
        if r.get("kind") != "collective" or r.get("status") not in TIMED_COLLECTIVE or not r.get("busbw_gbps"):
            continue
        names = r.get("gpu_names") or []
        model = names[0] if names and len(set(names)) == 1 else None
        if model is None:
            unnamed = True
            continue
        key = (model, r.get("nranks"), r.get("op"), r.get("fabric"))
        if key not in best or (r.get("bytes") or 0) > (best[key].get("bytes") or 0):
            best[key] = r
    out = []
    for (model, n, op, fabric), r in best.items():
        head = (f"reference: {op}, {n} × {model}, fabric {fabric or 'default'}: "
                f"{r['busbw_gbps']:.4g} GB/s at {format_size(r['bytes'])}")
        refs = matching(model, n, op, r.get("bytes"), fabric)
        if refs:
            out += [head] + [f"  {line(x)}" for x in refs]
        else:
            out.append(f"{head}; no published reference matches ({why_none(model, n, op, r.get('bytes'), fabric)})")
    if unnamed and not best and unnamed_line:
        out.append("reference: none matches (the GPUs are not named: a gloo or imported run)")
    wrapped = []
    for text in out:
        indent = "    " if text.startswith("  ") else "  "
        wrapped += textwrap.wrap(text, width=width, subsequent_indent=indent, break_on_hyphens=False) or [text]
    return wrapped


__all__ = ["REFERENCES", "Reference", "line", "matching", "summary", "why_none"]
