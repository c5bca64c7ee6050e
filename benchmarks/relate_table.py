"""The README's relate table, from committed records: what `fabricbench relate` says about them, with the
95% intervals and the residual, in the fixed-width form the README shows.

    python3 benchmarks/relate_table.py                      # print the table
    python3 benchmarks/relate_table.py --write README.md    # replace the table between the README's markers
    python3 benchmarks/relate_table.py --check README.md    # exit 1 when the README's table differs
    python3 benchmarks/relate_table.py --write docs/relate.md   # the table in docs/relate.md
    python3 benchmarks/relate_table.py benchmarks/results/cpu-lab/relate-lab-strong/records.jsonl --before "" \
        --tag strong --write docs/relate.md                     # the strong fabrics' table there

The table ends with the held-out points' median and largest |residual| and the intervals' coverage
(fabricbench/relating/coverage.py); above it, the same line for the lab before (--before, default
relate-lab/before/records.jsonl, the records of the lab this one replaced) and for this one.

Records: benchmarks/results/cpu-lab/relate-lab/records.jsonl (benchmarks/relate_cpu_lab.py's output).
`--rule` picks relate's hidden-communication rule (fabricbench/relating/window.py): `default` (the overlap
window where communication has resources of its own; the CPU lab's 2 cores for 2 ranks do not, so the
reference rule), `reference` (no more hidden than the reference hid) or `window` (the overlap window
wherever the trace gives one), for the comparison docs/relate.md gives.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import fabricbench

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "benchmarks" / "results" / "cpu-lab" / "relate-lab" / "records.jsonl"
BEFORE = ROOT / "benchmarks" / "results" / "cpu-lab" / "relate-lab" / "before" / "records.jsonl"  # the lab before
END = "<!-- /relate-table -->"


def begin(tag: str = "") -> str:
    """The opening marker of a table in a document; a tag tells one table of a lab from another's."""
    return f"<!-- relate-table{' ' + tag if tag else ''}: benchmarks/relate_table.py -->"


def _ci(ci) -> str:
    return f"{ci[0]:.2f}-{ci[1]:.2f}" if ci else "-"


RULES = {"default": None, "reference": False, "window": True}  # relate(..., overlap_window=): window.py


def table(records: list[str], *, rule: str = "default") -> str:
    res = fabricbench.relate(records, overlap_window=RULES[rule])
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


def summary(res) -> str:
    """Median and largest |error| over the held-out rows, and the intervals' coverage (coverage.py)."""
    return res.coverage.summary()


def block(text: str, tag: str = "") -> str:
    return f"{begin(tag)}\n```\n{text}\n```\n{END}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("records", nargs="*", default=[str(RECORDS)])
    ap.add_argument("--rule", choices=tuple(RULES), default="default")
    ap.add_argument("--write", default=None, help="replace the table between the markers of this file")
    ap.add_argument("--check", default=None, help="exit 1 when this file's table differs from the records'")
    ap.add_argument("--tag", default="", help="the table between <!-- relate-table TAG: ... --> markers "
                    "(another lab's table in the same document)")
    ap.add_argument("--before", default=str(BEFORE) if BEFORE.exists() else None,
                    help="records of an earlier lab: its summary line goes first (default: relate-lab/before/)")
    a = ap.parse_args()
    text = table(a.records, rule=a.rule)
    if a.before:
        before = summary(fabricbench.relate([a.before], overlap_window=RULES[a.rule]))
        after = text.splitlines()[-2]
        shown = Path(a.before).resolve().relative_to(ROOT) if Path(a.before).resolve().is_relative_to(ROOT) else a.before
        text = f"before ({shown}):\n  {before}\nafter:\n  {after}\n\n{text}"
    target = a.write or a.check
    if target is None:
        print(text)
        return 0
    doc = Path(target).read_text()
    if begin(a.tag) not in doc:
        print(f"{target}: no {begin(a.tag)} ... {END} markers", file=sys.stderr)
        return 2
    pre, rest = doc.split(begin(a.tag), 1)
    _, post = rest.split(END, 1)
    new = pre + block(text, a.tag) + post
    if a.check:
        if new != doc:
            print(f"{target}: the relate table differs from `python3 benchmarks/relate_table.py`", file=sys.stderr)
            return 1
        return 0
    Path(target).write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
