"""The study report's first section, "In short": the answer, before the evidence."""

from __future__ import annotations

from fabricbench import hostload
from fabricbench.statistics.comparison import judge
from fabricbench.statistics.figures import ratio_ci
from fabricbench.reporting.analysis import fmt, fmt_ratio
from fabricbench.reporting.document import Document
from fabricbench.results.schema import CollectiveResult, TrainResult
from fabricbench.results.status import Status
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.report.common import busbw_ci, question_summary, waived_fabrics
from fabricbench.training import repeats


def in_short(doc: Document, sr, c: StudyConfig, trains: list[TrainResult], colls: list[CollectiveResult],
              advice) -> None:
    s = doc.section("In short", intro="What this study measured on this machine, and what to do about it. "
                                      "Every figure below comes with its numbers and the command that made it.")
    items = []
    summ = question_summary(trains, c)
    figs_by = {(f["strategy"], f["fabric"]): f for f in summ["figures"]}
    for f, groups in summ["rankings"].items():
        if not groups:
            continue
        best = figs_by[(groups[0][0], f)]
        ci = best.get("ci95")
        shown = f"{fmt(best['samples_per_s'])} samples/s" + (f" (95% CI {fmt(ci[0])}-{fmt(ci[1])}, {best['runs']} run(s))"
                                                             if ci else f" ({best['runs']} run, no interval)")
        if len(groups[0]) == 1 and len(figs_by) > 1 and sum(map(len, groups)) > 1:
            items.append(f"on **{f}** the fastest: **{groups[0][0]}**, {shown}")
        elif sum(map(len, groups)) > 1:  # no winner to name: the comparisons below say why (never a
            # "measured highest" beside an undecided verdict: the ordering is the noise it could not settle)
            items.append(f"on **{f}** no strategy is shown faster than another yet: "
                         f"{', '.join(groups[0])} are undecided or equivalent (the verdicts below)")
    # the answers: one verdict per comparison (statistics/comparison.py), the same sentences as the CLI's
    items += [("**" + cm["verdict"] + "**: " + repeats.said(cm)) for cm in summ["comparisons"]]
    waived = waived_fabrics(sr, c)
    for f in c.fabrics[1:]:
        if f in waived:  # never measured, so never a ratio: the rule compare applies (studying/plan.waived)
            items.append(f"**{f}**: waived, not measured ({waived[f]})")
            continue
        said = busbw_said(colls, c.fabrics[0], f, c.margin)
        if said:
            items.append(f"**{f}** against {c.fabrics[0]}: all-reduce busbw at the largest size {said}"
                         + _busy_sweeps(colls, c.fabrics[0], f))
    for b in summ["busy_host"]:  # the runs a verdict above names: each with the others' load
        items.append(f"**busy host** during {b['unit']}: {b['note']}; a busy host is one where "
                     f"{summ['busy_host_rule']}, so this run's figure may be low")
    for hb in summ["host_bound"]:
        items.append(f"{hb['strategy']} @ {hb['fabric']}: {hb['note']}")
    picked = next(iter(sr.of_kind("batch")[-1:]), None)
    if picked:
        items.append(f"batch {picked.get('chosen')} per GPU, picked by the study ({picked.get('why')})")
    if advice is not None and not isinstance(advice, str):
        items.append(f"advice: run **{advice.strategy}** on GPUs **{','.join(map(str, advice.placement))}** "
                     f"({advice.reasons[0]})")
    counts: dict[str, int] = {}
    for u in sr.units.values():
        counts[u["status"]] = counts.get(u["status"], 0) + 1
    items.append("units: " + ", ".join(f"{n} {st}" for st, n in sorted(counts.items())) +
                 " (see “Reproduce” for each one's status and command)")
    s.bullets(items)


def busbw_said(colls: list[CollectiveResult], base: str, f: str, margin: float) -> str | None:
    """all_reduce at the largest size both fabrics have, f against base, as its verdict: "N× slower" only
    where the interval of base / f lies wholly above 1 (each busbw's interval from its median time's CI,
    common.busbw_ci; the ratio's by interval arithmetic, judged with the study's margin like every
    comparison), so that load noise is never called a slowdown. algbw when n = 1."""
    def largest(fab):
        return {r.bytes: r for r in colls if r.fabric == fab and r.op == "all_reduce" and r.status == Status.OK}
    a, b = largest(base), largest(f)
    common = sorted(set(a) & set(b))
    if not common:
        return None
    x, y = a[common[-1]], b[common[-1]]
    one = (x.nranks or 0) <= 1
    vx, vy = (x.algbw_gbps, y.algbw_gbps) if one else (x.busbw_gbps, y.busbw_gbps)
    if not vx or not vy:
        return None
    ratio = vx / vy  # one direction for every ratio: N× slower
    cx, cy = (None, None) if one else (busbw_ci(x), busbw_ci(y))
    ci = ratio_ci(cx, cy) if cx and cy else None
    if ci is None:
        return f"measured {fmt_ratio(ratio)} slower, with no interval to tell it from noise"
    shown = f"{fmt_ratio(ratio)} slower (95% CI {fmt_ratio(ci[0])}–{fmt_ratio(ci[1])})"
    verdict = judge(ci, margin)
    if verdict == "faster":
        return shown if ci[0] > 1 else f"{shown}: faster than {base}"
    if verdict == "equivalent":
        return f"the same within ±{margin:.0%}: {shown}"
    return f"no difference shown (the interval holds 1, so the gap may be load noise): {shown}"


def _busy_sweeps(colls: list[CollectiveResult], *fabrics: str) -> str:
    """"; the sweep on F ran on a busy host (...)" where a sweep of these fabrics ran while others loaded it."""
    notes = {f: hostload.records_note([r for r in colls if r.fabric == f]) for f in fabrics}
    return "".join(f"; the sweep on {f}: {n}" for f, n in notes.items() if n)
