"""Repeats in fresh processes: one figure per (strategy, fabric) with its run-to-run interval, and the
comparisons that answer the question: paired ratios over interleaved rounds with a verdict each.

    fabricbench train --strategy ddp,fsdp --model tiny-mistral --device cpu --nprocs 2 --repeats 3
    fabricbench report run/ --json          (the study's summary: comparisons, rankings, slowdowns)

Each run's figure is its median step time (metrics.py). A (strategy, fabric) over its runs:
step = median of the runs' medians; ci95 = the run-to-run interval of that median (stats.repeat_ci), or,
with one run only, the run's own median CI (marked "within one run": it understates, each process has its
own level). Throughput = global batch / step, its interval [batch / hi, batch / lo].

The answers are comparisons (statistics/comparison.py): strategies on one fabric, and each fabric against
the reference for one strategy (a slowdown is that comparison's ratio). Round k of A is paired with round
k of B (the study's unit "train A @ f #k", train's own "repeat"); each comparison has a verdict, faster,
equivalent within the margin, or undecided. Rankings order two strategies only where a comparison says
faster. The CLI, the report, advise and the summary record all use these same sentences.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any, Iterable

from fabricbench import hostload
from fabricbench.statistics import comparison
from fabricbench.statistics.comparison import MARGIN, Comparison
from fabricbench.statistics.figures import around, ci_rel, overlaps, repeat_ci
from fabricbench.results.schema import TrainResult
from fabricbench.results.status import TIMED_TRAIN

DEFAULT_MAX_REPEATS = 5  # --max-repeats' default (train and study): runs per strategy, at most, unless it says more
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
    busy_host_runs: int = 0  # of `runs`, those taken while other processes loaded the host (hostload.py)

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
            ci = around(step, rel) if rel is not None else None
            how = "within one run" if ci is not None else "none"
        batch = runs[0].global_batch
        sps = batch / step if batch else None
        thr_ci = (batch / ci[1], batch / ci[0]) if batch and ci is not None else None
        busy = [b for r in runs if (b := r.reached("gpu_busy_fraction")) is not None]
        busy_m = statistics.median(busy) if busy else None
        out.append(Figure(strategy=strategy, fabric=fabric, runs=len(runs), step_s=step, step_ci95=ci,
                          samples_per_s=sps, ci95=thr_ci, ci95_rel=ci_rel(ci, step), interval=how,
                          run_samples_per_s=tuple(batch / s for s in steps) if batch else (),
                          gpu_busy_fraction=busy_m, host_bound=host_bound_note(busy_m),
                          busy_host_runs=sum(bool((hostload.of(r) or {}).get("busy")) for r in runs)))
    return out


def host_bound_note(busy: Any) -> str | None:
    """The sentence a gpu_busy_fraction earns below HOST_BOUND, for the CLI, report and advise."""
    if not isinstance(busy, (int, float)) or busy >= HOST_BOUND:
        return None
    return (f"host-bound: the GPU was busy {busy:.0%} of the step; this figure measures the host, and a "
            f"fabric's effect is hidden")


def still_to_run(config: Any, records: list[dict[str, Any]], *, round_: int, elapsed_s: float) -> list[str]:
    """The strategies that get another round after `round_` (see launch.run): every strategy whose last
    run ended ok, while a comparison between them is undecided or a figure is less precise than
    target_ci; none once max_repeats or time_budget_s is reached. A round is all or nothing, so that
    rounds stay paired."""
    alive = [s for s in config.strategies if _last_ok(records, s)]
    if round_ < config.min_repeats:
        return alive
    if config.repeats is not None or round_ >= config.max_repeats or elapsed_s >= config.time_budget_s:
        return []  # --repeats N: exactly N
    open_ = open_questions(records, margin=config.margin, target_ci=config.target_ci,
                           first_look=min(comparison.FIRST_LOOK, config.max_repeats), last_look=config.max_repeats)
    return alive if open_ else []


def open_questions(records: Iterable[TrainResult | dict[str, Any]], *, margin: float = MARGIN,
                   target_ci: float | None = None, fabrics: list[str] | None = None,
                   reference: str | None = None, first_look: int = comparison.FIRST_LOOK,
                   last_look: int | None = None) -> list[str]:
    """What another round would still answer: each undecided comparison, and each figure whose
    run-to-run interval is wider than target_ci (the precision floor), one short phrase each."""
    records = list(records)
    figs = figures(records)
    out = [c.text() for c in comparisons(records, fabrics=fabrics, reference=reference, margin=margin,
                                         first_look=first_look, last_look=last_look) if not c.decided]
    if target_ci:
        out += [f"{f.strategy} @ {f.fabric}: ±{f.ci95_rel:.1%} > ±{target_ci:.0%}" if f.ci95_rel is not None else
                f"{f.strategy} @ {f.fabric}: no run-to-run interval yet"
                for f in figs if f.interval != "run-to-run" or f.ci95_rel is None or f.ci95_rel > target_ci]
    return out


def _last_ok(records: list[dict[str, Any]], strategy: str) -> bool:
    mine = [r for r in records if r.get("strategy") == strategy]
    return bool(mine) and mine[-1].get("status") in OK


def round_of(r: TrainResult | dict[str, Any]) -> int | None:
    """The round a run belongs to: k of the study unit "train A @ f #k" (1 without "#"), else train's own
    "repeat"; None where neither says (an imported record): such a run cannot be paired."""
    extra = r if isinstance(r, dict) else {**r.extra, **r.context}
    unit = (extra.get("study") or {}).get("unit") if isinstance(extra.get("study"), dict) else None
    if isinstance(unit, str) and unit.startswith("train "):
        tail = unit.rsplit(" #", 1)
        return int(tail[1]) if len(tail) == 2 and tail[1].isdigit() else 1
    rep = extra.get("repeat")
    return rep if isinstance(rep, int) and rep > 0 else None


def runs(records: Iterable[TrainResult | dict[str, Any]]) -> dict[tuple[str, str], list[tuple[int | None, float]]]:
    """(strategy, fabric) -> [(round, samples/s)] over the runs that count, in record order (a round
    measured twice, by a resumed study: the later run)."""
    out: dict[tuple[str, str], dict[Any, float]] = {}
    for r in records:
        if isinstance(r, dict):
            if r.get("kind", "train") != "train" or r.get("status") not in OK:
                continue
            r = TrainResult.from_record(r)
        if r.status not in OK or r.median_step_s is None or not r.global_batch:
            continue
        rnd = round_of(r)
        mine = out.setdefault((r.strategy, r.fabric), {})
        mine[rnd if rnd is not None else ("unpaired", len(mine))] = r.global_batch / r.median_step_s
    return {k: [(rk if isinstance(rk, int) else None, v) for rk, v in d.items()] for k, d in out.items()}


def comparisons(records: Iterable[TrainResult | dict[str, Any]], *, fabrics: list[str] | None = None,
                reference: str | None = None, margin: float = MARGIN, first_look: int = comparison.FIRST_LOOK,
                last_look: int | None = None, strategies: list[str] | None = None) -> list[Comparison]:
    """Every comparison a headline orders: each pair of strategies on each fabric, then each fabric
    against the reference for each strategy. last_look: the most rounds the run could have had (the
    sequential rule's last look; default: the rounds there are)."""
    records = list(records)
    by = runs(records)
    order_f = list(dict.fromkeys((fabrics or []) + [f for _, f in by]))
    order_s = list(dict.fromkeys((strategies or []) + [s for s, _ in by]))
    ref = reference or (order_f[0] if order_f else None)
    kw = dict(margin=margin, first_look=first_look, last_look=last_look)

    def cmp(x, y, key_x, key_y, **names):
        vx, vy = by.get(key_x, []), by.get(key_y, [])
        return comparison.compare(x, y, [v for _, v in vx], [v for _, v in vy], rounds_a=[k for k, _ in vx],
                                  rounds_b=[k for k, _ in vy], **names, **kw)

    out = []
    for f in order_f:
        here = [s for s in order_s if (s, f) in by]
        out += [cmp(x, y, (x, f), (y, f), fabric=f) for i, x in enumerate(here) for y in here[i + 1:]]
    for s in order_s:
        if (s, ref) in by:
            out += [cmp(ref, f, (s, ref), (s, f), strategy=s) for f in order_f if f != ref and (s, f) in by]
    return out


def rankings(figs: list[Figure], comps: list[Comparison]) -> dict[str, list[list[str]]]:
    """fabric -> [[first], [next], ...] by samples/s: a strategy starts a new group only where the
    comparison with the one before it says "faster"; otherwise the two share a group (not an order)."""
    verdict = {(c.fabric, c.a, c.b): c.verdict for c in comps if c.fabric is not None}
    out: dict[str, list[list[str]]] = {}
    for fabric in dict.fromkeys(f.fabric for f in figs):
        ranked = sorted((f for f in figs if f.fabric == fabric and f.samples_per_s), key=lambda f: -f.samples_per_s)
        groups: list[list[str]] = []
        for f in ranked:
            if groups and verdict.get((fabric, groups[-1][-1], f.strategy)) != "faster":
                groups[-1].append(f.strategy)
            else:
                groups.append([f.strategy])
        out[fabric] = groups
    return out


def slowdowns(comps: list[Comparison], reference: str) -> list[dict[str, Any]]:
    """step(f) / step(reference) per strategy and fabric: the paired ratio of the fabric comparison,
    with its interval and verdict."""
    out = []
    for c in comps:
        if c.strategy is None or c.ratio is None:
            continue
        fab = c.b if c.a == reference else c.a
        flip = c.a != reference  # the ratio is leader / trailer in throughput: a slowdown is ref / fabric
        ci = c.ci95
        out.append({"strategy": c.strategy, "fabric": fab, "reference": reference,
                    "value": 1 / c.ratio if flip else c.ratio,
                    "ci95": ([1 / ci[1], 1 / ci[0]] if flip else list(ci)) if ci else None,
                    "verdict": c.verdict, "paired": c.paired, "rounds": c.rounds, "text": c.text()})
    return out


def verdict_lines(comps: list[Comparison] | list[dict[str, Any]], width: int = 80) -> list[str]:
    """The comparisons as the CLI ends with them: one sentence each, wrapped at `width` columns."""
    import textwrap

    out = []
    for c in comps:
        text = c.text() if isinstance(c, Comparison) else c.get("text") or ""
        out += textwrap.wrap(text, width=width, initial_indent="  ", subsequent_indent="      ")
    return out


def answer_lines(records: list[dict[str, Any]], *, repeats: int | None = None, max_repeats: int = DEFAULT_MAX_REPEATS,
                 margin: float = MARGIN, width: int = 80) -> list[str]:
    """What `fabricbench train` ends with when it compared strategies: their verdicts, at `width` columns
    (looks as launch.run took them: one at N with --repeats N, else from the third round to max_repeats), each
    with the runs behind it taken on a busy host, then those runs (said even with nothing compared)."""
    looks = ({"first_look": repeats, "last_look": repeats} if repeats else
             {"first_look": min(comparison.FIRST_LOOK, max_repeats), "last_look": max_repeats})
    comps = [dict(c.to_dict(), text=c.text()) for c in comparisons(records, margin=margin, **looks)]
    busy = busy_runs(records)
    mark_busy(comps, busy)
    head = [f"answers (95% intervals, margin ±{margin:.0%}):"] if comps else []
    return head + verdict_lines([dict(cm, text=said(cm)) for cm in comps], width=width) + busy_lines(busy, width)


def busy_runs(records: Iterable[TrainResult | dict[str, Any]]) -> list[dict[str, Any]]:
    """[{unit, strategy, fabric, note}]: each run that counts taken on a busy host (hostload.note), named
    by its study unit where a study ran it, else "strategy @ fabric" and its round."""
    out = []
    for r in records:
        if isinstance(r, dict):
            if r.get("kind", "train") != "train" or r.get("status") not in OK:
                continue
            r = TrainResult.from_record(r)
        note = hostload.note(hostload.of(r)) if r.status in OK else None
        if note:
            rnd = round_of(r)
            unit = ((r.context.get("study") or r.extra.get("study") or {}).get("unit") or
                    f"{r.strategy} @ {r.fabric}" + (f" round {rnd}" if rnd else ""))
            out.append({"unit": unit, "strategy": r.strategy, "fabric": r.fabric, "note": note})
    return out


def mark_busy(comps: list[dict[str, Any]], busy: list[dict[str, Any]]) -> None:
    """Each comparison (a dict) gets `busy_host`: the busy runs (busy_runs) of the two figures it compares."""
    for cm in comps:
        pairs = {(cm["a"], cm["fabric"]), (cm["b"], cm["fabric"])} if cm.get("fabric") else \
            {(cm.get("strategy"), cm["a"]), (cm.get("strategy"), cm["b"])}
        cm["busy_host"] = [b["unit"] for b in busy if (b["strategy"], b["fabric"]) in pairs]


def said(cm: dict[str, Any]) -> str:
    """A comparison's sentence, naming the runs behind it that a busy host may have moved."""
    busy = cm.get("busy_host") or []
    return cm["text"] + (f" (run on a busy host: {', '.join(busy)})" if busy else "")


def busy_lines(busy: list[dict[str, Any]], width: int = 80) -> list[str]:
    """The busy runs as the CLI ends with them, after the verdicts."""
    import textwrap

    return [x for b in busy for x in textwrap.wrap(f"busy host during {b['unit']}: {b['note']}", width=width,
                                                   initial_indent="  ", subsequent_indent="      ")]


def figure_text(f: Figure) -> str:
    if f.samples_per_s is None:
        return f"{f.strategy} @ {f.fabric}: no throughput"
    ci = f" [{f.ci95[0]:.4g}, {f.ci95[1]:.4g}]" if f.ci95 else ""
    return (f"{f.strategy:<6} @ {f.fabric}: {f.samples_per_s:.4g} samples/s{ci} ({f.runs} run(s), {f.interval})"
            + (f"; {f.host_bound}" if f.host_bound else "")
            + (f"; {f.busy_host_runs} of them on a busy host" if f.busy_host_runs else ""))


def summary(records: list[dict[str, Any]], *, fabrics: list[str] | None = None,
            reference: str | None = None, margin: float = MARGIN, first_look: int = comparison.FIRST_LOOK,
            last_look: int | None = None, strategies: list[str] | None = None) -> dict[str, Any]:
    """The machine-readable summary (`fabricbench report DIR --json`, the study's "summary" record)."""
    records = list(records)
    figs = figures(records)
    order = list(dict.fromkeys((fabrics or []) + [f.fabric for f in figs]))
    figs.sort(key=lambda f: order.index(f.fabric))
    ref = reference or (order[0] if order else None)
    comps = comparisons(records, fabrics=order, reference=ref, margin=margin, first_look=first_look,
                        last_look=last_look, strategies=strategies)
    ranks = rankings(figs, comps)
    slows = slowdowns(comps, ref) if ref else []
    cms = [dict(c.to_dict(), text=c.text()) for c in comps]
    busy = busy_runs(records)
    mark_busy(cms, busy)  # a verdict built on a run taken on a busy host names it
    return {"comparisons": cms, "margin": margin, "busy_host": busy, "busy_host_rule": hostload.RULE,
            "rankings": ranks, "slowdowns": slows, "reference": ref,
            "figures": [f.to_dict() for f in figs],
            "host_bound": [{"strategy": f.strategy, "fabric": f.fabric, "gpu_busy_fraction": f.gpu_busy_fraction,
                            "note": f.host_bound} for f in figs if f.host_bound],
            "host_bound_threshold": HOST_BOUND,
            "headline": [c.text() for c in comps]}


def contradictions(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Where two summaries of the same question give answers that contradict, one sentence each: a comparison
    that says "x faster" in one and "y faster" or "equivalent" in the other ("undecided" contradicts nothing).
    [] when they agree. Figures are left to `disjoint_figures`: their run-to-run intervals cover one study's
    runs, not a machine whose load changed between two studies, and paired ratios are what cancels that."""
    def key(c):
        return (c.get("fabric"), c.get("strategy"), frozenset((c.get("a"), c.get("b"))))

    ca = {key(c): c for c in a.get("comparisons", [])}
    return [f"one says: {ca[key(c)].get('text')}; the other: {c.get('text')}"
            for c in b.get("comparisons", []) if key(c) in ca and comparison.contradicts(ca[key(c)], c)]


def disjoint_figures(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The (strategy, fabric) figures of two summaries whose intervals do not overlap, one sentence each: on a
    quiet, dedicated machine a sign that a figure's interval is too narrow."""
    out = []
    fa = {(f["strategy"], f["fabric"]): f for f in a.get("figures", [])}
    for f in b.get("figures", []):
        g = fa.get((f["strategy"], f["fabric"]))
        if g is not None and not overlaps(tuple(f["ci95"]) if f.get("ci95") else None,
                                          tuple(g["ci95"]) if g.get("ci95") else None):
            out.append(f"{f['strategy']} @ {f['fabric']}: {g['samples_per_s']:.4g} {g.get('ci95')} against "
                       f"{f['samples_per_s']:.4g} {f.get('ci95')} samples/s: the intervals do not overlap")
    return out
