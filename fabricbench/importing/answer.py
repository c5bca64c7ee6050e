"""What one imported file holds, and is it normal: counted as its records go by, then said in a few lines.

    fabricbench import all_reduce.log --out imported.jsonl
      all_reduce.log: nccl-tests, 1 run(s), 46 collective (all_reduce)
        all_reduce: 8 ranks on 8 × NVIDIA H100 80GB HBM3; busbw 478.9 GB/s at 8G (the largest size)
        within: expected on 8× H100 SXM (NVSwitch): 460-480 GB/s at >= 1G, NVLS on [nccl-tests#212, ...]
        next: fabricbench qualify --spec builtin:NAME --from imported.jsonl  (NAME: qualify --list-specs)

The tally holds counts and, per (op, rank count, GPU model, fabric), the record at the largest size (its
best placement): bounded by the groups, not by the file. The reference comes from fabricbench/references
(docs/references.md), the published figure of the same platform with its sources, or "none matches" and why.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from fabricbench import references
from fabricbench.results.status import TIMED_COLLECTIVE
from fabricbench.sizes import format_size

_RUNS_CAP = 100_000  # run ids counted exactly up to this many (an Inspector job has one per rank and comm)


@dataclass(kw_only=True)
class Tally:
    """One file's records, as counts, and its largest-size collective per group."""

    path: str
    format: str = ""
    records: int = 0
    kinds: Counter = field(default_factory=Counter)
    ops: set[str] = field(default_factory=set)
    runs: set[str] = field(default_factory=set)
    ranks: set[int] = field(default_factory=set)
    gpus: Counter = field(default_factory=Counter)  # GPU model -> the most GPUs of it one run named
    largest: dict[tuple, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def add(self, rec: dict[str, Any]) -> None:
        self.records += 1
        self.kinds[rec.get("kind")] += 1
        if rec.get("op"):
            self.ops.add(rec["op"])
        if len(self.runs) < _RUNS_CAP:
            self.runs.add(rec.get("run_id"))
        if isinstance(rec.get("nranks"), int):
            self.ranks.add(rec["nranks"])
        names = rec.get("gpu_names") or []
        for model, n in Counter(names).items():
            self.gpus[model] = max(self.gpus[model], n)
        if rec.get("kind") == "collective" and rec.get("status") in TIMED_COLLECTIVE and \
                rec.get("busbw_gbps") is not None and rec.get("bytes"):
            model = names[0] if names and len(set(names)) == 1 else None
            key = (rec.get("op"), rec.get("nranks"), model, rec.get("fabric"))
            best = self.largest.get(key)
            if best is None or (rec["bytes"], rec["busbw_gbps"]) > (best["bytes"], best["busbw_gbps"]):
                self.largest[key] = rec

    def summary(self, out_path: str) -> dict[str, Any]:
        """The file's answer as JSON: counts, then per collective group its figure, reference and next step."""
        return {"file": self.path, "format": self.format, "records": self.records, "kinds": dict(self.kinds),
                "ops": sorted(self.ops), "runs": len(self.runs), "ranks": sorted(self.ranks),
                "gpus": [{"model": m, "count": n} for m, n in sorted(self.gpus.items())],
                "peaks": [_peak(r) for r in self.largest.values()],
                "next": _next(self, out_path), "warnings": self.warnings}


def _peak(rec: dict[str, Any]) -> dict[str, Any]:
    names = rec.get("gpu_names") or []
    model = names[0] if names and len(set(names)) == 1 else None
    n, op, nbytes, fabric = rec.get("nranks"), rec.get("op"), rec["bytes"], rec.get("fabric")
    refs = references.matching(model, n, op, nbytes, fabric)
    return {"op": op, "nranks": n, "gpu": model, "fabric": fabric, "bytes": nbytes, "size": format_size(nbytes),
            "inplace": rec.get("inplace"), "busbw_gbps": rec["busbw_gbps"],
            "references": [{"platform": x.platform, "lo_gbps": x.lo_gbps, "hi_gbps": x.hi_gbps,
                            "min_bytes": x.min_bytes, "condition": x.condition, "sources": list(x.sources),
                            "line": references.line(x), "verdict": _verdict(rec["busbw_gbps"], x)} for x in refs],
            "none_matches": None if refs else references.why_none(model, n, op, nbytes, fabric)}


def _verdict(busbw: float, ref) -> str:
    """Where the file's figure falls against a published range: within, below (by how much) or above."""
    if ref.lo_gbps is None or ref.hi_gbps is None:
        return "no published figure"
    if busbw < ref.lo_gbps:
        return f"below ({(1 - busbw / ref.lo_gbps) * 100:.1f}% under {ref.lo_gbps:g})"
    if busbw > ref.hi_gbps:
        return f"above ({(busbw / ref.hi_gbps - 1) * 100:.1f}% over {ref.hi_gbps:g})"
    return "within"


def _next(t: Tally, out_path: str) -> list[str]:
    if not t.largest:  # health, transport and copy records are judged by qualify too
        return [f"fabricbench qualify --spec builtin:NAME --from {out_path}"] if t.kinds else []
    return [f"fabricbench qualify --spec builtin:NAME --from {out_path}",
            f"fabricbench compare --fabrics default --with {out_path}"]


def lines(s: dict[str, Any]) -> list[str]:
    """A summary (Tally.summary) as the lines the command prints for its file."""
    kinds = ", ".join(f"{n} {k}" for k, n in s["kinds"].items())
    ops = f" ({', '.join(s['ops'])})" if s["ops"] else ""
    out = [f"{s['file']}: {s['format']}, {s['runs']} run(s), {kinds}{ops}"]
    for p in s["peaks"]:
        on = f" on {p['nranks']} × {p['gpu']}" if p["gpu"] and p["nranks"] else \
            f" on {p['nranks']} ranks" if p["nranks"] else ""
        place = {True: ", in place", False: ", out of place"}.get(p["inplace"], "")
        out.append(f"  {p['op'] or 'op not told'}{on}: busbw {p['busbw_gbps']:.4g} GB/s at {p['size']} "
                   f"(the largest size{place})")
        out += [f"    {r['verdict']}: {r['line']}" for r in p["references"]]
        if p["none_matches"]:
            out.append(f"    reference: none matches ({p['none_matches']})")
    if s["next"]:
        out.append(f"  next: {s['next'][0]}  (NAME: fabricbench qualify --list-specs)"
                   if "builtin:NAME" in s["next"][0] else f"  next: {s['next'][0]}")
        out += [f"        {x}" for x in s["next"][1:]]
    return out
