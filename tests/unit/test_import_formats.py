"""fabricbench import of NCCL Inspector (JSON, .gz, Prometheus), NCCL RAS (text, JSON) and DCGM diag (3.x, 4.x).

Every fixture is published text (tests/data/imports/<format>/SOURCES.md), except the one file named SYNTHETIC.
"""

from __future__ import annotations

import gzip
import json
import shutil

import pytest

from fabricbench.errors import UsageError
from fabricbench.importing import import_file
from fabricbench.importing.dcgm_diag import figures_of
from fabricbench.results.records import check_record
from clirun import refused, run_cli
from roots import DATA

D = DATA / "imports"
INS, RAS, DCGM = D / "inspector", D / "nccl_ras", D / "dcgm_diag"


def _one(path, **kw):
    got = import_file(path, **kw)
    for r in got.records:
        assert check_record(json.loads(json.dumps(r))) is None, r
    return got


def test_inspector_v4_0_plain_and_verbose_keep_every_fact():
    got = _one(INS / "readme_v4_0_plain_and_verbose.log")
    assert got.format == "nccl-inspector" and not got.warnings
    ar, rs = got.records
    assert (ar["op"], ar["bytes"], ar["nranks"], ar["time_us"]) == ("all_reduce", 17179869184, 8, 61974.0)
    assert (ar["algbw_gbps"], ar["busbw_gbps"]) == (277.210914, 485.119099)
    assert ar["host"] == "example-hostname" and ar["engine"] == "nccl-inspector"
    assert ar["extra"]["observed"] == "job" and ar["extra"]["coll_sn"] == 1407
    assert ar["extra"]["comm_hash"] == "0x7f8c496ae9f661" and ar["extra"]["rank"] == 2
    assert ar["extra"]["pid"] == 1639453 and ar["source"]["tool_version"] == "v4.0"
    assert ar["busbw_factor"] == pytest.approx(2 * 7 / 8)
    # ReduceScatter: the printed size is per rank; S is the input, x n_ranks, and it says it converted
    assert rs["op"] == "reduce_scatter" and rs["bytes"] == 2147483648 * 8
    assert rs["extra"]["msg_size_bytes"] == 2147483648 and rs["extra"]["inferred"] == ["bytes"]
    assert rs["extra"]["timing_source"] == "kernel_gpu" and rs["extra"]["verbose"] is True
    # S / t agrees with the Inspector's printed algbw (same convention, decimal GB/s)
    assert rs["bytes"] / (rs["time_us"] * 1e-6) / 1e9 == pytest.approx(rs["algbw_gbps"], rel=1e-4)
    assert rs["timestamp"].startswith("2025-07-18")


def test_inspector_float_exec_time_and_gz(tmp_path):
    (r,) = _one(INS / "agent_float_exec_time_v4_0.jsonl").records
    assert r["time_us"] == 5663.0 and r["extra"]["exec_time_printed_as"] == "float"
    assert (r["nranks"], r["extra"]["nnodes"], r["extra"]["coll_sn"]) == (3, 3, 8995)
    gz = tmp_path / "host-pid48.log.gz"
    gz.write_bytes(gzip.compress((INS / "readme_v4_0_plain_and_verbose.log").read_bytes()))
    got = _one(gz)
    assert [x["op"] for x in got.records] == ["all_reduce", "reduce_scatter"]


def test_inspector_v4_1_v4_2_v4_3():
    v41 = _one(INS / "readme_v4_1_dump_stats.log")
    assert len(v41.records) == 1 and any("dropped 4096 collective record" in w for w in v41.warnings)
    (v42,) = _one(INS / "readme_v4_2_algo_proto.log").records
    assert (v42["nccl_algo"], v42["nccl_proto"], v42["extra"]["comm_name"]) == ("RING", "LL", "DP Group 0")
    v43 = _one(INS / "readme_v4_3_marker_stream.log")
    ar, rs = v43.records  # header-less payloads take the marker's header and metadata
    assert ar["host"] == rs["host"] == "example-hostname" and rs["nranks"] == 8 and rs["extra"]["rank"] == 2
    assert (rs["nccl_algo"], rs["nccl_proto"], rs["bytes"]) == ("RING", "SIMPLE", 2147483648 * 8)
    assert any("1022 coll, 2 proxy record(s) missing" in w for w in v43.warnings)


def test_inspector_prometheus_buckets_keep_labels():
    got = _one(INS / "nccl_inspector_metrics_readme_v5_1.prom")
    (r,) = got.records
    assert r["bytes"] is None and r["extra"]["bucket"] is True
    assert r["extra"]["bytes_range"] == [4 * 2**30, 5 * 2**30]
    assert (r["busbw_gbps"], r["time_us"], r["nranks"]) == (678.263, 9498.47, 4)
    assert (r["nccl_algo"], r["nccl_proto"]) == ("Ring", "ll")
    assert r["extra"]["labels"]["comm_name"] == "DP Group 0" and r["host"] == "nvl72004-T01"
    assert any("2 point-to-point sample" in w for w in got.warnings)
    (rc,) = _one(INS / "nccl_inspector_metrics_rccl_readme_v5_1.prom").records
    assert (rc["nccl_algo"], rc["nccl_proto"], rc["extra"]["labels"]["slurm_job_id"]) == ("RING", "SIMPLE", "67940160")


