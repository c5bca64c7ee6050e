"""A job against its fabric: each collective a production job ran (NCCL Inspector) beside the sweep of its GPUs.

    fabricbench jobfit --job nccl-inspector-42/ --sweep sweep.jsonl
    fabricbench jobfit --job job.jsonl --sweep study/ --json

For each (collective, rank count, size bucket) of the job: the job's busbw over its calls (median, and the
10th-90th percentile spread), the swept busbw at each call's size S (SweepCurves' log-log interpolation of
time, busbw = S / t x factor), and their ratio, the median of per-call ratios. Buckets are powers of two of
S ([2^k, 2^k+1)): a training job's gradient buckets vary a little in size, and each call is priced at its
own S. A Prometheus bucket record (no one size) is priced at the geometric middle of its range and says so.

The verdict compares intervals, never two bare figures:
- job interval: the median's 95% interval over the calls (order statistics, statistics/figures.py; from 6 calls);
- sweep noise: the curve's relative 95% half-width at S (ci95_rel, else cv; Curve.rel_at), and at least
  NOISE_FLOOR, the run-to-run spread a sweep in one process cannot show (docs/domain.md: ±15% on the CPU lab).
"short" when the job's upper bound is below the sweep's lower bound ("the job reached 0.61x of the sweep");
"above" in the mirror case (the sweep ran slower than the job: a sweep to redo); else "as swept".
Where NCCL's algorithm is known on both sides (Inspector v4.2+ coll_algo / the .prom algo_proto; the sweep's
nccl_algo), a difference is a finding of its own ("the job ran RING where the sweep ran NVLS").
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from fabricbench.collectives import busbw_factor
from fabricbench.errors import UsageError
from fabricbench.statistics.figures import median_ci_rel, percentile
from fabricbench.relating.curves import DTYPE_SUBSTITUTED, SweepCurves, size_3sig
from fabricbench.results.schema import CollectiveResult

NOISE_FLOOR = 0.05  # the least relative noise granted to a sweep point (see the module docstring)
SHORT, ABOVE, PAR, UNPRICED = "short", "above", "as swept", "unpriced"


@dataclass(kw_only=True)
class Row:
    op: str
    nranks: int
    bucket: str  # "16M-32M"
    calls: int
    size_bytes: int  # the median S of the bucket's calls
    job_busbw: float  # median over calls
    job_p10: float
    job_p90: float
    job_ci_rel: float | None
    sweep_busbw: float | None
    sweep_noise_rel: float | None
    ratio: float | None  # median of per-call job / sweep
    verdict: str
    job_algo: list[str] = field(default_factory=list)
    sweep_algo: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class JobFit:
    fabric: str
    rows: list[Row]
    findings: list[str]
    problems: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"fabric": self.fabric, "rows": [asdict(r) for r in self.rows], "findings": self.findings,
                "problems": self.problems, "noise_floor": NOISE_FLOOR}


def job_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records that are a job's observed collectives (Inspector imports), not a sweep's."""
    return [r for r in records if r.get("kind") == "collective" and (r.get("extra") or {}).get("observed") == "job"]


def _size_of(rec: dict[str, Any]) -> tuple[int | None, str | None]:
    if rec.get("bytes"):
        return int(rec["bytes"]), None
    rng = (rec.get("extra") or {}).get("bytes_range")
    if rng and rng[0] and rng[1]:
        return int(math.sqrt(rng[0] * rng[1])), "a Prometheus size bucket, priced at its geometric middle"
    return None, None


def _bucket(nbytes: int) -> str:
    k = int(math.log2(nbytes))
    return f"{size_3sig(2 ** k)}-{size_3sig(2 ** (k + 1))}"


def fit(job: list[dict[str, Any]], sweep: list[CollectiveResult], *, fabric: str | None = None) -> JobFit:
    """The job's collectives set against the sweep (module docstring); UsageError when they cannot meet."""
    if not job:
        raise UsageError("no job records: give NCCL Inspector output (its .log/.jsonl/.gz files, a folder of them, "
                         "or records `fabricbench import FILE --out RESULTS` made from it)")
    swept = [r for r in sweep if not (r.extra or {}).get("observed")]
    curves = SweepCurves.from_records(swept)
    if not len(curves):
        raise UsageError("the sweep holds no measured collective (status ok, with a size and a time)")
    fabrics = curves.fabrics()
    if fabric is None:
        if len(fabrics) > 1:
            raise UsageError(f"the sweep holds {len(fabrics)} fabrics ({', '.join(fabrics)}); choose one with --fabric")
        fabric = fabrics[0]
    elif fabric not in fabrics:
        raise UsageError(f"--fabric {fabric}: the sweep has {', '.join(fabrics)}")
    algos = defaultdict(set)
    for r in swept:
        if r.fabric == fabric and r.nccl_algo:
            algos[(r.op, r.nranks)].add(str(r.nccl_algo).upper())
    groups: dict[tuple[str, int, str], list[tuple[int, dict[str, Any], str | None]]] = defaultdict(list)
    problems: list[str] = []
    for rec in job:
        size, note = _size_of(rec)
        if size is None or not rec.get("op") or not rec.get("nranks"):
            problems.append(f"a job record without op, rank count or size left out ({rec.get('op')})")
            continue
        groups[(rec["op"], int(rec["nranks"]), _bucket(size))].append((size, rec, note))
    rows = [_row(curves, fabric, key, calls, algos.get((key[0], key[1]), set()), problems)
            for key, calls in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], min(c[0] for c in kv[1])))]
    return JobFit(fabric=fabric, rows=rows, findings=findings(rows), problems=sorted(set(problems)))


