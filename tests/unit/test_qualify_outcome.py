"""A qualification in which no check measured anything is not a pass: outcome "nothing
measured", exit status 5, in the library (fabricbench/qualifying/verdict.py) and on the command line.

    fabricbench qualify --spec builtin:h200-sxm-8 --from train.jsonl     (every check waived: exit 5)
"""

from __future__ import annotations

import json

import pytest

import fabricbench
import fabricbench.gpus
from fabricbench.qualifying.verdict import (EXIT_NOTHING_MEASURED, NOTHING_MEASURED, at_least, combine, exit_code,
                                            outcome, waived)
from clirun import refused, run_cli, run_cli_captured
from roots import DATA

TRAIN = DATA / "study/cpu-lab/units/train_ddp_default.jsonl"


def _waived(name: str):
    return combine(name, "p2p", [waived("peer copy", "no GPU pair here")])


def _passed(name: str):
    return combine(name, "collective", [at_least("busbw", 10.0, 5.0, unit="GB/s")])


@pytest.mark.parametrize("verdicts, word, code", [
    ([], NOTHING_MEASURED, EXIT_NOTHING_MEASURED),
    ([_waived("a"), _waived("b")], NOTHING_MEASURED, EXIT_NOTHING_MEASURED),
    ([_waived("a"), _passed("b")], "passed", 0),
    ([_passed("b")], "passed", 0),
])
def test_outcome_and_exit(verdicts, word, code):
    assert outcome(verdicts) == word and exit_code(verdicts) == code
    assert EXIT_NOTHING_MEASURED not in (0, 1, 2, 3, 4)  # its own status, not a pass nor bad input


def test_library_all_waived_is_not_a_pass(tmp_path):
    res = fabricbench.qualify(fabricbench.QualifyConfig(spec="builtin:h200-sxm-8", records_from=str(TRAIN),
                                                        out=str(tmp_path / "q")))
    assert [v.status for v in res.verdicts] == ["waived"] * len(res.verdicts) and res.verdicts
    assert res.outcome == NOTHING_MEASURED and res.exit_code == 5
    assert res.to_dict()["outcome"] == NOTHING_MEASURED and res.to_dict()["exit_code"] == 5
    assert "no check measured anything" in (tmp_path / "q" / "report.md").read_text()


def test_cli_all_waived_exits_5():
    code, out, _ = run_cli_captured(["qualify", "--spec", "builtin:h200-sxm-8", "--from", TRAIN])
    assert code == 5
    assert "NOTHING MEASURED (exit 5): 0 critical, 0 unknown, 0 warning, 0 pass, 7 waived" in out


@pytest.mark.parametrize("level", [1, 2, 3])
def test_library_dry_run_is_the_plan_the_cli_prints(level):
    """fabricbench.qualify_plan(config) returns the plan; the CLI's --dry-run prints its lines and its dict."""
    import json

    plan = fabricbench.qualify_plan(fabricbench.QualifyConfig(spec="builtin:h200-sxm-8", level=level))
    assert plan.level == level and plan.checks and len(plan.lines()) == len(plan.checks) + 2
    assert plan.lines()[-1].startswith("estimate: ~") and "nothing measured" in plan.lines()[0]
    for args, expect in ((["--dry-run"], "\n".join(plan.lines()) + "\n"),
                         (["--dry-run", "--json"], json.dumps(plan.to_dict(), indent=2) + "\n")):
        code, out, err = run_cli_captured(["qualify", "--spec", "builtin:h200-sxm-8", "--level", level, *args])
        assert code == 0, err
        assert out == expect


def test_a_gpu_spec_with_no_gpu_is_one_line_and_exit_5(monkeypatch, tmp_path, capsys):
    # not 7 unknowns and 7 lines of "drain the node": the fact once, and what to run instead
    from fabricbench.qualifying.verdict import CPU_SPEC, NO_GPU

    monkeypatch.setattr(fabricbench.gpus, "visible_gpu_count", lambda: 0)
    code, out, err = run_cli(["qualify", "--spec", "builtin:h200-sxm-8", "--out", tmp_path / "q"], capsys)
    assert code == EXIT_NOTHING_MEASURED and len(out.splitlines()) == 1, out
    assert out.startswith(NO_GPU) and f"--spec {CPU_SPEC}" in out and "drain" not in out + err
    assert "check " not in err  # no per-check line for checks that cannot run
    doc = json.loads((tmp_path / "q" / "verdicts.json").read_text())
    assert [v["reason"] for v in doc["verdicts"]] == [NO_GPU] * 7 and doc["severities"]["unknown"] == 0


def test_the_cpu_lab_spec_is_builtin_and_runs_on_cpu(capsys):
    from fabricbench.qualifying.spec import load_spec

    spec = load_spec("builtin:cpu-lab")
    assert spec.run.cpu_ranks and spec.run.backend == "gloo" and spec.checks
    code, out, _ = run_cli(["qualify", "--list-specs"], capsys)
    assert code == 0 and "cpu-lab" in out
    code, out, _ = run_cli(["qualify", "--spec", "builtin:cpu-lab", "--dry-run"], capsys)
    assert code == 0 and out.splitlines()[-1].startswith("estimate: ~"), out


def test_a_bare_qualify_names_the_cpu_lab(capsys):
    from fabricbench.qualifying.verdict import CPU_SPEC

    assert f"--spec {CPU_SPEC} needs no GPU" in refused(["qualify"], capsys)


@pytest.mark.slow
def test_the_cpu_lab_spec_passes_on_a_cpu(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(fabricbench.gpus, "visible_gpu_count", lambda: 0)
    code, out, err = run_cli(["qualify", "--spec", "builtin:cpu-lab", "--out", tmp_path / "q"], capsys)
    assert code == 0 and "PASSED (exit 0)" in out and "2 pass" in out, (out, err)