def test_ras_json_real_capture_mismatch_is_inferred_and_named():
    (h,) = _one(RAS / "ncclras_ray_a10g_2_28_9_mismatch.json").records
    assert h["kind"] == "health" and h["healthy"] is False and h["nranks"] == 4
    (f,) = h["findings"]
    assert f["kind"] == "mismatch" and f["op"] == "AllReduce" and f["counts"] == {"100": 1, "101": 3}
    assert f["ranks"] == [{"rank": 1, "host": "10.0.109.86", "pid": 6247, "gpu": 0, "nvml_gpu": 0, "count": 100}]
    assert h["extra"]["inferred"] == ["mismatch"] and h["nccl_version"] == "2.28.9"


def test_ras_json_malformed_2_28_is_repaired_and_says_so():
    got = _one(RAS / "ncclras_SYNTHETIC_2_28_7_missing_rank_malformed.json")
    assert any("repaired malformed JSON" in w for w in got.warnings)
    h, job = got.records
    kinds = {f["kind"]: f for f in h["findings"]}
    assert set(kinds) == {"missing", "unresponsive", "dead"}
    assert kinds["missing"]["ranks"][0] == {"rank": 1, "host": "node-b", "pid": 200, "gpu": 3, "nvml_gpu": 3,
                                            "nccl_status": ["unresponsive", "dead"]}
    # NCCL's own words are kept: unresponsive and dead are different faults to an operator
    assert kinds["missing"]["nccl"] == ["unresponsive", "dead"] and "NCCL: unresponsive, dead" in kinds["missing"][
        "detail"]
    assert kinds["unresponsive"]["nccl"] == ["unresponsive"] and kinds["dead"]["nccl"] == ["dead"]
    # RAS's gather timeout (ras.timeouts_count) is NCCL's TIMEOUT, about the job: one record of its own
    assert job["comm_hash"] is None and [f["nccl"] for f in job["findings"]] == [["timeout"]]


def test_ras_text_keeps_nccl_words_and_reads_partial_reports():
    (m,) = _one(RAS / "ncclras_nccl1911_2_26_2_mismatch.txt").records
    assert m["findings"][0]["nccl"] == ["mismatch"]
    # an excerpt pasted into a ticket: the Errors and Warnings sections without the header
    got = _one(RAS / "ncclras_nccl1911_2_26_2_errors_warnings.txt")
    (p,) = got.records
    assert got.format == "nccl-ras" and any("partial ncclras report" in w for w in got.warnings)
    (f,) = p["findings"]
    assert (p["comm_hash"], p["nranks"], f["nccl"], f["counts"]) == ("fa93daea854b060b", None, ["mismatch"],
                                                                     {"640": 30, "641": 2})
    # down to a single "Errors" section: the missing rank, its node and its GPU are named
    comm, job = _one(RAS / "ncclras_nccl1762_2_27_3_errors_only.txt").records
    assert comm["comm_hash"] == "b3398875b8b2a063" and comm["healthy"] is False
    assert comm["findings"][0]["ranks"] == [{"rank": 1, "gpu": "0", "pid": 60004, "host": "10.4.109.13"}]
    assert comm["findings"][0]["nccl"] == ["incomplete"] and comm["extra"]["group"] == 0
    assert job["comm_hash"] is None and job["findings"][0]["ranks"][0] == {"pid": 60004, "host": "10.4.109.13",
                                                                          "gpu": "0"}


def test_ras_text_mismatch_incomplete_and_ok():
    (m,) = _one(RAS / "ncclras_nccl1911_2_26_2_mismatch.txt").records
    (f,) = m["findings"]
    assert f["counts"] == {"640": 30, "641": 2} and f["op"] == "AllGather" and f["comm_hash"] == "fa93daea854b060b"
    assert [r["rank"] for r in f["ranks"]] == [12, 13] and f["ranks"][0]["gpu"] == "4"
    assert m["nranks"] == 32 and m["nccl_version"] == "2.26.2"
    recs = _one(RAS / "ncclras_nccl1762_2_27_3_incomplete_excerpt.txt").records
    assert len(recs) == 4 and [r["healthy"] for r in recs] == [False] * 4
    assert recs[0]["findings"][0]["ranks"] == [{"rank": 1, "gpu": "0", "pid": 60004, "host": "10.4.109.13"}]
    job = recs[-1]
    assert job["comm_hash"] is None and job["findings"][0]["ranks"][0]["pid"] == 60004
    (ok,) = _one(RAS / "ncclras_nccl1730_2_26_2_ok.txt").records
    assert ok["healthy"] is True and ok["nranks"] == 256 and ok["findings"] == []


