"""`study --resume --max-repeats N` adds the rounds an undecided comparison asked for, and nothing else.

    fabricbench study --device cpu --nprocs 2 --strategies ddp,fsdp --model tiny-mistral --out lab
    ... undecided, ddp/fsdp +19.9% [...] (5 paired rounds; about 15 rounds would settle it)
    fabricbench study --out lab --resume --max-repeats 15     (was refused: "a study with other settings")
"""

import json
import shutil

import pytest

from clirun import run_cli
from roots import DATA

LAB = DATA / "study/cpu-lab"


@pytest.fixture()
def lab(tmp_path):
    out = tmp_path / "lab"
    shutil.copytree(LAB, out, ignore=shutil.ignore_patterns("report*"))
    return out


def _cap(out) -> int:
    """The stored study's max_repeats (its default where the plan predates the field)."""
    from fabricbench.studying.config import StudyConfig

    plans = [json.loads(ln) for ln in (out / "results.jsonl").read_text().splitlines() if '"plan"' in ln]
    return StudyConfig.from_dict([p["study"]["config"] for p in plans if p.get("kind") == "plan"][-1]).max_repeats


def test_resume_with_more_rounds_plans_them_over_the_stored_settings(lab, capsys):
    more = _cap(lab) + 10
    code, out, err = run_cli(["study", "--out", lab, "--resume", "--max-repeats", more, "--dry-run"], capsys)
    assert code == 0, err
    assert f"#{more}" in out and f"#{more + 1}" not in out  # the new rounds, up to the raised cap
    assert "done, skipped" in out  # what was recorded stays recorded


def test_resume_over_the_stored_settings_changes_only_what_measures_nothing(lab, capsys):
    code, _, err = run_cli(["study", "--out", lab, "--resume", "--max-repeats", _cap(lab) - 1,
                            "--dry-run"], capsys)
    assert code == 2 and "other settings (max_repeats:" in err  # fewer rounds would drop some already run


def test_the_answer_says_how_to_add_the_rounds_asked_for():
    from fabricbench.studying.report.assemble import _more_rounds

    undecided = {"verdict": "undecided", "rounds": 5, "rounds_needed": 15}
    (line,) = _more_rounds("lab", [undecided, {"verdict": "faster", "rounds": 5}], 200)
    assert line.startswith("more rounds: fabricbench study --out lab --resume --max-repeats 15")
    assert _more_rounds("lab", [{**undecided, "rounds_needed": 4}], 200) == []  # had them already
    assert _more_rounds("lab", [{**undecided, "rounds_needed": None}], 200) == []  # nothing to ask for
