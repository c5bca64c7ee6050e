"""relate's answer is its table and one line of coverage; the step model's formula (twenty lines on a
terminal) and the columns' meaning come with --explain, or alone from `fabricbench relate --explain`."""

from pathlib import Path

from clirun import run_cli

UNITS = Path(__file__).resolve().parent.parent / "benchmarks/results/cpu-lab/study/units"
FILES = [UNITS / n for n in ("sweep_default.jsonl", "sweep_shaped_1gbit.jsonl", "train_ddp_default.jsonl",
                             "train_ddp_shaped_1gbit.jsonl")]


def test_the_formula_is_behind_explain(capsys):
    code, out, _ = run_cli(["relate", *FILES], capsys)
    assert code == 0 and "shaped:1gbit" in out and "coverage:" in out
    assert "T_step(f) = max(" not in out and "fabricbench relate --explain" in out.splitlines()[-1]
    code, explained, _ = run_cli(["relate", *FILES, "--explain"], capsys)
    assert code == 0 and "model: T_step(f) = max(" in explained and "residual = predicted / observed - 1" in explained
    code, alone, _ = run_cli(["relate", "--explain"], capsys)
    assert code == 0 and alone.startswith("model: T_step(f) = max(") and "shaped" not in alone