def test_dcgm_3x_and_4x_layouts():
    got = _one(DCGM / "dcgm_3_1_0_nvidia_jsonresult_test_8gpu.json")  # a banner line and nulls in the list
    assert len(got.records) == 9 * 8 + 8 and {r["result"] for r in got.records} == {"pass"}
    assert got.records[0]["dcgm_version"] == "3.1.0" and got.records[0]["extra"]["shared_by"] == 8
    (g,) = _one(DCGM / "dcgm_4_2_3_gb10_software_fail.json").records
    assert (g["test"], g["result"], g["entity_group"], g["entity_id"]) == ("software", "fail", "GPU", 0)
    (e,) = g["errors"]
    assert (e["error_id"], e["category"], e["severity"]) == (29, 8, 5)
    assert (e["category_name"], e["severity_name"]) == ("software other", "config")
    assert g["extra"]["driver_version"] == "580.82.09" and g["dcgm_version"] == "4.2.3"


def test_dcgm215_excerpts_give_figures(tmp_path):
    frag = (DCGM / "dcgm_4_dcgm215_diagnostic_test_EXCERPT.txt").read_text().rstrip().rstrip(",")
    doc = tmp_path / "d4.json"
    doc.write_text('{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [' + frag
                   + ']}]}, "metadata": {"version": "4"}}')
    recs = _one(doc).records
    assert [r["entity_id"] for r in recs] == list(range(8))
    assert recs[0]["figures"] == [{"name": "calculated", "value": 859.08, "unit": "gigaflops"}]
    line = (DCGM / "dcgm_3_dcgm215_pcie_info_line.txt").read_text().replace("\n", "")
    info = json.loads("{" + line.rstrip(",") + "}")["info"]
    figs = {(f["name"], f["unit"]): f["value"] for f in figures_of(info)}
    assert figs[("GPU to Host bandwidth", "GB/s")] == 24.02 and figs[("Host to GPU bandwidth", "GB/s")] == 25.93
    assert figs[("bidirectional latency", "us")] == 5.019 and len(figs) == 6


@pytest.mark.parametrize("text, why", [
    ('{"DCGM Diagnostic": {"runtime_error": "Unable to connect to host engine"}}', "did not run"),
    ('{"DCGM Diagnostic": {"test_categories": []}, "metadata": {"version": "4.2.3"}}', "no test result"),
    ('{"nccl_version": "2.28.9", "communicators_count": 0, "communicators": []}', "no communicator"),
    ('{"header":{"id":"0x1","rank":0,"n_ranks":2,"nnodes":1},"metadata":{"inspector_output_format_version":"v4.1",'
     '"hostname":"h","pid":1},"dump_stats":{"coll_records":0}}', "holds no measurement"),
])
def test_failed_or_empty_runs_are_errors(tmp_path, capsys, text, why):
    p = tmp_path / "x.json"
    p.write_text(text)
    with pytest.raises(UsageError, match=why):
        import_file(p)
    assert why in refused(["import", p, "--out", tmp_path / "o.jsonl"], capsys)
    assert not (tmp_path / "o.jsonl").exists()


def test_cli_imports_a_job_folder_s_files(tmp_path, capsys):
    for f in ("readme_v4_0_plain_and_verbose.log", "readme_v4_2_algo_proto.log"):
        shutil.copy(INS / f, tmp_path / f)
    out = tmp_path / "job.jsonl"
    code, said, err = run_cli(["import", tmp_path / "readme_v4_0_plain_and_verbose.log",
                               tmp_path / "readme_v4_2_algo_proto.log", "--out", out], capsys)
    assert code == 0, said + err
    assert "nccl-inspector" in said + err and len(out.read_text().splitlines()) == 3


def test_inferred_only_where_the_columns_leave_one_answer():
    from fabricbench.importing.infer import collective

    ar8 = [("sum", -1, 200.0, 350.0), ("sum", -1, 100.0, 175.0)]  # 2(n-1)/n = 1.75 at n = 8
    assert collective(ar8, 8) == ("all_reduce", None)
    assert collective(ar8, None) == ("all_reduce", 8)  # only n = 8 fits 1.75 to two decimals
    assert collective([("sum", -1, 200.0, 175.0)], 8) == ("reduce_scatter", None)
    assert collective([("sum", -1, 200.0, 350.0)], 4) == (None, None)  # 1.75 is not 2(4-1)/4: no op fits
    assert collective([("none", -1, 200.0, 175.0)], 8) == (None, None)  # all-gather or all-to-all: ambiguous
    assert collective([("none", 0, 200.0, 200.0)], 8) == ("broadcast", None)
    assert collective([("sum", 0, 200.0, 200.0)], 8) == ("reduce", None)
    assert collective([("sum", -1, 0.0, 0.0)], 8) == (None, None)  # too small to print a bandwidth
    assert collective(ar8, 1) == (None, None)
