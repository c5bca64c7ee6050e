"""report.md says each figure once, from one place (issue 37, item 9): "In short" and "Advice" give the same
samples/s for the strategy measured highest on each fabric, and whether a lead is noise is said by the
comparison that decides it, never by a fixed "±15%" beside an interval verdict.

Reads the committed CPU-lab study folders; builds their documents in memory (nothing is measured).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fabricbench.studying.report import build

ROOT = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "cpu-lab"
FOLDERS = [ROOT / "study", ROOT / "multinode-study"]


def _section(md: str, title: str) -> str:
    return md.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_in_short_and_advice_give_the_same_figures(folder):
    md = build(folder).markdown()
    short, advice = _section(md, "In short"), _section(md, "Advice")
    said = dict(re.findall(r"on \*\*([^*]+)\*\* [^\n]*? ([\d,.]+) samples/s", short))
    assert said, short
    rows = {cells[1]: cells[3] for line in advice.splitlines()
            if line.startswith("| ") and len(cells := [c.strip() for c in line.split("|")]) > 4}
    for fabric, figure in said.items():
        assert rows[fabric] == figure, (fabric, figure, rows)


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_the_advice_says_noise_from_the_comparison(folder):
    advice = _section(build(folder).markdown(), "Advice")
    assert "±15%" not in advice and "are noise" not in advice
    assert "verdict" in advice and re.search(r"undecided|faster|equivalent", advice)
