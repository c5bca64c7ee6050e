"""report.md says each figure once, from one place: "In short", "Advice" and the terminal's answer name the
strategy to run on each fabric from the same paired comparison (a winner only where it decided one, with
the same samples/s), and whether a lead is noise is said by the comparison that decides it, never by a
fixed "±15%" beside an interval verdict.

Reads the committed CPU-lab study folders; builds their documents in memory (nothing is measured).
"""

from __future__ import annotations

import re

import pytest

from fabricbench.studying.report import build
from roots import DATA

STUDIES = DATA / "study"
FOLDERS = [STUDIES / "cpu-lab", STUDIES / "multinode"]


def _section(md: str, title: str) -> str:
    return md.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_in_short_advice_and_the_answer_come_from_one_comparison(folder):
    # the study said "undecided, ddp/fsdp +19.9%" on the terminal while In short said "fsdp measured highest"
    from fabricbench.studying.report import answer_lines, summary

    md = build(folder).markdown()
    short, advice = _section(md, "In short"), _section(md, "Advice")
    answer = "\n".join(answer_lines(folder, width=10_000))
    assert "measured highest" not in md
    rows = {cells[1]: cells[2:5] for line in advice.splitlines()
            if line.startswith("| ") and len(cells := [c.strip() for c in line.split("|")]) > 5}
    comps = [cm for cm in summary(folder)["comparisons"] if cm.get("fabric")]
    assert comps
    for cm in comps:
        f = cm["fabric"]
        assert cm["text"] in answer and cm["text"] in short  # the same sentence in both
        run, medians, verdict = rows[f]
        assert cm["text"].removeprefix(f"on {f}: ") in verdict
        if cm["verdict"] == "faster":
            figure = re.search(rf"on \*\*{re.escape(f)}\*\* the fastest: \*\*{cm['a']}\*\*, ([\d,.]+) samples/s",
                               short).group(1)
            assert run == cm["a"] and f"{cm['a']} {figure}" in medians  # one figure, one place
        else:
            assert run == ("undecided" if cm["verdict"] == "undecided" else f"either ({cm['a']} or {cm['b']})")
            assert f"on **{f}** the fastest" not in short


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_the_advice_says_noise_from_the_comparison(folder):
    advice = _section(build(folder).markdown(), "Advice")
    assert "±15%" not in advice and "are noise" not in advice
    assert "verdict" in advice and re.search(r"undecided|faster|equivalent", advice)


def test_the_answer_ends_with_relates_line_and_the_reference_is_itself():
    from fabricbench.relating.format import cells
    from fabricbench.studying.report import answer_lines, summary

    folder = STUDIES / "cpu-lab"
    answer = answer_lines(folder, width=10_000)
    rel = [r for r in summary(folder)["relate"] if r["fabric"] != "default"]
    assert rel and len([ln for ln in answer if ln.startswith("relate: ")]) == len(rel)
    for r in rel:  # each fabric's observed slowdown against relate's prediction, judged as the report judges it
        assert any(ln.startswith(f"relate: {r['strategy']} on {r['fabric']}: step") and ln.endswith(r["judged"])
                   for ln in answer), r
    assert not any(ln.startswith("relate: ") and " on default:" in ln for ln in answer)
    relate = _section(build(folder).markdown(), "Bandwidth against slowdown (relate)")
    ref_rows = [ln for ln in relate.splitlines() if ln.startswith("| ddp | default") or ln.startswith("| fsdp | default")]
    assert ref_rows and all("1× (itself)" in ln and "1.00×" not in ln for ln in ref_rows)  # no "1.00× [0.15-6.81]"
    import fabricbench

    units = [str(p) for p in sorted((folder / "units").glob("*ddp_default*.jsonl"))]
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=units + [str(folder / "units/sweep_default.jsonl")],
                                                      reference="default"))
    (row,) = [r for r in res.rows if r.fabric == "default"]
    assert cells(row)[8:11] == ["1× (itself)", "-", "-"]  # relate's own table: no interval on itself
