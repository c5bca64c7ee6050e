"""The headline figures of a results file, named so that two runs (or two nodes) can be compared.

    fabricbench qualify --spec s.toml --out q/ --baseline old/results.jsonl --tolerance 0.05
    fabricbench qualify --fleet node1/ node2/ node3/

One figure per measured group (fabric, op, dtype, ranks, GPU set): busbw at its largest size (algbw where
one rank makes busbw meaningless) and the median time at its smallest size; the slowest GPU pair's copy
GB/s; each host direction's slowest GPU; a training run's samples/s. `sense` says which way is better:
"min" (higher is better: a threshold is a floor) or "max" (lower is better).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

from fabricbench.statistics.comparison import Comparison, judge
from fabricbench.qualifying.prometheus import busbw_labels
from fabricbench.qualifying.verdict import at_least, at_most
from fabricbench.results.status import TIMED_COLLECTIVE, Status
from fabricbench.sizes import format_size


@dataclass(frozen=True)
class Figure:
    name: str
    value: float
    unit: str
    sense: str  # "min" (higher is better) or "max" (lower is better)
    cv: float | None = None  # the run's own spread of this figure (coefficient of variation), when known
    labels: tuple[tuple[str, str], ...] = ()  # a busbw figure's Prometheus labels (prometheus.busbw_labels)


def _group(r: dict[str, Any]) -> str:
    gpus = r.get("gpus") or []
    where = f"{r.get('nranks')} ranks" + (f" GPUs {','.join(map(str, gpus))}" if gpus else "")
    return f"{r.get('op')} {r.get('dtype')} {where} [{r.get('fabric', 'default')}]"


def figures(records: Iterable[dict[str, Any]]) -> dict[str, Figure]:
    recs = list(records)
    out: dict[str, Figure] = {}
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in recs:
        if r.get("kind") == "collective" and r.get("status") in TIMED_COLLECTIVE and r.get("time_us") \
                and not r.get("inplace") and isinstance(r.get("requested_bytes"), int):
            groups.setdefault(_group(r), []).append(r)
    for g, rs in groups.items():
        big = max(rs, key=lambda r: r["requested_bytes"])
        small = min(rs, key=lambda r: r["requested_bytes"])
        if big.get("busbw_gbps") is not None:
            name = f"busbw {g} @{format_size(big['requested_bytes'])}"
            labels = busbw_labels(big)
            out[name] = Figure(name, big["busbw_gbps"], "GB/s", "min", big.get("cv"),
                               tuple(labels.items()) if labels else ())
        elif big.get("algbw_gbps") is not None:
            name = f"algbw {g} @{format_size(big['requested_bytes'])}"
            out[name] = Figure(name, big["algbw_gbps"], "GB/s", "min", big.get("cv"))
        if small is not big:
            name = f"time {g} @{format_size(small['requested_bytes'])}"
            out[name] = Figure(name, small["time_us"], "µs", "max", small.get("cv"))
    peers: dict[tuple[str, int], list[float]] = {}
    hosts: dict[tuple[str, int], list[float]] = {}
    for r in recs:
        if r.get("kind") != "copy" or r.get("gbps") is None or not isinstance(r.get("bytes"), int):
            continue
        if r.get("copy_kind") == "peer" and r.get("src") != r.get("dst"):
            peers.setdefault((r["direction"], r["bytes"]), []).append(r["gbps"])
        elif r.get("copy_kind") == "host":
            hosts.setdefault((r["direction"], r["bytes"]), []).append(r["gbps"])
    for (d, b), vals in peers.items():
        name = f"p2p {d} slowest pair @{format_size(b)}"
        out[name] = Figure(name, min(vals), "GB/s", "min")
    for (d, b), vals in hosts.items():
        name = f"host {d} slowest GPU @{format_size(b)}"
        out[name] = Figure(name, min(vals), "GB/s", "min")
    for r in recs:
        if r.get("kind") == "train" and r.get("status") == Status.OK:
            sps = (r.get("throughput") or {}).get("samples_per_s")
            if sps:
                name = f"train {r.get('strategy')} {r.get('model')} {r.get('nranks')} ranks [{r.get('fabric')}]"
                out[name] = Figure(name, sps, "samples/s", "min")
    return out


SPREAD_Z = 3.0  # a difference within 3 combined standard deviations of the two runs is noise, a tie


def tolerance_for(o: Figure, n: Figure | None, tolerance: float) -> float:
    """The tolerance of one figure: the given one, or the two runs' own spread when that is wider
    (3 x sqrt(cv_old^2 + cv_new^2)), so that run-to-run noise is never a regression. At most 0.9."""
    cvs = [f.cv for f in (o, n) if f is not None and f.cv is not None and f.cv >= 0]
    spread = SPREAD_Z * math.sqrt(sum(c * c for c in cvs)) if cvs else 0.0
    return min(0.9, max(tolerance, spread))


def verdict_against(o: Figure, n: Figure, tolerance: float) -> str:
    """This run against the baseline in the comparison vocabulary (statistics/comparison.py), the tolerance
    as the margin: "this run is 3.1% slower than the baseline [...]", "... equivalent within ±5% [...]" or
    "undecided". One figure per run has no rounds: its interval is ±1.96 × the two runs' cvs combined on
    the log scale (each run's own spread standing for the figure's; without cvs, a point and no interval)."""
    better = n.value / o.value if o.sense == "min" else o.value / n.value  # > 1: this run is better
    sd = math.sqrt(sum(c * c for c in (o.cv, n.cv) if c is not None and c >= 0))
    lo, hi = better * math.exp(-1.96 * sd), better * math.exp(1.96 * sd)
    lead, ci = (better >= 1), (lo, hi) if better >= 1 else (1 / hi, 1 / lo)
    c = Comparison(a="this run" if lead else "the baseline", b="the baseline" if lead else "this run",
                   fabric=None, metric=n.unit, ratio=max(better, 1 / better), ci95=ci if sd > 0 else None,
                   verdict=judge(ci, min(0.5, tolerance)) if sd > 0 else "undecided", rounds=1, paired=False,
                   method="one figure per run; interval from the runs' cvs", margin=min(0.5, tolerance),
                   note=None if sd > 0 else "no spread recorded: no interval")
    return c.text().replace(" (1 unpaired round)", "")


def compare(old: dict[str, Figure], new: dict[str, Figure], tolerance: float):
    """Items (verdict.py) for every figure both runs have: a regression is worse than old by more than
    the tolerance (widened to the runs' measured spread, tolerance_for); each reason ends with the
    comparison's sentence (verdict_against)."""
    items = []
    for name in sorted(set(old) & set(new)):
        o, n = old[name], new[name]
        tol = tolerance_for(o, n, tolerance)
        why = f"{tol:.0%}" + (" (the runs' spread)" if tol > tolerance else "")
        said = verdict_against(o, n, tolerance)
        if o.sense == "min":
            items.append(at_least("vs baseline", n.value, o.value * (1 - tol), unit=n.unit, subject=name,
                                  reason=f"baseline {o.value:.4g} {o.unit} - {why}; {said}"))
        else:
            items.append(at_most("vs baseline", n.value, o.value * (1 + tol), unit=n.unit, subject=name,
                                 reason=f"baseline {o.value:.4g} {o.unit} + {why}; {said}"))
    return items
