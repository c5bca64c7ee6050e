"""A qualification's dry run: the spec read and checked as a run would read it, the checks it would run at
a level, and about how long they take; nothing measured.

    fabricbench qualify --spec builtin:h200-sxm-8 --level 1 --dry-run      (its lines, or --json its dict)
    fabricbench.qualify_plan(fabricbench.QualifyConfig(spec="builtin:h200-sxm-8", level=1))  (the same DryRun)

Every mistake in the spec is a UsageError here, as in a run (exit 2 on the command line); for spec
authors and CI jobs that keep specs. The time model is plan.py's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

from fabricbench.errors import UsageError
from fabricbench.qualifying.checks.base import Check
from fabricbench.qualifying.plan import LEVEL_NAMES, Plan, fmt_seconds, gpu_count, make_plan
from fabricbench.qualifying.spec import DEFAULT_LEVEL, Spec
from fabricbench.sizes import format_size


@dataclass(frozen=True, kw_only=True)
class DryRun:
    spec: Spec  # at the level
    level: int
    total: int  # checks in the whole spec
    checks: list[Check]  # the spec's checks that would run
    plan: Plan

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec.name, "path": self.spec.path, "level": self.level,
                "run": dataclasses.asdict(self.spec.run), "plan": self.plan.to_dict(),
                "checks": [{"name": c.name, "kind": c.kind, "levels": list(c.levels), "severity": c.severity,
                            "warn_fraction": c.warn_fraction, "retries": c.retries, "source": c.source,
                            **_jsonable(c.params)} for c in self.checks]}

    def lines(self) -> list[str]:
        """The plan as the command line prints it: a head line, one line per check, the estimate."""
        spec, r, plan = self.spec, self.spec.run, self.plan
        where = (f"{r.nprocs} {r.backend} rank(s)" if r.cpu_ranks else f"engine {r.engine}"
                 + (f", backend {r.backend}" if r.backend else ""))
        out = [f"{spec.name} ({spec.path}) at level {self.level} ({LEVEL_NAMES[self.level]}): {len(self.checks)} "
               f"of {self.total} check(s), {where}, iters {r.iters}, warmup {r.warmup}, retries {r.retries}; "
               f"nothing measured"]
        for c, step in zip(self.checks, plan.steps):
            keys = ", ".join(f"{k}={_shown(k, v)}" for k, v in _jsonable(c.params).items() if v is not None)
            out.append(f"  {c.name:28s} {c.kind:12s} ~{fmt_seconds(step.seconds):>8s}  {keys}")
        retry = (f", plus up to {plan.max_retries} {'retry' if plan.max_retries == 1 else 'retries'} of a missed "
                 "check" if plan.max_retries else "")
        out.append(f"estimate: ~{fmt_seconds(plan.seconds)} on {gpu_count(spec)} GPU(s){retry} (level "
                   f"{self.level} aims at ~{fmt_seconds(plan.budget_s)}; a model, see fabricbench/qualifying/plan.py)")
        return out


def dry_run(spec: Spec, *, only: Sequence[str] | None = None, skip: Sequence[str] | None = None,
            fabric: str | None = None, level: int | None = None) -> DryRun:
    """What a run of `spec` would do, measuring nothing (select() as a run selects)."""
    level = DEFAULT_LEVEL if level is None else level
    total = len(spec.checks)
    if fabric:
        spec = spec.under(fabric)
    checks = select(spec, only, skip, level)
    spec = spec.at_level(level)
    return DryRun(spec=spec, level=level, total=total, checks=checks, plan=make_plan(spec, checks))


def select(spec: Spec, only: Sequence[str] | None, skip: Sequence[str] | None, level: int | None = None) -> list[Check]:
    """The checks to run: those at `level` (spec.at_level), then --only/--skip by name."""
    names = [c.name for c in spec.checks]
    for flag, given in (("--only", only), ("--skip", skip)):
        unknown = [n for n in (given or []) if n not in names]
        if unknown:
            raise UsageError(f"{flag} {','.join(unknown)}: no such check in {spec.path}; its checks are "
                             f"{', '.join(names)}")
    at = spec.checks if level is None else [c for c in spec.checks if level in c.levels]
    elsewhere = [c for c in spec.checks if c.name in (only or []) and c not in at]
    if elsewhere:
        c = elsewhere[0]
        raise UsageError(f"--only {c.name}: it runs at --level {','.join(map(str, c.levels))}, not {level}; "
                         f"give --level {c.levels[0]}")
    return [c for c in at if (not only or c.name in only) and c.name not in (skip or [])]


def _shown(key: str, value):
    if key in ("size", "busbw_size", "latency_size") and isinstance(value, int):
        return format_size(value)
    if key == "sizes" and isinstance(value, list):
        return ",".join(format_size(v) for v in value)
    return value


def _jsonable(params: dict) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items()}
