"""relate's answer is its table and one line of coverage; the step model's formula (twenty lines on a
terminal) and the columns' meaning come with --explain, or alone from `fabricbench relate --explain`."""


from clirun import run_cli
from roots import DATA, ROOT

UNITS = DATA / "study/cpu-lab/units"
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


def test_the_relate_page_is_a_guide_that_answers_first():
    # a guide, not a lab log: no lab round's title up front, no lab history before the recipe that works
    import re

    page = (ROOT / "docs" / "relate.md").read_text()
    heads = re.findall(r"^## (.+)$", page, flags=re.M)
    assert heads[:3] == ["On a CPU, no GPU", "On GPUs", "Reading the answer"], heads
    intro = page.split("\n## ", 1)[0]
    assert "answers one question" in intro and not re.search(r"\bround \d", page) and "r12" not in page
    first_code = re.search(r"\n    (fabricbench .+?)\n\n", page, flags=re.S).group(1)
    assert first_code.startswith("fabricbench study --device cpu") and "fabricbench relate lab/units/*.jsonl" in first_code
    assert "fabricbench relate --explain" in page and "T_step(f) = max(" not in page  # the formula: --explain
    assert len(page.splitlines()) < 250
