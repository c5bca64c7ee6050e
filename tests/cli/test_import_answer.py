"""What `fabricbench import` answers per file: ranks, GPUs, busbw at the largest size, the published
reference with its sources and a verdict (or why none matches), the next commands; --json the same; and
docs/import.md's recipe run as written."""

import json
import re
import shlex
import shutil

from clirun import run_cli
import roots
from roots import ROOT

DATA = roots.DATA / "imports"
DOCS = ROOT / "docs" / "import.md"
HELD_OUT = DATA / "nccl_tests_h200_8gpu_8g_held_out.txt"  # not a source of fabricbench/references


def test_held_out_real_file_prints_busbw_and_a_sourced_reference(tmp_path, capsys):
    out = tmp_path / "imported.jsonl"
    code, so, se = run_cli(["import", HELD_OUT, "--out", out], capsys)
    assert code == 0, se
    text = " ".join(so.split())
    assert "all_reduce on 8 × NVIDIA H200: busbw 477 GB/s at 8G (the largest size, in place)" in text
    assert "within: expected on 8× H200 SXM (NVSwitch): 431-482 GB/s at >= 1G" in text
    assert "nccl-tests#272" in text  # the reference's source, by its tag
    assert "above (28.2% over 372)" in text  # the NVLS-off row: this run had NVLS
    assert f"fabricbench qualify --spec builtin:NAME --from {out}" in text
    assert f"fabricbench compare --fabrics default --with {out}" in text


def test_json_carries_the_same_answer(tmp_path, capsys):
    out = tmp_path / "imported.jsonl"
    code, so, se = run_cli(["import", HELD_OUT, "--out", out, "--json"], capsys)
    (f,) = json.loads(so)["files"]
    assert f["ranks"] == [8] and f["gpus"] == [{"model": "NVIDIA H200", "count": 8}] and f["ops"] == ["all_reduce"]
    (peak,) = f["peaks"]
    assert (peak["busbw_gbps"], peak["bytes"], peak["inplace"], peak["none_matches"]) == (476.98, 8 << 30, True, None)
    first = peak["references"][0]
    assert first["verdict"] == "within" and (first["lo_gbps"], first["hi_gbps"]) == (431.0, 482.0)
    assert any("nccl-tests/issues/272" in s for s in first["sources"])
    assert f["next"] == [f"fabricbench qualify --spec builtin:NAME --from {out}",
                         f"fabricbench compare --fabrics default --with {out}"]


def test_below_the_published_range_says_by_how_much(tmp_path, capsys):
    slow = tmp_path / "slow.log"
    slow.write_text(HELD_OUT.read_text().replace("272.55  476.96", "172.55  300.00")
                    .replace("272.56  476.98", "172.56  301.00"))
    code, so, se = run_cli(["import", slow, "--out", tmp_path / "o.jsonl"], capsys)
    assert "busbw 301 GB/s at 8G" in so and "below (30.2% under 431): expected on 8× H200 SXM" in " ".join(so.split())


def test_none_matches_says_why(tmp_path, capsys):
    code, so, se = run_cli(["import", DATA / "nccl_tests_gb200_oke_8gpu_two_trays.txt", "--out",
                            tmp_path / "o.jsonl"], capsys)
    text = " ".join(so.split())
    assert "all_reduce on 8 ranks: busbw 847.4 GB/s at 32G" in text
    assert "reference: none matches (the GPUs are not named: a gloo run, or a file without nccl-tests' '# Rank' " \
           "lines)" in text


def _recipe():
    """The first bash block of docs/import.md: its command lines, comments cut."""
    block = re.search(r"```bash\n(.*?)```", DOCS.read_text(), re.S).group(1)
    return [shlex.split(line.split("#")[0]) for line in block.splitlines() if line.strip()]


def test_docs_recipe_runs_as_written(tmp_path, capsys, monkeypatch):
    for name, fixture in {"all_reduce.log": "nccl_tests_gb200_oke_8gpu_two_trays.txt",
                          "ag.json": "constructed_2_19_6_json.json",
                          "nvbandwidth.txt": "nvbandwidth_h100_sm.txt",
                          "good.log": "nccl_tests_h200_8gpu_8g_held_out.txt"}.items():
        shutil.copy(DATA / fixture, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    lines = _recipe()
    assert len(lines) == 4 and all(x[0] == "fabricbench" for x in lines)
    for argv in lines:
        code, so, se = run_cli(argv[1:], capsys)
        assert code != 2 and "Traceback" not in se, (argv, se)
        if argv[1] == "import" or "--init" in argv:
            assert code == 0, (argv, se)
    assert "all_reduce" in (tmp_path / "node.toml").read_text() and (tmp_path / "good.jsonl").exists()
    assert len((tmp_path / "imported.jsonl").read_text().splitlines()) > 4
