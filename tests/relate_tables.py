"""The relate table that README.md and docs/relate.md show, made from lab records: what `fabricbench relate`
says about them, with the 95% intervals and the residual, in fixed-width form. One maker for the two that
need it: benchmarks/relate/table.py writes the documents' tables with it, and tests/lab/test_relate_lab.py checks
them with it against copies of the same records in tests/data/relate/."""

from __future__ import annotations

import fabricbench

END = "<!-- /relate-table -->"
RULES = {"default": None, "reference": False, "window": True}  # relate(..., overlap_window=): window.py


def begin(tag: str = "") -> str:
    """The opening marker of a table in a document; a tag tells one table of a lab from another's."""
    return f"<!-- relate-table{' ' + tag if tag else ''}: benchmarks/relate/table.py -->"


def _ci(ci) -> str:
    return f"{ci[0]:.2f}-{ci[1]:.2f}" if ci else "-"


def summary(res) -> str:
    """Median and largest |error| over the held-out rows, and the intervals' coverage (coverage.py)."""
    return res.coverage.summary()


def table(records: list[str], *, rule: str = "default") -> str:
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=records, overlap_window=RULES[rule]))
    head = (f"{'strategy':<9}{'fabric':<16}{'busbw':>8}{'T_comm ms':>10}{'C ms':>6}{'e':>6}{'obs ms':>8}{'pred ms':>8}"
            f"{'step obs [95% CI]':>24}{'step pred [95% CI]':>25}{'residual':>9}")
    lines = [head]
    for r in res.rows:
        drop = f"{1 / r.busbw_ratio:.2f}×" if r.busbw_ratio else "-"
        obs = f"{r.observed_slowdown:.2f}× [{_ci(r.observed_slowdown_ci95)}]" if r.observed_slowdown else "-"
        pred = f"{r.predicted_slowdown:.2f}× [{_ci(r.predicted_slowdown_ci95)}]"
        resid = f"{r.residual * 100:+.0f}%" if r.residual is not None else "-"
        lines.append(f"{r.strategy:<9}{r.fabric:<16}{drop:>8}{r.comm_time_s * 1e3:>10.3g}{r.link_credit_s * 1e3:>6.1f}"
                     f"{r.exposed_fraction:>6.2f}"
                     f"{(r.observed_step_s or 0) * 1e3:>8.0f}{r.predicted_step_s * 1e3:>8.0f}{obs:>24}{pred:>25}"
                     f"{resid:>9}")
    lines.append(summary(res))
    lines.append("busbw = N× slower than on the reference (trace-weighted); T_comm = swept price less C, the "
                 "link credit of a shaped fabric's token bucket; step = the step N× slower than on the reference; "
                 "residual = predicted / observed - 1; [lo-hi] = 95% interval")
    return "\n".join(lines)


def text(records: list[str], *, before: str | None = None, shown: str = "", rule: str = "default") -> str:
    """The table, after the summary line of the lab before it (its records `before`, named `shown`)."""
    out = table(records, rule=rule)
    if not before:
        return out
    was = summary(fabricbench.relate(fabricbench.RelateConfig(inputs=[before], overlap_window=RULES[rule])))
    return f"before ({shown or before}):\n  {was}\nafter:\n  {out.splitlines()[-2]}\n\n{out}"


def replaced(doc: str, body: str, tag: str = "") -> str | None:
    """`doc` with the table between its markers replaced by `body`; None when it has no such markers."""
    if begin(tag) not in doc:
        return None
    pre, rest = doc.split(begin(tag), 1)
    _, post = rest.split(END, 1)
    return f"{pre}{begin(tag)}\n```\n{body}\n```\n{END}{post}"
