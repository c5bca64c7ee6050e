"""The relate table: one row per strategy × fabric, observed beside predicted.

    fabricbench relate sweeps.jsonl train.jsonl
"""

from __future__ import annotations

from typing import Any

from fabricbench.relating.rows import REFERENCE
from fabricbench.relating.curves import size_3sig
from fabricbench.reporting import table as tables
from fabricbench.reporting.analysis import fmt_ratio

COLS = (
    tables.Col("strategy", justify="left", key=True),
    tables.Col("fabric", justify="left", key=True),
    tables.Col("busbw slower", "bw×", "bw× = busbw N× slower"),
    tables.Col("comm/step", "comm", "comm = bytes sent per step"),
    tables.Col("T_comm (ms)", "Tc", "Tc = comm time per step (ms)"),
    tables.Col("e", legend="e = exposed fraction of comm"),
    tables.Col("step obs (ms)", "obs", "obs/pred = step time observed/predicted (ms)"),
    tables.Col("step pred (ms)", "pred", "-"),
    tables.Col("step slower obs", "obs×", "obs×/pred× = step N× slower, observed/predicted"),
    tables.Col("step slower pred", "pred×", "-"),
    tables.Col("residual", "resid"),
    tables.Col("flags", justify="left", prose=True),
)
COLUMNS = tuple(c.name for c in COLS)


def _ms(v: float | None) -> str:
    if v is None:
        return "-"
    ms = v * 1e3
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"


_x = fmt_ratio  # "N× slower", the one direction every ratio is printed in


def _xci(v: float | None, ci: Any) -> str:
    """A slowdown with its 95% interval: "1.62x [1.48-1.80]"."""
    if v is None:
        return "-"
    return _x(v) + (f" [{ci[0]:.2f}-{ci[1]:.2f}]" if ci else "")


def judged(row: Any) -> str:
    """A prediction judged against the observed slowdown with both 95% intervals (the terms of
    statistics/comparison.py): "within its interval" when the two intervals meet, else "off by X% beyond
    it", X the gap between them over the observed bound (a point stands in for a missing interval)."""
    obs, pred = row.observed_slowdown, row.predicted_slowdown
    if is_reference(row):
        return REFERENCE_JUDGED
    if obs is None or pred is None:
        return "not judged: nothing observed" if pred is not None else "not judged: nothing predicted"
    o_lo, o_hi = row.observed_slowdown_ci95 or (obs, obs)
    p_lo, p_hi = row.predicted_slowdown_ci95 or (pred, pred)
    if p_lo > o_hi:
        return f"off by {(p_lo / o_hi - 1) * 100:.0f}% beyond it (predicted slower)"
    if p_hi < o_lo:
        return f"off by {(1 - p_hi / o_lo) * 100:.0f}% beyond it (predicted faster)"
    return "within its interval"


REFERENCE_JUDGED = "the reference itself"  # judged(): nothing to judge on the reference's own row


def is_reference(row: Any) -> bool:
    """The reference fabric's own row: 1× by definition, its interval and its judgment say nothing."""
    return bool(row.flags) and row.flags[0] == REFERENCE


def cells(row: Any) -> list[str]:
    """A RelateRow as the table's text cells; the reference's own row says "1× (itself)" with no interval
    (a ratio of a fabric with itself would show its runs' spread as "1.00× [0.15-6.81]")."""
    if is_reference(row):
        return [row.strategy, row.fabric, "1× (itself)", size_3sig(row.comm_bytes_per_step), _ms(row.comm_time_s),
                f"{row.exposed_fraction:.2f}", _ms(row.observed_step_s), "-", "1× (itself)", "-", "-",
                ", ".join(row.flags)]
    drop = 1.0 / row.busbw_ratio if row.busbw_ratio else None
    residual = "-" if row.residual is None else f"{row.residual * 100:+.0f}%".replace("-0%", "+0%")
    return [row.strategy, row.fabric, _x(drop), size_3sig(row.comm_bytes_per_step), _ms(row.comm_time_s),
            f"{row.exposed_fraction:.2f}", _ms(row.observed_step_s), _ms(row.predicted_step_s),
            _xci(row.observed_slowdown, row.observed_slowdown_ci95),
            _xci(row.predicted_slowdown, row.predicted_slowdown_ci95), residual,
            ", ".join([judged(row), *row.flags]) if row.observed_slowdown is not None else ", ".join(row.flags)]


LEGEND = ("busbw N× slower = trace-weighted busbw on the reference / on the fabric; step N× slower = the "
          "fabric's step / the reference's; residual = predicted / observed - 1; [lo-hi] = 95% interval (runs in "
          "fresh processes, the sweeps' spread); a prediction is \"within its interval\" when the two "
          "intervals meet, else \"off by X% beyond it\"")


def explain_model(con=None, formula: str | None = None) -> None:
    """The step model's formula and the columns' meaning (`relate --explain`): what a run prints only
    when asked, so that its answer is the table and one line of coverage."""
    from fabricbench.relating.model import FORMULA

    con = con or tables.console()
    con.print(f"model: {formula or FORMULA}", markup=False)
    con.print(LEGEND, markup=False)


def render(result: Any, con=None, *, explain: bool = False) -> None:
    """Print result (a RelateResult) as one table per workload, its coverage under it; the formula and
    the columns' meaning with `explain`, else a pointer to them."""
    con = con or tables.console()
    groups: dict[tuple, list] = {}
    for row in result.rows:
        groups.setdefault((row.model, row.nranks, row.precision), []).append(row)
    for (model, nranks, precision), rows in groups.items():
        tables.render(con, f"{model}, {nranks} ranks, {precision}: against reference {result.reference}",
                      COLS, [cells(row) for row in rows])
    if explain:
        explain_model(con, result.formula)
    con.print(result.coverage.summary(), markup=False)
    if not explain:
        con.print("the step model and what each column means: fabricbench relate --explain", markup=False)
    for line in calls_lines(result.calls):
        con.print(line, markup=False)


def calls_lines(found: list[dict[str, Any]]) -> list[str]:
    """The reference runs' own calls against the sweep (relating/calls.py), one line per strategy and op."""
    out = []
    for f in found:
        for op, d in f["by_op"].items():
            if d.get("ratio") is None:
                continue
            used = "calibrated" if d["stable"] else "not stable across repeats: not calibrated"
            out.append(f"own calls: {f['strategy']} ({f['model']}, {f['nranks']} ranks) on {f['reference']}: {op} "
                       f"{d['ratio']:.2f}x the sweep's price [{d['lo']:.2f}-{d['hi']:.2f}] over {d['calls']} calls, "
                       f"{used}")
    return out
