"""The study report's bandwidth sections: busbw against size per fabric, and scaling inside and across
NVLink islands."""

from __future__ import annotations

from fabricbench.reporting.analysis import fmt_ratio, slower
from fabricbench.reporting.document import Document
from fabricbench.reporting.plot import busbw_vs_count
from fabricbench.results.schema import CollectiveResult
from fabricbench.results.status import Status
from fabricbench.studying import figures
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.report.common import Figs, size_text


def _metric(colls: list[CollectiveResult]) -> tuple[str, str | None]:
    """The CollectiveResult field to plot (busbw_gbps, or algbw_gbps when every record is one rank) and why."""
    if colls and all((r.nranks or 0) <= 1 for r in colls):
        return "algbw_gbps", "one rank: the busbw factor 2(n−1)/n is 0, so algbw (S / t) is shown instead"
    return "busbw_gbps", None


def busbw_section(doc: Document, c: StudyConfig, colls: list[CollectiveResult], figs: Figs,
           imported: list[CollectiveResult] = ()) -> None:
    s = doc.section("Bus bandwidth against size, per fabric",
                    intro="busbw = S / t × the op's factor (all-reduce 2(n−1)/n; all-gather, reduce-scatter "
                          "(n−1)/n), nccl-tests' definition: comparable across GPU counts. Sizes cover what the "
                          "strategies sent (from their traces) or a default grid.")
    ok = [r for r in colls if r.status == Status.OK]
    if not ok:
        s.text("No sweep finished; nothing to show (see “Reproduce”).")
        return
    ok += [r for r in imported if r.status == Status.OK]
    metric, note = _metric(ok)
    dtypes = sorted({r.dtype for r in ok})
    series: dict[str, dict[str, list]] = {}
    for r in ok:
        label = r.fabric + (f" ({r.dtype})" if len(dtypes) > 1 else "")
        series.setdefault(r.op, {}).setdefault(label, []).append((r.bytes, getattr(r, metric)))
    p = figs.path("busbw")
    figures.busbw_grid(series, p, title=f"{metric.replace('_gbps', '')} against size, per fabric (log-log)",
                       ylabel=f"{metric.replace('_gbps', '')} (GB/s)")
    s.figure(p, f"{metric.replace('_gbps', '')} against message size, one panel per collective, one line per fabric"
                + (f" ({note})" if note else ""))
    fabs = [f for f in c.fabrics if any(r.fabric == f for r in ok)]
    fabs += list(dict.fromkeys(r.fabric for r in imported if r in ok))
    # one small table per op (rows: sizes; columns: fabrics, then each one's ratio to the first): the
    # numbers under each panel of the figure, narrow enough to read without scrolling
    val = {(r.op, r.dtype, r.bytes, r.fabric): getattr(r, metric) for r in ok}
    short = metric.replace("_gbps", "")
    for op in dict.fromkeys(r.op for r in ok):
        rows = []
        for dt, size in sorted({(r.dtype, r.bytes) for r in ok if r.op == op}):
            vs = [val.get((op, dt, size, f)) for f in fabs]
            rows.append([size_text(size), dt, *vs, *[fmt_ratio(slower(vs[0], v)) for v in vs[1:]]])
        s.table(["size", "dtype", *[f"{f} GB/s" for f in fabs], *[f"{f} N× slower than {fabs[0]}" for f in fabs[1:]]], rows,
                caption=f"{op}: {short} per size and fabric (median over the timed iterations)")
    if note:
        s.text(note + ".")


# -- scaling --------------------------------------------------------------------------------------------------
def scaling_section(doc: Document, c: StudyConfig, scaling: list[CollectiveResult], machine, figs: Figs) -> None:
    s = doc.section("Scaling inside and across NVLink islands",
                    intro="busbw of the largest all-reduce for GPU sets of each count, inside one island and "
                          "across islands: what placement does to a job.")
    ok = [r for r in scaling if r.status == Status.OK]
    if not ok:
        if c.device == "cpu":
            why = "CPU ranks all share one host and one loopback: there are no islands to compare."
        elif len(c.gpus) < 3:
            why = f"{len(c.gpus)} GPU(s): no set of several GPUs to place differently."
        elif (machine or {}).get("topology", {}) and (machine["topology"].get("uniform")):
            why = "every GPU pair has the same link (uniform, e.g. NVSwitch): any set of a given size is alike."
        else:
            why = "the scaling unit did not finish (see “Reproduce”)."
        s.text("Not run: " + why)
        return
    series: dict[str, dict[str, list]] = {}
    rows = []
    # extra.count, .placement, .slowest_link: what the scaling command (topology/placement.py) tags each run with
    for r in sorted(ok, key=lambda r: (r.extra.get("count", 0), r.extra.get("placement", ""))):
        ex = r.extra
        series.setdefault(f"all_reduce {size_text(r.bytes)}", {}).setdefault(ex.get("placement", "?"), []).append(
            (ex.get("count", r.nranks), r.busbw_gbps))
        rows.append([ex.get("count", r.nranks), ex.get("placement"), ",".join(map(str, ex.get("placement_gpus") or r.gpus or [])),
                     ex.get("slowest_link"), size_text(r.bytes), r.busbw_gbps, r.transport])
    p = figs.path("scaling")

    busbw_vs_count(series, p, title="busbw against GPU count, per placement")
    s.figure(p, "busbw of the largest all-reduce against GPU count: inside one island and across islands")
    s.table(["GPUs", "placement", "set", "slowest hop", "size", "busbw GB/s", "transport"], rows)
