"""NCCL_RUN_DIAGNOSTICS (NCCL >= 2.31) read into health records (and the collective records of the nccl-tests
run it was printed into), and judged by qualify's nccl_diag check with codes and actions."""

from __future__ import annotations

import json

from fabricbench.importing import import_file
from fabricbench.qualifying.api import qualify
from fabricbench.qualifying.config import QualifyConfig
from fabricbench.results.records import check_record
from fabricbench.results.status import Severity, Status
from roots import DATA

D = DATA / "imports" / "nccl_diag"
SPEC = """[spec]
name = "diag"
[[check]]
name = "diag"
kind = "nccl_diag"
min_net_gbits = {net}
max_net_outliers = {outliers}
"""


def _health(name):
    got = import_file(D / name)
    for r in got.records:
        assert check_record(json.loads(json.dumps(r))) is None, r
    return got, [r for r in got.records if r["kind"] == "health"]


def test_published_passing_reports_both_wordings():
    _, (rccl,) = _health("rccl_diag_docs_mi355x_ok.txt")  # RCCL's docs: "all 56 directed GPU P2P edges verified"
    assert (rccl["check"], rccl["healthy"], rccl["nranks"], rccl["host"]) == ("nccl-diag", True, 8, "node01")
    assert rccl["extra"]["p2p"] == {"passed": 56, "tested": 56, "skipped_indirect": 0, "tag": "OK"}
    assert rccl["extra"]["elapsed_ms"] == 40.0 and rccl["extra"]["pid"] == 15
    _, (ok, rest) = _health("nccl_diag_docs_2_31_examples.txt")  # NCCL's docs: "(56 peer accesses)"
    assert ok["healthy"] is True and ok["extra"]["p2p"]["passed"] == 56 and ok["extra"]["elapsed_ms"] == 245.3
    # the docs' partial-P2P and network lines (excerpts, no header): read back figure for figure
    assert rest["extra"]["p2p"] == {"passed": 52, "tested": 56, "skipped_indirect": 0, "tag": "INFO"}
    assert rest["extra"]["net_bw"]["same-nic"] == {"min_gbits": 376.1, "median_gbits": 391.5, "max_gbits": 398.2,
                                                   "ranks": 8, "tag": "OK"}
    assert rest["extra"]["net_bw"]["cross-nic"]["min_gbits"] == 265.1
    (out,) = [f for f in rest["findings"] if f["kind"] == "net_bw_outlier"]
    assert out["ranks"] == [{"rank": 3, "host": "node0"}] and out["gbits"] == 265.1 and out["mode"] == "cross-nic"
    assert rest["comm_hash"] == "0x7a3f9b2c41d05e88" and rest["healthy"] is False


def test_report_inside_an_nccl_tests_log_gives_health_and_collective_records():
    got, (h,) = _health("nccl_diag_SYNTHETIC_2_31_all_reduce_failures.txt")
    assert got.format == "nccl-diag+nccl-tests"
    colls = [r for r in got.records if r["kind"] == "collective"]
    assert len(colls) == 12 and {r["op"] for r in colls} == {"all_reduce"} and colls[-2]["busbw_gbps"] == 161.56
    assert (h["nranks"], h["comm_hash"], h["extra"]["elapsed_ms"]) == (8, "0x5e2a91c07d13f4b6", 1843.7)
    edges = [f for f in h["findings"] if f["kind"] == "p2p"]
    assert [f["nccl"] for f in edges] == [["write mismatch"], ["peer-memory import failed"]]
    assert edges[0]["ranks"][0] == {"rank": 1, "gpu": 1, "nvml_gpu": 1, "role": "source", "host": "gpu-a"}
    assert edges[0]["path"] == "NVL" and "nvidia-smi topo -p2p n" in edges[0]["advice"]
    assert edges[1]["reason"] == "import"
    (pair,) = [f for f in h["findings"] if f["kind"] == "net_bw"]
    assert pair["nccl"] == ["tool run timed out"] and pair["memory"] == "cuda+dmabuf"
    assert [x["role"] for x in pair["ranks"]] == ["server", "client"]


def _judge(tmp_path, name, net, outliers=0):
    out = tmp_path / "n.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in import_file(D / name).records))
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(net=net, outliers=outliers))
    res = qualify(QualifyConfig(spec=str(spec), records_from=str(out), out=str(tmp_path / "q")))
    return {v.check: v for v in res.verdicts}


def test_qualify_judges_failed_edges_slow_nics_and_outliers_with_codes(tmp_path):
    v = _judge(tmp_path, "nccl_diag_SYNTHETIC_2_31_all_reduce_failures.txt", net=320)
    d = v["diag"]
    assert (d.status, d.severity) == (Status.FAIL, Severity.CRITICAL)
    assert "nccl_ras" not in v  # a diagnostics report is not a RAS report
    by = {i.criterion: i for i in d.items}
    assert by["p2p_edges"].code == "FB_DIAG_P2P" and by["p2p_edges"].measured == round(22 / 24, 4)
    assert "rank 1 (GPU 1) -> rank 3 (GPU 3) over NVL" in by["p2p_edges"].reason
    assert by["net_bw"].code == "FB_DIAG_NET_BW_LOW" and by["net_bw"].measured == 148.2
    assert "tool run timed out" in by["net_bw"].reason
    assert by["net_outliers"].code == "FB_DIAG_NET_OUTLIER" and by["net_outliers"].measured == 1
    assert d.action  # every code says what to do


def test_qualify_passes_a_clean_report_and_waives_without_one(tmp_path):
    v = _judge(tmp_path, "rccl_diag_docs_mi355x_ok.txt", net=100)
    assert v["diag"].status == Status.PASS and v["diag"].measured == 1.0
    spec = tmp_path / "w.toml"
    spec.write_text(SPEC.format(net=100, outliers=0))
    empty = tmp_path / "ar.jsonl"
    empty.write_text("".join(json.dumps(r) + "\n" for r in import_file(
        D.parent / "nccl_tests_gb200_nvl72.txt").records))
    res = qualify(QualifyConfig(spec=str(spec), records_from=str(empty), out=str(tmp_path / "w")))
    (w,) = res.verdicts
    assert w.status == Status.WAIVED and "NCCL_RUN_DIAGNOSTICS=1" in w.reason


def test_a_report_cut_short_is_incomplete(tmp_path):
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join((D / "rccl_diag_docs_mi355x_ok.txt").read_text().splitlines()[:2]) + "\n")
    (h,) = import_file(cut).records
    assert h["healthy"] is False and h["findings"][-1]["kind"] == "incomplete"
