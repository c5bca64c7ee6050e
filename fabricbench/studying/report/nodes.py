"""The study report's section for a study across nodes: the nodes and their ranks, and the link between
them as the sweeps see it: each size's busbw inside node 0 ("intra-node sweep @ F": node 0's ranks
alone) against across every node ("sweep @ F": all ranks), which is also the scaling from one node to N.

A busbw's interval comes from its time's (ci95_rel of the median time: busbw = S / t x factor, so the
interval is busbw / (1 + rel) to busbw x (1 + rel); with fewer than 6 timed iterations, the range of
their times); the ratio's is interval arithmetic of the two
(measuring/stats.ratio_ci), judged with the study's margin like every comparison (measuring/comparison.judge).
Unpaired: the two sweeps ran one after the other, not in interleaved rounds; the section says so.
"""

from __future__ import annotations

from typing import Any

from fabricbench.statistics.comparison import judge
from fabricbench.statistics.figures import ratio_ci
from fabricbench.reporting.document import Document
from fabricbench.results.schema import CollectiveResult, TrainResult
from fabricbench.results.status import Status
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.kinds import unit_of
from fabricbench.studying.report.common import busbw_ci, size_text, waived_fabrics
from fabricbench.studying.units import INTRA


def link_rows(colls: list[CollectiveResult], fabric: str, margin: float) -> list[dict[str, Any]]:
    """[{op, dtype, bytes, intra, inter, ratio, ci95, verdict, n_intra, n_inter}] for each size swept both
    inside node 0 and across the nodes on `fabric`; ratio = inter / intra busbw (below 1: the nodes' link
    costs that much)."""
    def pick(prefix: str) -> dict[tuple[str, str, int], CollectiveResult]:
        return {(r.op, r.dtype, r.bytes): r for r in colls if r.status == Status.OK and r.fabric == fabric
                and (unit_of(r) or "") == f"{prefix} @ {fabric}" and r.busbw_gbps}

    intra, inter = pick(INTRA), pick("sweep")
    rows = []
    for key in sorted(set(intra) & set(inter)):
        a, b = inter[key], intra[key]
        ci_a, ci_b = busbw_ci(a), busbw_ci(b)
        ci = ratio_ci(ci_a, ci_b) if ci_a and ci_b else None
        rows.append({"op": key[0], "dtype": key[1], "bytes": key[2], "intra": b.busbw_gbps, "inter": a.busbw_gbps,
                     "ratio": a.busbw_gbps / b.busbw_gbps, "ci95": ci,
                     "verdict": _said(judge(ci, margin), ci) if ci else "no interval",
                     "n_intra": b.nranks, "n_inter": a.nranks})
    return rows


def _said(verdict: str, ci: tuple[float, float]) -> str:
    if verdict == "faster":
        return "slower across nodes" if ci[1] < 1 else "faster across nodes"
    return verdict


def nodes_section(doc: Document, sr: Any, c: StudyConfig, trains: list[TrainResult],
                  colls: list[CollectiveResult]) -> None:
    if c.nnodes < 2:
        return
    hosts = list(((sr.plan or {}).get("study") or {}).get("nodes") or [])
    s = doc.section("Across nodes",
                    intro=f"{c.nnodes} nodes, {c.ranks_per_node} rank(s) each: node 0 ran the study and wrote "
                          f"this folder; every train and sweep unit was one job of all {c.world_size} ranks, and "
                          + ("each sweep ran again inside node 0 alone (intra-node) to show what the link between "
                             "the nodes costs." if c.ranks_per_node > 1 else
                             "with one rank per node no collective runs inside a node: the intra-node sweeps are "
                             "waived, so the link between the nodes is seen alone, not against one node's ranks."))
    placed = next((r.extra.get("nodes") for r in trains if isinstance(getattr(r, "extra", None), dict)
                   and r.extra.get("nodes")), None)
    machines = {(m.get("node") or {}).get("index"): m for m in sr.of_kind("machine")}
    rows = []
    for i in range(c.nnodes):
        host = hosts[i] if i < len(hosts) else "?"
        ranks = next((p.get("ranks") for p in placed or [] if p.get("host") == host), None) if placed else None
        gpus = (machines.get(i) or {}).get("gpus") or []
        rows.append([str(i), host, ", ".join(map(str, ranks)) if ranks else "?",
                     f"{len(gpus)} × {gpus[0].get('name')}" if gpus else ("CPU ranks" if c.device == "cpu" else "?")])
    s.table(["node", "host", "ranks", "devices"], rows, caption="the nodes, from the plan and node 0's train records")
    waived = waived_fabrics(sr, c)
    for fabric in c.fabrics:
        lrows = link_rows(colls, fabric, c.margin)
        if fabric in waived:
            s.text(f"{fabric}: waived, not measured ({waived[fabric]}).")
            continue
        if not lrows:
            s.text(f"{fabric}: no size was swept both inside node 0 and across the nodes"
                   + (" (one rank per node: nothing to sweep inside a node)." if c.ranks_per_node < 2 else "."))
            continue
        s.table(["op", "size", f"intra-node busbw ({lrows[0]['n_intra']} ranks)",
                 f"across {c.nnodes} nodes ({lrows[0]['n_inter']} ranks)", "across / intra [95% CI]", "verdict"],
                [[r["op"], size_text(r["bytes"]), f"{r['intra']:.3g} GB/s", f"{r['inter']:.3g} GB/s",
                  f"{r['ratio']:.2f}×" + (f" [{r['ci95'][0]:.2f}–{r['ci95'][1]:.2f}]" if r["ci95"] else ""),
                  r["verdict"]] for r in lrows],
                caption=f"fabric {fabric}: busbw inside node 0 against across the nodes (the scaling from 1 node "
                        f"to {c.nnodes}), per size; unpaired (the two sweeps ran one after the other); intervals "
                        f"from each median time's 95% CI (below 6 iterations: their min–max, 94% at 5), "
                        f"margin ±{c.margin:.0%}")
        big = max(lrows, key=lambda r: (r["op"] == "all_reduce", r["bytes"]))
        s.text(f"At {size_text(big['bytes'])} {big['op']}, {c.nnodes} nodes reach {big['ratio']:.2f}× the busbw of "
               f"one node's ranks on {fabric}" + (f" [{big['ci95'][0]:.2f}–{big['ci95'][1]:.2f}]" if big["ci95"]
                                                  else "") + ".")
