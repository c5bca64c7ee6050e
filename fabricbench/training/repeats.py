"""Repeats in fresh processes: one figure per (strategy, fabric) with its run-to-run interval, rankings in
which overlapping intervals are ties, and slowdowns with propagated intervals.

    fabricbench train --strategy ddp,fsdp --model tiny-mistral --device cpu --nprocs 2 --repeats 3
    fabricbench report run/ --json          (the study's summary: rankings, slowdowns, host-bound notes)

Each run's figure is its median step time (metrics.py). A (strategy, fabric) over its runs:
step = median of the runs' medians; ci95 = the run-to-run interval of that median (stats.repeat_ci), or,
with one run only, the run's own median CI (marked "within one run": it understates, each process has its
own level). Throughput = global batch / step, its interval [batch / hi, batch / lo]. A slowdown is
step(f) / step(reference) with the interval [lo_f / hi_ref, hi_f / lo_ref] (stats.ratio_ci). Two figures
whose intervals overlap are a tie ("ddp ≈ fsdp (within noise)"): the CLI, the report, advise and the
summary record all rank with stats.tie_groups, so none of them calls a difference inside the noise a
finding.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any, Iterable

from fabricbench.measuring.stats import ci_rel, overlaps, ratio_ci, repeat_ci, tie_groups
from fabricbench.results.schema import TrainResult
from fabricbench.results.status import TIMED_TRAIN

MIN_REPEATS = 3  # runs before the run-to-run CI is judged (at 2 Student's t is 12.7: no CI gets within 3%)
HOST_BOUND = 0.5  # gpu_busy_fraction below this: the step measures the host, not the GPU or the fabric
OK = TIMED_TRAIN  # runs whose step times count (flagged: the loss did not fall, the timing stands)


@dataclass(frozen=True, kw_only=True)
class Figure:
    """One (strategy, fabric) over its runs. Times in seconds."""

    strategy: str
    fabric: str
    runs: int
    step_s: float  # median over runs of each run's median step
    step_ci95: tuple[float, float] | None
    samples_per_s: float | None
    ci95: tuple[float, float] | None  # samples/s
    ci95_rel: float | None
    interval: str  # "run-to-run", "within one run" or "none"
    run_samples_per_s: tuple[float, ...]  # each run's figure, in run order
    gpu_busy_fraction: float | None
    host_bound: str | None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("step_ci95", "ci95"):
            d[k] = list(d[k]) if d[k] is not None else None
        d["run_samples_per_s"] = list(self.run_samples_per_s)
        return d


def figures(records: Iterable[TrainResult | dict[str, Any]]) -> list[Figure]:
    """The train runs that measured a step -> one Figure per (strategy, fabric), in first-seen order.

    Takes TrainResults (what a reader gets from results/records.py's typed accessors) or the train records
    a run holds in memory (launch.run's, a study's), typed here; records of other kinds are left out."""
    groups: dict[tuple[str, str], list[TrainResult]] = {}
    for r in records:
        if isinstance(r, dict):  # typed only once its kind and status say it is a run to count
            if r.get("kind", "train") != "train" or r.get("status") not in OK:
                continue
            r = TrainResult.from_record(r)
        if r.status not in OK or r.median_step_s is None:
            continue
        groups.setdefault((r.strategy, r.fabric), []).append(r)
    out = []
    for (strategy, fabric), runs in groups.items():
        steps = [r.median_step_s for r in runs]
        step = statistics.median(steps)
        ci = repeat_ci(steps)
        how = "run-to-run"
        if ci is None:  # one run: its own CI, where it has one
            rel = (runs[0].reached("step_time") or {}).get("ci95_rel")
            ci = (step * (1 - rel), step * (1 + rel)) if rel is not None else None
            how = "within one run" if ci is not None else "none"
        batch = runs[0].global_batch
        sps = batch / step if batch else None
        thr_ci = (batch / ci[1], batch / ci[0]) if batch and ci is not None else None
        busy = [b for r in runs if (b := r.reached("gpu_busy_fraction")) is not None]
        busy_m = statistics.median(busy) if busy else None
        out.append(Figure(strategy=strategy, fabric=fabric, runs=len(runs), step_s=step, step_ci95=ci,
                          samples_per_s=sps, ci95=thr_ci, ci95_rel=ci_rel(ci, step), interval=how,
                          run_samples_per_s=tuple(batch / s for s in steps) if batch else (),
                          gpu_busy_fraction=busy_m, host_bound=host_bound_note(busy_m)))
    return out


def host_bound_note(busy: Any) -> str | None:
    """The sentence a gpu_busy_fraction earns below HOST_BOUND, for the CLI, report and advise."""
    if not isinstance(busy, (int, float)) or busy >= HOST_BOUND:
        return None
    return (f"host-bound: the GPU was busy {busy:.0%} of the step; this figure measures the host, and a "
            f"fabric's effect is hidden")


def still_to_run(config: Any, records: list[dict[str, Any]], *, round_: int, elapsed_s: float) -> list[str]:
    """The strategies that get another round after `round_` (see launch.run)."""
    if round_ < config.min_repeats:
        return [s for s in config.strategies if _last_ok(records, s)]
    if config.repeats is not None or not config.target_ci or round_ >= config.max_repeats \
            or elapsed_s >= config.time_budget_s:  # --repeats N: exactly N
        return []
    figs = {f.strategy: f for f in figures(records)}
    return [s for s in config.strategies if _last_ok(records, s) and s in figs
            and (figs[s].interval != "run-to-run" or figs[s].ci95_rel is None
                 or figs[s].ci95_rel > config.target_ci)]


def _last_ok(records: list[dict[str, Any]], strategy: str) -> bool:
    mine = [r for r in records if r.get("strategy") == strategy]
    return bool(mine) and mine[-1].get("status") in OK


def rankings(figs: list[Figure]) -> dict[str, list[list[str]]]:
    """fabric -> [[strategies tied first], [next], ...] by samples/s, ties by overlapping intervals."""
    out: dict[str, list[list[str]]] = {}
    for fabric in dict.fromkeys(f.fabric for f in figs):
        items = [(f.strategy, f.samples_per_s, f.ci95) for f in figs if f.fabric == fabric and f.samples_per_s]
        out[fabric] = tie_groups(items)
    return out


def slowdowns(figs: list[Figure], reference: str) -> list[dict[str, Any]]:
    """step(f) / step(reference) per strategy and fabric, with the propagated interval."""
    ref = {f.strategy: f for f in figs if f.fabric == reference}
    out = []
    for f in figs:
        base = ref.get(f.strategy)
        if f.fabric == reference or base is None:
            continue
        ci = ratio_ci(f.step_ci95, base.step_ci95) if f.step_ci95 and base.step_ci95 else None
        out.append({"strategy": f.strategy, "fabric": f.fabric, "reference": reference,
                    "value": f.step_s / base.step_s, "ci95": list(ci) if ci else None,
                    "within_noise": ci is not None and ci[0] <= 1.0 <= ci[1]})
    return out


def ranking_text(groups: list[list[str]]) -> str:
    """[[a, b], [c]] -> "a ≈ b (within noise), then c"."""
    parts = [" ≈ ".join(g) + (" (within noise)" if len(g) > 1 else "") for g in groups]
    return ", then ".join(parts)


def slowdown_text(s: dict[str, Any]) -> str:
    """One slowdown in words, "N× slower" (or faster) with its interval; inside the noise said so."""
    v, ci = s["value"], s.get("ci95")
    shown = f" (95% CI {ci[0]:.2f}-{ci[1]:.2f}×)" if ci else " (no interval: one run)"
    if ci and ci[0] <= 1.0 <= ci[1]:
        return f"{s['strategy']} on {s['fabric']}: {v:.2f}× the {s['reference']} step, within noise{shown}"
    word = "slower" if v >= 1 else "faster"
    return f"{s['strategy']} on {s['fabric']}: {max(v, 1 / v):.2f}× {word} than on {s['reference']}{shown}"


def figure_text(f: Figure) -> str:
    if f.samples_per_s is None:
        return f"{f.strategy} @ {f.fabric}: no throughput"
    ci = f" [{f.ci95[0]:.4g}, {f.ci95[1]:.4g}]" if f.ci95 else ""
    return (f"{f.strategy:<6} @ {f.fabric}: {f.samples_per_s:.4g} samples/s{ci} ({f.runs} run(s), {f.interval})"
            + (f"; {f.host_bound}" if f.host_bound else ""))


def summary(records: list[dict[str, Any]], *, fabrics: list[str] | None = None,
            reference: str | None = None) -> dict[str, Any]:
    """The machine-readable summary (`fabricbench report DIR --json`, the study's "summary" record)."""
    figs = figures(records)
    order = list(dict.fromkeys((fabrics or []) + [f.fabric for f in figs]))
    figs.sort(key=lambda f: order.index(f.fabric))
    ref = reference or (order[0] if order else None)
    ranks = rankings(figs)
    slows = slowdowns(figs, ref) if ref else []
    return {"rankings": ranks, "slowdowns": slows, "reference": ref,
            "figures": [f.to_dict() for f in figs],
            "host_bound": [{"strategy": f.strategy, "fabric": f.fabric, "gpu_busy_fraction": f.gpu_busy_fraction,
                            "note": f.host_bound} for f in figs if f.host_bound],
            "host_bound_threshold": HOST_BOUND,
            "headline": [f"on {fab}: {ranking_text(g)}" for fab, g in ranks.items()]
            + [slowdown_text(s) for s in slows]}


def overlapping(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two slowdown entries' intervals overlap (for comparing two studies)."""
    return overlaps(tuple(a["ci95"]) if a.get("ci95") else None, tuple(b["ci95"]) if b.get("ci95") else None)


def contradictions(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Where two summaries of the same measurement contradict each other, one sentence each: an order of
    two strategies that flips with neither calling it a tie, a slowdown whose intervals do not overlap,
    a (strategy, fabric) figure whose intervals do not overlap. [] when they agree within noise."""
    out = []
    for fabric in set(a.get("rankings", {})) & set(b.get("rankings", {})):
        pos_a = {s: i for i, g in enumerate(a["rankings"][fabric]) for s in g}
        pos_b = {s: i for i, g in enumerate(b["rankings"][fabric]) for s in g}
        common = sorted(set(pos_a) & set(pos_b))
        for x in common:
            for y in common:
                if pos_a[x] < pos_a[y] and pos_b[y] < pos_b[x]:
                    out.append(f"on {fabric}: one says {x} before {y}, the other {y} before {x}, neither a tie")
    sa = {(s["strategy"], s["fabric"]): s for s in a.get("slowdowns", [])}
    for s in b.get("slowdowns", []):
        other = sa.get((s["strategy"], s["fabric"]))
        if other is not None and not overlapping(s, other):
            out.append(f"{s['strategy']} on {s['fabric']}: slowdown {other['value']:.3f} {other.get('ci95')} "
                       f"against {s['value']:.3f} {s.get('ci95')}: the intervals do not overlap")
    fa = {(f["strategy"], f["fabric"]): f for f in a.get("figures", [])}
    for f in b.get("figures", []):
        g = fa.get((f["strategy"], f["fabric"]))
        if g is not None and not overlaps(tuple(f["ci95"]) if f.get("ci95") else None,
                                          tuple(g["ci95"]) if g.get("ci95") else None):
            out.append(f"{f['strategy']} @ {f['fabric']}: {g['samples_per_s']:.4g} {g.get('ci95')} against "
                       f"{f['samples_per_s']:.4g} {f.get('ci95')} samples/s: the intervals do not overlap")
    return out