def _busbw(rec: dict[str, Any], size: int) -> float | None:
    """The call's busbw; on one rank (factor 0) its algbw, S / t, which is what there is to compare."""
    factor = busbw_factor(rec["op"], rec["nranks"]) or 0.0
    if factor and rec.get("busbw_gbps") is not None:
        return float(rec["busbw_gbps"])
    t = rec.get("time_us")
    return size / (t * 1e-6) / 1e9 * (factor or 1.0) if t else None


def _row(curves: SweepCurves, fabric: str, key: tuple[str, int, str], calls: list, sweep_algo: set[str],
         problems: list[str]) -> Row:
    op, n, bucket = key
    notes = sorted({c[2] for c in calls if c[2]})
    vals = [(size, b) for size, rec, _ in calls if (b := _busbw(rec, size)) is not None and b > 0]
    busbws = sorted(b for _, b in vals)
    size_med = int(statistics.median(s for s, _ in vals)) if vals else calls[0][0]
    job_algo = sorted({str(rec["nccl_algo"]).upper() for _, rec, _ in calls if rec.get("nccl_algo")})
    base = dict(op=op, nranks=n, bucket=bucket, calls=len(calls), size_bytes=size_med,
                job_busbw=percentile(busbws, 50) if busbws else 0.0, job_p10=percentile(busbws, 10) if busbws else 0.0,
                job_p90=percentile(busbws, 90) if busbws else 0.0, job_ci_rel=median_ci_rel(busbws) if busbws else None,
                job_algo=job_algo, sweep_algo=sorted(sweep_algo))
    curve, why = curves.find(fabric, op, "float32", n)
    if curve is None or not vals:
        problems.append(curves.missing(fabric, op, "float32", n) if curve is None else f"{op} {bucket}: no busbw")
        return Row(**base, sweep_busbw=None, sweep_noise_rel=None, ratio=None, verdict=UNPRICED, notes=notes)
    if why == DTYPE_SUBSTITUTED:
        notes.append(f"the Inspector names no dtype: priced on the sweep's {curve.dtype} curve")
    one_rank = (busbw_factor(op, n) or 0.0) == 0
    if one_rank:
        notes.append("one rank: busbw is 0 by definition (factor 0), so algbw = S / t is compared")
    bw = (lambda size, t: size / t / 1e9) if one_rank else curve.busbw_gbps
    ratios, statuses = [], set()
    for size, b in vals:
        t, status = curve.time_at(size)
        statuses.add(status)
        ratios.append(b / bw(size, t))
    t_med, _ = curve.time_at(size_med)
    sweep_bw = bw(size_med, t_med)
    noise = max(curve.rel_at(size_med), NOISE_FLOOR)
    ratio = statistics.median(ratios)
    notes += sorted(s for s in statuses if s.startswith("extrapolated") or s.startswith("far"))
    ci = base["job_ci_rel"] or 0.0
    if ratio * (1 + ci) < 1 - noise:
        verdict = SHORT
    elif ratio * (1 - ci) > 1 + noise:
        verdict = ABOVE
    else:
        verdict = PAR
    return Row(**base, sweep_busbw=sweep_bw, sweep_noise_rel=noise, ratio=ratio, verdict=verdict, notes=notes)


def findings(rows: list[Row]) -> list[str]:
    """One sentence per row that is not as swept, and per algorithm the job and the sweep disagree on."""
    out = []
    for r in rows:
        where = f"{r.op} {size_3sig(r.size_bytes)} ({r.nranks} ranks)"
        if r.verdict == SHORT:
            out.append(f"{where}: the job reached {r.ratio:.2f}x of the sweep (n = {r.calls} calls), short by more "
                       f"than the sweep's noise (±{r.sweep_noise_rel:.0%})")
        elif r.verdict == ABOVE:
            out.append(f"{where}: the job ran {r.ratio:.2f}x the sweep (n = {r.calls} calls): the sweep is slower "
                       f"than the job; measure it again")
        if r.job_algo and r.sweep_algo and not set(r.job_algo) & set(r.sweep_algo):
            out.append(f"{where}: the job ran {'/'.join(r.job_algo)} where the sweep ran {'/'.join(r.sweep_algo)}")
    return out
