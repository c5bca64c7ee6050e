"""qualify --from: an imported file is judged on what it holds.

    fabricbench import gb200_allreduce.log --out imported.jsonl
    fabricbench qualify --spec builtin:h100-sxm-8 --from imported.jsonl

nccl-tests prints one mean per size, so the file carries no run-to-run spread: the cv criterion is "not
measured by this source", not an error that ends the run UNKNOWN. The file stops at 8G where the spec's
floor is at 16G: the floor is read at 8G and says so; a miss there is unknown, never critical.
"""


import pytest

from fabricbench.qualifying.api import qualify
from fabricbench.qualifying.config import QualifyConfig
from fabricbench.qualifying.codes import CODES
from fabricbench.results.status import Severity, Status
from roots import DATA
from clirun import run_cli, run_cli_captured

GB200 = DATA / "imports" / "nccl_tests_gb200_nvl72.txt"  # 512M-8G, 834.57 GB/s at 8G

SPEC = """
[spec]
name = "offline"
[[check]]
name = "ar"
kind = "collective"
op = "all_reduce"
sizes = {sizes}
min_busbw_gbps = {floor}
max_latency_us = 50
max_cv = 0.2
"""


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("imp") / "imported.jsonl"
    code, _, err = run_cli_captured(["import", GB200, "--out", out])
    assert code == 0, err
    return out


def _judge(imported, tmp_path, *, sizes, floor):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(sizes=sizes, floor=floor))
    res = qualify(QualifyConfig(spec=str(spec), records_from=str(imported)))
    (v,) = res.verdicts
    return res, v, {i.criterion: i for i in v.items}


def test_a_builtin_spec_passes_on_what_an_nccl_tests_file_holds(imported):
    res = qualify(QualifyConfig(spec="builtin:h100-sxm-8", records_from=str(imported)))
    v = {x.check: x for x in res.verdicts}["allreduce_8gpu"]
    items = {i.criterion: i for i in v.items}
    assert res.exit_code == 0 and v.status == Status.PASS  # it was UNKNOWN (exit 3) on the cv alone
    assert items["busbw"].measured == 834.57 and items["busbw"].subject == "all ranks, 16G (read at 8G)"
    assert items["cv"].status == Status.WAIVED and items["cv"].reason.startswith("not measured by this source")
    assert "nccl-tests" in items["cv"].reason
    assert items["latency"].status == Status.WAIVED and "no all_reduce record at 8B" in items["latency"].reason


def test_the_sizes_the_file_holds_are_judged_there(imported, tmp_path):
    res, v, items = _judge(imported, tmp_path, sizes='["512M", "8G"]', floor=800)
    assert items["busbw"].status == Status.PASS and items["busbw"].subject == "all ranks, 8G"  # no "read at"
    assert items["latency"].measured == 1806.7 and items["latency"].status == Status.FAIL  # a real figure
    assert items["cv"].status == Status.WAIVED and res.exit_code == 4  # latency is a warning criterion


def test_a_floor_missed_at_a_smaller_size_is_unknown_not_critical(imported, tmp_path):
    res, v, items = _judge(imported, tmp_path, sizes='["16G"]', floor=900)
    assert items["busbw"].status == Status.ERROR and items["busbw"].measured == 834.57
    assert "below the floor at 8G, which says nothing of 16G" in items["busbw"].reason
    assert v.severity == Severity.UNKNOWN and res.exit_code == 3


def test_advice_for_a_file_sends_no_one_to_drain_a_node(imported, tmp_path):
    res, v, items = _judge(imported, tmp_path, sizes='["8G"]', floor=900)
    assert v.severity == Severity.CRITICAL and v.code == "FB_COLL_BUSBW_LOW"  # the file's figure missed
    assert "drain" not in v.action and "nvidia-smi" not in v.action
    assert v.action.startswith(f"judged from {imported}, not measured on the node: qualify the node itself")


CPU_KINDS = ("*", "collective", "correctness", "train", "baseline")  # what gloo ranks on a CPU can judge


@pytest.mark.parametrize("code", [c for c in CODES if c.kind in CPU_KINDS], ids=lambda c: c.code)
def test_advice_for_cpu_ranks_names_no_gpu_tool(code):
    from fabricbench.qualifying.codes import action_for

    for tool in ("nvidia-smi", "dcgmi", "nvlink"):
        assert tool not in action_for(code, cpu=True), code.code
    assert action_for(code) == code.action  # a GPU run keeps its advice


def test_init_prints_the_factors_it_wrote(tmp_path, capsys):
    # a noisy known-good run (cv up to 0.45): most thresholds get less than --factor 0.9, and the line
    # --init prints says each, as the file does (it said "measured x 0.9" over thresholds x 0.5)
    import re

    from fabricbench.qualifying.init_spec import summary

    lab = DATA / "study/cpu-lab/units/sweep_default.jsonl"
    spec = tmp_path / "node.toml"
    code, said, err = run_cli(["qualify", "--init", spec, "--from", lab, "--factor", "0.9"], capsys)
    assert code == 0, err
    text = spec.read_text()
    assert summary(text) and said.rstrip().endswith(summary(text))
    written = re.findall(r"^\[\[check\]\]\nname = \"(\w+)\"|(min_busbw_gbps|max_latency_us) = [\d.]+ +# measured .*"
                         r" [x/] ([\d.]+)", text, flags=re.M)
    name, factors = None, []
    for check, key, f in written:
        name = check or name
        if key:
            factors.append((name, "busbw" if key == "min_busbw_gbps" else "latency", float(f)))
    assert len(factors) == 8 and any(f < 0.9 for *_, f in factors)
    for check, what, f in factors:  # each threshold's factor is --factor, or named with its reason
        assert f == 0.9 or f"{check} {what} x {f:.3g} (cv " in summary(text), (check, what, f)


def test_a_floor_is_read_no_further_than_a_quarter_below_its_size():
    # a CPU lab's gloo sweep stops at 8M: it stands in for no 16G GPU floor (the run measured nothing of
    # this spec: exit 5), and a file without NCCL's log names no transport: not measured there, not an error
    lab = DATA / "study/cpu-lab/units/sweep_default.jsonl"
    res = qualify(QualifyConfig(spec="builtin:h200-sxm-8", records_from=str(lab)))
    assert res.exit_code == 5 and all(v.status == Status.WAIVED for v in res.verdicts)
