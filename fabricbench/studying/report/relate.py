"""The study report's section "Bandwidth against slowdown (relate)": predicted against observed slowdown."""

from __future__ import annotations

from fabricbench.relating.format import is_reference, judged
from fabricbench.relating.plot import plot_relate
from fabricbench.reporting.analysis import fmt_ratio
from fabricbench.reporting.document import Document
from fabricbench.studying.report.common import Figs


def relate_section(doc: Document, relate, figs: Figs) -> None:
    s = doc.section("Bandwidth against slowdown (relate)",
                    intro="Does a slower busbw explain a slower step? The model is calibrated on the "
                          "reference fabric alone and predicts every other fabric from its sweep and the "
                          "strategy's trace.")
    if relate is None:
        s.text("Not computed: it needs train runs and sweeps (see “Reproduce”).")
        return
    if isinstance(relate, str):
        s.text(f"Not computed: {relate}")
        return
    if relate.rows:
        p = figs.path("relate")

        plot_relate(relate, p)
        s.figure(p, "step N× slower against busbw N× slower at the sizes each strategy sends: filled observed, "
                    "hollow predicted; y = x is a step made only of communication")
    s.code(_split_top(relate.formula))
    rows = [[r.strategy, r.fabric, fmt_ratio(1 / r.busbw_ratio) if r.busbw_ratio else None, r.observed_step_s * 1e3 if r.observed_step_s else None,
             r.predicted_step_s * 1e3 if r.predicted_step_s else None, fmt_ratio(r.observed_slowdown),
             fmt_ratio(r.predicted_slowdown),
             r.residual, judged(r), r.exposed_fraction, ", ".join(r.flags) or "-"]
            if not is_reference(r) else  # 1× by definition: no prediction, residual or judgment to show
            [r.strategy, r.fabric, "1× (itself)", r.observed_step_s * 1e3 if r.observed_step_s else None, None,
             "1× (itself)", None, None, judged(r), r.exposed_fraction, ", ".join(r.flags)]
            for r in relate.rows]
    if rows:
        s.table(["strategy", "fabric", "busbw N× slower", "obs. step ms", "pred. step ms", "obs. step N× slower",
                 "pred. step N× slower", "residual", "prediction judged", "e", "flags"], rows,
                caption=f"reference fabric: {relate.reference}; busbw N× slower = busbw on the reference ÷ here "
                        f"at the sizes the strategy sends; step N× slower = step here ÷ on the reference; "
                        f"residual = predicted ÷ observed − 1; judged with both 95% intervals")
    else:
        s.text(f"No strategy could be related (reference fabric {relate.reference}):")
    if relate.problems:
        s.bullets(relate.problems)


def _split_top(text: str) -> str:
    """One line per top-level ', '-separated part (commas inside parentheses stay)."""
    parts, depth, cur = [], 0, ""
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0 and text[i + 1:i + 2] == " ":
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    parts.append(cur)
    return ",\n".join(p.strip() for p in parts)
