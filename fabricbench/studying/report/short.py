"""The study report's first section, "In short": the answer, before the evidence."""

from __future__ import annotations

from fabricbench.report.analysis import fmt, fmt_ratio
from fabricbench.report.document import Document
from fabricbench.results.schema import CollectiveResult, TrainResult
from fabricbench.results.status import Status
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.report.common import question_summary


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
        elif sum(map(len, groups)) > 1:
            items.append(f"on **{f}** no strategy is shown faster than {', '.join(groups[0][1:])} yet "
                         f"(the verdicts below): {groups[0][0]} measured highest, {shown}")
    # the answers: one verdict per comparison (measuring/comparison.py), the same sentences as the CLI's
    items += [("**" + cm["verdict"] + "**: " + cm["text"]) for cm in summ["comparisons"]]
    for f in c.fabrics[1:]:
        bw = _busbw_ratio(colls, c.fabrics[0], f)
        if bw:
            items.append(f"**{f}** against {c.fabrics[0]}: all-reduce busbw at the largest size "
                         + f"{fmt_ratio(1 / bw)} slower")  # one direction for every ratio: N× slower
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


def _busbw_ratio(colls: list[CollectiveResult], base: str, f: str) -> float | None:
    """busbw on f / on base for all_reduce at the largest size both have (algbw when n = 1)."""
    def largest(fab):
        return {r.bytes: r for r in colls if r.fabric == fab and r.op == "all_reduce" and r.status == Status.OK}
    a, b = largest(base), largest(f)
    common = sorted(set(a) & set(b))
    if not common:
        return None
    x, y = a[common[-1]], b[common[-1]]
    x, y = (x.busbw_gbps, y.busbw_gbps) if (x.nranks or 0) > 1 else (x.algbw_gbps, y.algbw_gbps)
    return y / x if x and y else None
