"""The study report's section "Advice": where to run the job and with which strategy, and smaller jobs' GPU sets."""

from __future__ import annotations

from fabricbench.reporting.analysis import fmt
from fabricbench.reporting.document import Document, Section
from fabricbench.results.schema import CollectiveResult, TrainResult
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.report.common import gib, question_summary
from fabricbench.topology.model import Topology
from fabricbench.topology.ranking import rank_placements
from fabricbench.training import repeats


def _smaller_jobs(s: Section, c: StudyConfig, machine, collectives: list[CollectiveResult]) -> None:
    """For each smaller job size: the best GPU set against the worst kind, by measured busbw where the
    scaling unit measured that shape, else from link types ("pin a 4-GPU job to 0-3: 9× the busbw of 0,1,4,5")."""
    topo = (machine or {}).get("topology")
    if not topo or len(c.gpus) < 3 or topo.get("uniform"):
        return

    t = Topology.from_dict(topo)
    pool = [g for g in c.gpus if g in t.indices]
    rows = []
    for k in sorted({2, 4, 8, 16} & set(range(2, len(pool)))):
        ranked = rank_placements(t, pool, k, collectives, fabric=c.fabrics[0])
        best, worst = ranked[0], ranked[-1]
        rows.append([k, ",".join(map(str, best.gpus)), best.label, best.busbw_gbps, best.source,
                     ",".join(map(str, worst.gpus)), worst.busbw_gbps,
                     (best.busbw_gbps / worst.busbw_gbps) if (best.busbw_gbps and worst.busbw_gbps) else None])
    if rows:
        s.table(["GPUs", "pin to", "placement", "busbw GB/s", "source", "not", "busbw GB/s", "×"], rows,
                caption="smaller jobs on this machine: the best GPU set against the worst kind of set")


def advice_section(doc: Document, c: StudyConfig, advice, trains: list[TrainResult], machine=None,
                    collectives: list[CollectiveResult] = ()) -> None:
    s = doc.section("Advice", intro="Where to run this job and with which strategy, from the measurements above "
                                    "(fabricbench advise gives the same for other GPU counts and saved "
                                    "topologies).")
    if isinstance(advice, str):
        s.text(f"No placement advice: {advice}")
    elif advice is not None:
        s.text(f"**Recommended: {advice.strategy} on GPUs {','.join(map(str, advice.placement))}.**")
        s.bullets(advice.reasons)
        s.table(["GPUs", "placement", "slowest hop", "busbw GB/s", "source", "same as"],
                [[",".join(map(str, p.gpus)), p.label, p.slowest_link, p.busbw_gbps, p.source,
                  "; ".join(",".join(map(str, e)) for e in p.equivalent[:4]) + (" …" if len(p.equivalent) > 4 else "")]
                 for p in advice.placements[:8]], caption="GPU sets, best busbw first")
        s.table(["strategy", "rank", "memory", "need GiB", "headroom GiB", "comm ms/step", "step ms", "step time from"],
                [[a.strategy, a.rank, a.memory.verdict, gib(a.memory.need_bytes), gib(a.memory.headroom_bytes),
                  a.time.comm_time_s * 1e3 if a.time.comm_time_s is not None else None,
                  a.time.step_time_s * 1e3 if a.time.step_time_s is not None else None,
                  a.time.time_source] for a in advice.strategies],
                caption=f"strategies on the recommended set ({advice.time_source})", status_col=2)
        notes = [f"{a.strategy}: {a.note}" for a in advice.strategies if a.note]
        if notes:
            s.bullets(notes)
    _smaller_jobs(s, c, machine, list(collectives))
    _fastest(s, c, trains)


def _fastest(s: Section, c: StudyConfig, trains: list[TrainResult]) -> None:
    """Which strategy to run on each fabric, as the paired comparison of the two measured highest says it
    (the same comparison as "In short" and the terminal's answer): its winner where it found one, "either"
    where they are equivalent, "undecided" where it could not tell, never the higher median alone."""
    summ = question_summary(trains, c)
    figs = {(f["strategy"], f["fabric"]): f for f in summ["figures"]}
    comps = {(cm["fabric"], frozenset((cm["a"], cm["b"]))): cm for cm in summ["comparisons"] if cm.get("fabric")}
    rows = []
    for f in c.fabrics:
        ok = sorted(((st, figs[(st, f)]["samples_per_s"]) for st in c.strategies
                     if (st, f) in figs and figs[(st, f)]["samples_per_s"]), key=lambda x: -x[1])
        if not ok:
            continue
        cm = comps.get((f, frozenset((ok[0][0], ok[1][0])))) if len(ok) > 1 else None
        run = (ok[0][0] if len(ok) == 1 else "undecided" if cm is None else
               cm["a"] if cm["verdict"] == "faster" else f"either ({cm['a']} or {cm['b']})"
               if cm["verdict"] == "equivalent" else "undecided")
        medians = ", ".join(f"{st} {fmt(v)}" for st, v in ok)  # fmt: In short's digits
        rows.append([f, run, medians, repeats.said(cm).removeprefix(f"on {f}: ") if cm else "-"])  # busy runs named
    if rows:
        s.table(["fabric", "run", "samples/s (median of runs)", "verdict"], rows,
                caption="the strategy to run on each fabric, as the paired comparison of the two highest "
                        "says it (“In short”'s verdicts): undecided where its interval cannot tell them apart")
        if c.device == "cpu":
            s.text("On a CPU lab the choice is the strategy per fabric: the slower the wire, the more a strategy "
                   "that sends less (or hides its communication behind compute) gains. Whether a lead is real or "
                   f"noise is each row's verdict: a paired 95% interval over the rounds, margin ±{c.margin:.0%} "
                   "(docs/comparisons.md).")
