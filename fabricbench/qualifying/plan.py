"""What a qualification would run, and about how long it would take: `qualify --dry-run`.

    fabricbench qualify --spec builtin:h200-sxm-8 --level 1 --dry-run
    fabricbench qualify --spec builtin:h200-sxm-8 --level 3 --dry-run --json

The estimate is a model, not a measurement: each measuring unit costs a process start (CUDA, NCCL
communicator) plus, per size, (warmup + iters) x (a launch latency + bytes / a bandwidth). The bandwidth is
the check's own floor when it has one (a healthy node is at least that fast), else a typical figure for the
engine. GPU counts come from the spec's topology check (gpu_count), else 8. Retries are not included: each
missed check may add its own time again, up to `retries` times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fabricbench.qualifying.checks import CHECKS
from fabricbench.qualifying.checks.base import Check, retries_of
from fabricbench.qualifying.spec import Spec
from fabricbench.qualifying.units import RunSettings

LEVEL_BUDGET_S = {1: 60, 2: 300, 3: 1200}  # what each level aims at (docs/qualify.md: quick, standard, long)
LEVEL_NAMES = {1: "quick", 2: "standard", 3: "long"}
START_S = {"native": 6.0, "torch": 5.0}  # a measuring child: interpreter, CUDA context, NCCL communicator
LATENCY_S = {"gpu": 30e-6, "gloo": 300e-6}
BANDWIDTH_GBPS = {"gpu": 100.0, "gloo": 1.0, "slow_fabric": 10.0, "pcie": 25.0}
DEFAULT_GPUS = 8


@dataclass(kw_only=True)
class Step:
    check: str
    kind: str
    units: int  # measuring processes it starts (shared units counted once)
    seconds: float
    what: str  # one line: what it measures


@dataclass(kw_only=True)
class Plan:
    spec: str
    level: int
    steps: list[Step] = field(default_factory=list)
    max_retries: int = 0

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.steps)

    @property
    def budget_s(self) -> int:
        return LEVEL_BUDGET_S[self.level]

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec, "level": self.level, "level_name": LEVEL_NAMES[self.level],
                "budget_s": self.budget_s, "estimate_s": round(self.seconds, 1), "max_retries": self.max_retries,
                "steps": [s.__dict__ for s in self.steps]}


def gpu_count(spec: Spec) -> int:
    return next((c.params["gpu_count"] for c in spec.checks
                 if c.kind == "topology" and c.params.get("gpu_count")), DEFAULT_GPUS)


def _sets(want: Any, n: int, run: RunSettings) -> int:
    if run.cpu_ranks or want == "all":
        return 1
    if want == "each_pair":
        return n * (n - 1) // 2
    if want == "each_island":
        return max(1, n // 4)
    return len(want)


def _per_op(sizes, run: RunSettings, bw_gbps: float | None, *, device: str) -> float:
    bw = (bw_gbps or BANDWIDTH_GBPS[device]) * 1e9
    return sum((run.iters + run.warmup) * (LATENCY_S[device] + s / bw) for s in sizes)


def estimate(check: Check, run: RunSettings, n: int, seen: set) -> Step:
    """One check's units and seconds; units another check already measured (`seen`) cost nothing."""
    p = check.params
    device = "gloo" if run.cpu_ranks else "gpu"
    start = START_S.get(run.engine, 6.0)

    def units(keys: list[tuple], per_unit: float) -> tuple[int, float]:
        fresh = [k for k in keys if k not in seen]
        seen.update(fresh)
        return len(fresh), len(fresh) * (start + per_unit)

    kind = check.kind
    if kind == "topology":
        return Step(check=check.name, kind=kind, units=0, seconds=2.0, what="topology read (NVML / nvidia-smi)")
    if kind in ("collective", "correctness"):
        ops = (p["op"],) if kind == "collective" else tuple(p["ops"])
        k = _sets(p["gpus"], n, run)
        floor = p.get("min_busbw_gbps") or (p["reference_busbw_gbps"] * p["min_fraction"]
                                            if p.get("reference_busbw_gbps") else None)
        per = sum(_per_op(p["sizes"], run, floor, device=device) for _ in ops) * (2 if kind == "correctness" else 1)
        u, s = units([(kind == "correctness", p["fabric"], ops, p["sizes"], p["gpus"], i) for i in range(k)], per)
        return Step(check=check.name, kind=kind, units=u, seconds=s,
                    what=f"{','.join(ops)} at {len(p['sizes'])} size(s) on {k} GPU set(s)")
    if kind == "transport":
        k = _sets(p["gpus"], n, run)
        fabrics = list(p["expect"])
        u, s = units([(f, p["op"], p["size"], p["gpus"], i) for f in fabrics for i in range(k)],
                     _per_op([p["size"]], run, None, device=device))
        return Step(check=check.name, kind=kind, units=u, seconds=s, what=f"{len(fabrics)} fabric(s) x {k} set(s)")
    if kind == "contrast":
        k = _sets(p["gpus"], n, run)
        per_fast = _per_op([p["size"]], run, None, device=device)
        per_slow = _per_op([p["size"]], run, BANDWIDTH_GBPS["slow_fabric"], device=device)
        u1, s1 = units([(p["fast"], p["op"], (p["size"],), p["gpus"], i) for i in range(k)], per_fast)
        u2, s2 = units([(p["slow"], p["op"], (p["size"],), p["gpus"], i) for i in range(k)], per_slow)
        return Step(check=check.name, kind=kind, units=u1 + u2, seconds=s1 + s2,
                    what=f"{p['fast']} vs {p['slow']} on {k} set(s)")
    if kind == "p2p":
        size = p.get("size") or (256 << 20)
        per = n * (n - 1) * 2 * (run.iters + run.warmup) * size / (BANDWIDTH_GBPS["gpu"] * 1e9)
        u, s = units([("p2p", size)], per)
        return Step(check=check.name, kind=kind, units=u, seconds=s, what=f"{n * (n - 1)} GPU pairs, both ways")
    if kind == "host_copy":
        size = p.get("size") or (256 << 20)
        per = n * 3 * (run.iters + run.warmup) * size / (BANDWIDTH_GBPS["pcie"] * 1e9)
        u, s = units([("host", size)], per)
        return Step(check=check.name, kind=kind, units=u, seconds=s, what=f"{n} GPU(s) x h2d, d2h, bidir")
    if kind == "train":
        return Step(check=check.name, kind=kind, units=1, seconds=20.0 + 1.0 * p["steps"],
                    what=f"{p['strategy']} {p['model']}, {p['steps']} steps")
    return Step(check=check.name, kind=kind, units=1, seconds=start, what="one measurement")


def make_plan(spec: Spec, checks: list[Check]) -> Plan:
    """The plan of `checks` (already selected) of a spec narrowed to its level (Spec.at_level)."""
    assert spec.level is not None, "make_plan needs a spec narrowed to a level (Spec.at_level)"
    n = gpu_count(spec)
    seen: set = set()
    plan = Plan(spec=spec.name, level=spec.level)
    for c in checks:
        plan.steps.append(estimate(c, spec.run, n, seen))
        plan.max_retries = max(plan.max_retries, retries_of(c, CHECKS.get(c.kind), spec.run))
    return plan


def fmt_seconds(s: float) -> str:
    if s < 90:
        return f"{math.ceil(s)} s"
    return f"{s / 60:.1f} min"
