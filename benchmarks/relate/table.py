"""The README's relate table, from committed records: what `fabricbench relate` says about them, with the
95% intervals and the residual, in the fixed-width form the README shows (made by tests/relate_tables.py,
which tests/lab/test_relate_lab.py uses to check the documents against copies of these records).

    python3 benchmarks/relate/table.py                      # print the table
    python3 benchmarks/relate/table.py --write README.md    # replace the table between the README's markers
    python3 benchmarks/relate/table.py --check README.md    # exit 1 when the README's table differs
    python3 benchmarks/relate/table.py --write docs/relate.md   # the table in docs/relate.md
    python3 benchmarks/relate/table.py benchmarks/relate/results/cpu-lab/relate-lab-strong/records.jsonl --before "" \
        --tag strong --write docs/relate.md                     # the strong fabrics' table there

The table ends with the held-out points' median and largest |residual| and the intervals' coverage
(fabricbench/relating/coverage.py); above it, the same line for the lab before (--before, default
relate-lab/before/records.jsonl, the records of the lab this one replaced) and for this one.

Records: benchmarks/relate/results/cpu-lab/relate-lab/records.jsonl (benchmarks/relate/cpu_lab.py's output).
`--rule` picks relate's hidden-communication rule (fabricbench/relating/window.py): `default` (the overlap
window where communication has resources of its own; the CPU lab's 2 cores for 2 ranks do not, so the
reference rule), `reference` (no more hidden than the reference hid) or `window` (the overlap window
wherever the trace gives one), for the comparison docs/relate.md gives.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from relate_tables import RULES, begin, replaced, text  # noqa: E402  (the maker the docs test shares)

RECORDS = ROOT / "benchmarks" / "relate" / "results" / "cpu-lab" / "relate-lab" / "records.jsonl"
BEFORE = ROOT / "benchmarks" / "relate" / "results" / "cpu-lab" / "relate-lab" / "before" / "records.jsonl"  # the lab before


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
    shown = ""
    if a.before:
        b = Path(a.before).resolve()
        shown = str(b.relative_to(ROOT)) if b.is_relative_to(ROOT) else a.before
    body = text(a.records, before=a.before, shown=shown, rule=a.rule)
    target = a.write or a.check
    if target is None:
        print(body)
        return 0
    doc = Path(target).read_text()
    new = replaced(doc, body, a.tag)
    if new is None:
        print(f"{target}: no {begin(a.tag)} ... <!-- /relate-table --> markers", file=sys.stderr)
        return 2
    if a.check:
        if new != doc:
            print(f"{target}: the relate table differs from `python3 benchmarks/relate/table.py`", file=sys.stderr)
            return 1
        return 0
    Path(target).write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
