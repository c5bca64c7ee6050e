"""export, estimate, topo, jobfit and report as library calls: on the same input, `fabricbench.<verb>(config)`
gives what the command prints (`to_dict()` is its --json; export, which has no --json, writes the same file
and notes), and a bad value is refused by both in the same words (the CLI's one `Error:` line, exit 2).

    python3 -m pytest -q -p no:xdist tests/unit/test_library_calls.py
"""

from __future__ import annotations

import json
import shutil

import pytest

import fabricbench
from fabricbench.errors import UsageError
from clirun import refused, run_cli
from roots import DATA

SWEEP = DATA / "export" / "cpu_gloo_sweep_2ranks.jsonl"  # a real 2-rank gloo sweep
JOB = DATA / "imports" / "inspector" / "readme_v4_2_algo_proto.log"  # NCCL Inspector's README example
TOPO = DATA / "topo" / "h200_nvl_two_quads.txt"
STUDY = DATA / "study" / "cpu-lab"


def _refused_alike(argv: list[str], make, capsys) -> str:
    """The CLI's one Error line and the library's UsageError say the same."""
    line = refused(argv, capsys)
    with pytest.raises(UsageError) as e:
        make()
    assert line == f"Error: {e.value}", (line, str(e.value))
    return str(e.value)


def test_estimate(capsys):
    argv = ["estimate", "--model", "tiny-mistral", "--gpus", "0-3", "--strategies", "zero3,ddp", "--batch-size", "2"]
    code, out, _ = run_cli([*argv, "--json"], capsys)
    r = fabricbench.estimate(fabricbench.EstimateConfig(model="tiny-mistral", gpus=4, strategies=("zero3", "ddp"),
                                                        batch_size=2))
    assert code == 0 and json.loads(out) == r.to_dict()
    assert list(r.strategies) == ["ddp", "zero3"] and r.num_gpus == 4 and r.params == 106_816
    assert r.strategies["ddp"]["total_bytes"] == 16 * r.params and r.activation_bytes > 0
    said = _refused_alike([*argv, "--recipe", "fp8"],
                          lambda: fabricbench.EstimateConfig(model="tiny-mistral", gpus=4, recipe="fp8"), capsys)
    assert "unknown recipe 'fp8'" in said


def test_export(tmp_path, capsys):
    by_cli, by_call = tmp_path / "cli.yaml", tmp_path / "call.yaml"
    code, out, err = run_cli(["export", str(SWEEP), "--format", "simai-busbw", "--out", str(by_cli), "--group", "DP"],
                             capsys)
    r = fabricbench.export(fabricbench.ExportConfig(results=str(SWEEP), format="simai-busbw", out=str(by_call),
                                                    group="DP"))
    assert code == 0 and out == f"simai-busbw: wrote {by_cli}\n"
    assert by_cli.read_bytes() == by_call.read_bytes() and "DP:" in by_call.read_text()
    assert [x.removeprefix("note: ") for x in err.splitlines()] == r.notes and r.notes
    assert r.to_dict() == {"format": "simai-busbw", "out": str(by_call), "notes": r.notes, "warnings": []}
    # a flag the format does not read: warned by both
    code, _, err = run_cli(["export", str(SWEEP), "--format", "comm-trace", "--out", str(by_cli), "--group", "DP"],
                           capsys)
    assert "warning: --group is ignored by --format comm-trace" in err.splitlines()
    assert fabricbench.ExportConfig(results=str(SWEEP), format="comm-trace", out=str(by_call), group="DP").ignored == \
        ["--group is ignored by --format comm-trace"]
    said = _refused_alike(["export", str(SWEEP), "--format", "simumax", "--out", str(SWEEP)],
                          lambda: fabricbench.ExportConfig(results=str(SWEEP), format="simumax", out=str(SWEEP)),
                          capsys)
    assert "--out" in said


