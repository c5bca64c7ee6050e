"""`fabricbench report DIR --json` gives `comparisons` on every committed study folder, old ones
included: their rounds pair by the study unit's name ("train ddp @ default #2"); runs that cannot pair
fall back to Welch and say `paired: false`."""

from __future__ import annotations


import pytest

from fabricbench.results.schema import TrainResult
from fabricbench.studying import records as study_records
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.report import summary
from fabricbench.studying.report.common import question_summary
from roots import DATA

STUDIES = DATA / "study"
FOLDERS = sorted(p.parent for p in STUDIES.rglob("results.jsonl")
                 if '"kind": "plan"' in p.read_text()[:20000] and '"study":' in p.read_text()[:20000])
FIELDS = {"a", "b", "fabric", "metric", "ratio", "ci95", "verdict", "rounds", "paired", "method"}


def test_the_committed_study_folders_are_found():
    names = {str(p.relative_to(STUDIES)) for p in FOLDERS}
    assert {"cpu-lab", "multinode", "h200-mistral-1b", "h200-repeat-1"} <= names


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: str(p.relative_to(STUDIES)))
def test_every_committed_study_gives_comparisons(folder):
    sr = study_records.load(folder)
    stored = StudyConfig.from_dict(sr.plan["study"]["config"])
    c = stored.labelled()
    summ = question_summary(sr.typed(TrainResult), c)
    figs = {(f["strategy"], f["fabric"]) for f in summ["figures"]}
    strategies = {s for s, _ in figs}
    fabrics = {f for _, f in figs}
    n = sum(len([s for s in strategies if (s, f) in figs]) * (len([s for s in strategies if (s, f) in figs]) - 1) // 2
            for f in fabrics) + sum(1 for s, f in figs if f != c.fabrics[0] and (s, c.fabrics[0]) in figs)
    assert len(summ["comparisons"]) == n
    for cm in summ["comparisons"]:
        assert FIELDS <= set(cm) and cm["verdict"] in ("faster", "equivalent", "undecided")
        assert cm["text"] and "within noise" not in cm["text"]
        if cm["ci95"] is not None:
            assert cm["ci95"][0] <= cm["ratio"] <= cm["ci95"][1]
    # rankings come from the comparisons: two strategies in different groups only where one says faster
    faster = {(cm["fabric"], frozenset((cm["a"], cm["b"]))) for cm in summ["comparisons"] if cm["verdict"] == "faster"}
    for fab, groups in summ["rankings"].items():
        for g, h in zip(groups, groups[1:]):
            assert (fab, frozenset((g[-1], h[0]))) in faster


def test_report_json_of_the_mistral_study_pairs_nothing_it_cannot():
    """Five strategies, one run each: every comparison undecided, no interval, no order."""
    summ = summary(STUDIES / "h200-mistral-1b")
    assert len(summ["comparisons"]) == 10
    assert {c["verdict"] for c in summ["comparisons"]} == {"undecided"}
    assert all(c["ci95"] is None and c["note"] == "one run each: no interval" for c in summ["comparisons"])
    assert summ["rankings"]["default"] == [["ddp", "zero1", "fsdp", "zero2", "zero3"]]


@pytest.mark.parametrize("folder", FOLDERS[:3], ids=lambda p: str(p.relative_to(STUDIES)))
def test_the_answers_read_at_80_columns(folder):
    from fabricbench.training.repeats import verdict_lines

    sr = study_records.load(folder)
    stored = StudyConfig.from_dict(sr.plan["study"]["config"])
    summ = question_summary(sr.typed(TrainResult), stored.labelled())
    lines = verdict_lines(summ["comparisons"])
    assert len(lines) >= len(summ["comparisons"]) and all(len(line) <= 80 for line in lines)