def test_topo(tmp_path, capsys):
    code, out, _ = run_cli(["topo", "--topo-file", str(TOPO), "--gpus", "0-5", "--json"], capsys)
    r = fabricbench.topo(fabricbench.TopoConfig(topo_file=str(TOPO), gpus="0-5"))
    assert code == 0 and json.loads(out) == r.to_dict()
    assert len(r.topology.gpus) == 6 and r.advice and r.record is None
    assert fabricbench.topo(fabricbench.TopoConfig(topo_file=str(TOPO), gpus=(0, 1, 2, 3, 4, 5))).to_dict() == \
        r.to_dict()  # the indices, or their list text
    rec = fabricbench.topo(fabricbench.TopoConfig(topo_file=str(TOPO), out=str(tmp_path / "t.jsonl"))).record
    assert rec["kind"] == "topology" and json.loads((tmp_path / "t.jsonl").read_text())["advice"] == rec["advice"]
    said = _refused_alike(["topo", "--topo-file", str(TOPO), "--gpus", "0,9"],
                          lambda: fabricbench.topo(fabricbench.TopoConfig(topo_file=str(TOPO), gpus="0,9")), capsys)
    assert "names GPU 9" in said


def test_jobfit(capsys):
    code, out, _ = run_cli(["jobfit", "--job", str(JOB), "--sweep", str(SWEEP), "--json"], capsys)
    r = fabricbench.jobfit(fabricbench.JobfitConfig(job=(str(JOB),), sweep=str(SWEEP)))
    assert code == 0 and json.loads(out) == r.to_dict()
    (row,) = r.rows
    assert (row.op, row.nranks, row.verdict) == ("all_reduce", 8, "unpriced") and "nranks differ" in r.problems[0]
    assert r.job and r.job[0]["op"] == "all_reduce"
    said = _refused_alike(["jobfit", "--job", str(JOB), "--sweep", str(SWEEP), "--fabric", "nope"],
                          lambda: fabricbench.jobfit(fabricbench.JobfitConfig(job=str(JOB), sweep=str(SWEEP),
                                                                              fabric="nope")), capsys)
    assert said.startswith("--fabric nope")


def test_report(tmp_path, capsys):
    study = tmp_path / "study"
    shutil.copytree(STUDY, study)
    code, out, _ = run_cli(["report", str(study), "--json"], capsys)
    r = fabricbench.report(fabricbench.ReportConfig(folder=str(study), write=False))
    assert code == 0 and json.loads(out) == json.loads(json.dumps(r.to_dict()))
    assert r.markdown is None and r.summary["comparisons"]
    (study / "report.md").unlink()
    written = fabricbench.report(fabricbench.ReportConfig(folder=str(study)))
    assert written.markdown == study / "report.md" and written.markdown.is_file() and written.answer
    code, out, _ = run_cli(["report", str(study)], capsys)
    assert code == 0 and out.splitlines()[2:] == written.answer
    empty = tmp_path / "empty"
    empty.mkdir()
    said = _refused_alike(["report", str(empty)], lambda: fabricbench.report(fabricbench.ReportConfig(folder=str(empty))),
                          capsys)
    assert "no results.jsonl here" in said


@pytest.mark.parametrize("make, flag", [
    (lambda: fabricbench.EstimateConfig(model="tiny-mistral", gpus=4, seq_len=0), "--seq-len 0:"),
    (lambda: fabricbench.EstimateConfig(model="tiny-mistral", gpus=4, batch_size=10**9), "--batch-size 1000000000:"),
    (lambda: fabricbench.ExportConfig(results=str(SWEEP), format="simai-busbw", out="o.yaml", group="XP"), "--group XP:"),
    (lambda: fabricbench.ExportConfig(results=str(SWEEP), format="csv", out="o.csv"), "--format csv:"),
])
def test_a_config_refuses_outside_its_declaration_by_flag(make, flag):
    # as every config does (declare.check): the flag and the value first, whoever built the config
    with pytest.raises(UsageError) as e:
        make()
    assert str(e.value).startswith(flag), str(e.value)
