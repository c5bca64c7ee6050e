"""fabricbench import over real published outputs (tests/data/imports/SOURCES.md names each one)."""

import json
import os

import pytest

from fabricbench.errors import UsageError
from fabricbench.fabrics.transport import parse_nccl_log, transport_of
from fabricbench.importing import FORMATS, import_file, sniff
import roots
from clirun import one_error_line, run_cli, run_cli_subprocess

DATA = roots.DATA / "imports"


def _get(name, **kw):
    return import_file(DATA / name, **kw)


def _fig(recs, nbytes, inplace):
    return next(r for r in recs if r["bytes"] == nbytes and r["inplace"] is inplace)


def test_formats_table_and_sniffing():
    assert FORMATS.names() == ["nccl-inspector", "nccl-inspector-prom", "dcgm-diag", "nccl-ras", "nvbandwidth-json",
                               "nccl-tests-json", "nccl-diag", "nccl-tests", "nvbandwidth", "nccl-log"]
    assert sniff((DATA / "constructed_2_19_6_json.json").read_text()) == "nccl-tests-json"
    assert sniff((DATA / "nccl_tests_gb200_nvl72.txt").read_text()) == "nccl-tests"
    assert sniff((DATA / "nvbandwidth_v0_8_a6000.txt").read_text()) == "nvbandwidth"
    assert sniff((DATA / "nccl_log_p2p_ipc_ring.log").read_text()) == "nccl-log"
    assert sniff("hello\n") is None


def test_old_era_broadcast_no_redop_na_error_two_hosts():
    got = _get("nccl_tests_2019_old_broadcast.txt")
    recs = got.records
    assert got.format == "nccl-tests" and len(recs) == 2 and got.warnings == []
    oop, ip = _fig(recs, 8, False), _fig(recs, 8, True)
    assert (oop["op"], oop["count"], oop["dtype"], oop["time_us"], oop["algbw_gbps"], oop["busbw_gbps"]) == \
        ("broadcast", 2, "float32", 45.82, 0.0, 0.0)
    assert ip["time_us"] == 38.17
    assert oop["wrong"] is None  # N/A: not checked (-c 0), never a 0
    assert oop["nranks"] == 2 and oop["extra"]["hosts"] == ["v100-gpu-1", "v100-gpu-5"] and oop["host"] is None
    assert oop["nccl_version"] == "2.9.6"  # NCCL's own version line
    assert oop["iters"] == 100 and oop["extra"]["validation"] is False and oop["extra"]["root"] == 0
    assert oop["gpu_names"] == ["Tesla V100-PCIE-16GB"] * 2
    assert oop["transport"] is None and oop["nvls"] is None  # WARN lines only: no transport told
    assert oop["engine"] == "nccl-tests" and oop["source"]["file"] == "nccl_tests_2019_old_broadcast.txt"
    assert oop["busbw_factor"] == 1.0


def test_current_era_gb200_rank_lines_give_nranks():
    recs = _get("nccl_tests_gb200_nvl72.txt").records
    assert len(recs) == 10
    r = _fig(recs, 4294967296, False)
    assert (r["count"], r["time_us"], r["algbw_gbps"], r["busbw_gbps"], r["wrong"]) == \
        (1073741824, 10094.0, 425.49, 839.16, 0)
    assert _fig(recs, 8589934592, True)["busbw_gbps"] == 846.82
    # the excerpt names no program, but sum, root -1 and busbw/algbw = 2(71)/72 leave only all-reduce
    assert r["nranks"] == 72 and r["op"] == "all_reduce" and r["extra"]["inferred"] == ["nranks", "op"]
    assert r["busbw_factor"] == 2 * 71 / 72


def test_mpirun_prefixes_and_file_name_op(tmp_path):
    src = DATA / "nccl_tests_mpirun_prefix.txt"
    got = _get("nccl_tests_mpirun_prefix.txt")
    assert [r["time_us"] for r in got.records] == [12.9, 12.87, 12.88, 12.83, 22.25, 13.34]
    assert any("op left null" in w for w in got.warnings)
    named = tmp_path / "all_reduce_perf_p5.log"
    named.write_text(src.read_text())
    got = import_file(named, nranks=16)
    assert {r["op"] for r in got.records} == {"all_reduce"} and any("file name" in w for w in got.warnings)
    assert got.records[0]["nranks"] == 16 and got.records[0]["busbw_factor"] == pytest.approx(2 * 15 / 16)


def test_table_only_rows_keep_their_redop():
    recs = _get("nccl_tests_redops_table_only.txt").records
    assert [r["extra"]["redop"] for r in recs[::2]] == ["max", "max", "min"]
    assert _fig(recs, 200704, True)["busbw_gbps"] == 3.02


def test_cut_row_gives_one_line_naming_file_and_line():
    with pytest.raises(UsageError) as e:
        _get("nccl_tests_2023_multinode.txt")
    msg = str(e.value)
    assert "nccl_tests_2023_multinode.txt" in msg and "no measurement" in msg and ":21: skipped a table row" in msg


def test_constructed_newest_format_two_runs_split_row():
    got = _get("constructed_2_19_6_per_iter_two_runs.txt")
    assert got.warnings == []
    ar = [r for r in got.records if r["op"] == "all_reduce"]
    ag = [r for r in got.records if r["op"] == "all_gather"]
    assert len(ar) == 6 and len(ag) == 4
    r = _fig(ar, 2097152, False)  # the row NCCL's lines cut in two
    assert (r["time_us"], r["min_us"], r["max_us"], r["cv"], r["extra"]["p99_us"]) == (30.4, 29.8, 33.1, 0.0175, 33.0)
    assert r["nccl_version"] == "2.28.3" and r["source"]["tool_version"] == "2.19.6"
    assert r["transport"] == "P2P/CUMEM" and r["nvls"] is False and r["nranks"] == 2 and r["gpus"] == [0, 1]
    assert r["host"] == "h200-node" and r["source"]["run"] == 0
    g = _fig(ag, 16, True)
    assert (g["dtype"], g["wrong"], g["graph"], g["source"]["run"]) == ("float16", None, True, 1)
    assert g["transport"] is None  # the second run printed no NCCL line


def test_json_v3_strings_padded_root_per_iter_and_env_allow_list():
    got = _get("constructed_2_19_6_json.json")
    recs = got.records
    assert got.format == "nccl-tests-json" and len(recs) == 4
    r = _fig(recs, 1048576, False)
    assert (r["op"], r["dtype"], r["nranks"], r["gpus"], r["nccl_version"]) == \
        ("all_to_all", "float16", 4, [0, 1, 2, 3], "2.28.3")
    assert (r["time_us"], r["min_us"], r["max_us"], r["busbw_gbps"]) == (40.5, 39.0, 45.0, 19.418074)
    assert r["cv"] == pytest.approx(0.02962963) and r["graph"] is False and r["timestamp"] == "2026-12-01 10:00:00"
    bad = _fig(recs, 1048576, True)
    assert bad["wrong"] == 3 and bad["status"] == "wrong" and bad["max_us"] is None  # "nan" -> null
    assert _fig(recs, 2097152, True)["time_us"] is None
    assert r["env"] == {"CUDA_VISIBLE_DEVICES": "0,1,2,3", "NCCL_DEBUG": "INFO", "NCCL_P2P_DISABLE": "1"}
    assert "do-not-copy" not in json.dumps(recs)


def test_json_cut_short_keeps_complete_results(tmp_path):
    text = (DATA / "constructed_2_19_6_json.json").read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[:text.index('{"size":2097152') + 30])
    got = import_file(cut)
    assert len(got.records) == 2 and "cut short" in got.warnings[0]
    assert got.records[0]["op"] == "all_to_all" and got.records[0]["nranks"] == 4


@pytest.mark.parametrize("name,transport,nranks,extra", [
    ("nccl_log_2_21_net_ib_gdrdma.log", "NET/IB+P2P/CUMEM", None, {"gdrdma": True}),
    ("nccl_log_2_4_ring_socket.log", "NET/Socket", 64, {"gdrdma": False}),
    ("nccl_log_p2p_ipc_ring.log", "P2P/IPC", 32, {}),
    ("nccl_log_plugin_shared.log", "NET/NCCL RDMA Plugin v6+P2P/CUMEM", None, {"gdrdma": True}),
    ("nccl_log_shm_socket.log", "NET/Socket+SHM", None, {}),
    ("nccl_log_busid_shm.log", "SHM", 2, {}),
    ("nccl_log_2_2x_nvls_24ranks.log", "unknown (no channel connections logged)", 24,
     {"nnodes": 3, "local_ranks": 8, "nvls": True, "nvls_available": True, "host": "h100clust-worker-1"}),
    ("nccl_log_connected_nvls_tree.log", "unknown (no channel connections logged)", 64, {"nvls": True}),
    ("nccl_tests_2_2x_direct_pointer.txt", "P2P/direct pointer", None, {"nvls": False}),
])
def test_nccl_logs_alone_give_one_transport_record(name, transport, nranks, extra):
    got = _get(name)
    assert got.format == "nccl-log" and len(got.records) == 1
    r = got.records[0]
    assert r["kind"] == "transport" and r["transport"] == transport and r["nranks"] == nranks
    for k, v in extra.items():
        assert r[k] == v, k


def test_parse_nccl_log_shm_plugins_versions_prefixes():
    s = parse_nccl_log("[1,3]<stdout>:h:1:2 [3] NCCL INFO Channel 00 : 3[3] -> 2[2] via SHM/direct/direct\n"
                       "h:1:2 [0] NCCL INFO Channel 00/0 : 0[4b000] -> 7[cf000] via P2P/IPC/read\n"
                       "h:1:2 [0] NCCL INFO Channel 01/0 : 1[1] -> 9[1] [send] via NET/NCCL RDMA Plugin v8/1/GDRDMA\n"
                       "h:1:2 [0] NCCL INFO NCCL version 2.27.5+cuda12.9\n"
                       "h:1:2 [0] NCCL INFO Using network AWS Libfabric\n")
    assert s.transports == ["NET/NCCL RDMA Plugin v8", "P2P/IPC", "SHM"] and s.connections == 3
    assert s.nccl_version == "2.27.5" and s.network == "AWS Libfabric" and s.gdrdma is True
    assert transport_of("direct shared memory") == "SHM" and transport_of("P2P/MNNVL") == "P2P/MNNVL"
    told = parse_nccl_log("h:1:2 [0] NCCL INFO NCCL_ALGO set by environment to Ring\n"
                          "h:1:2 [0] NCCL INFO NCCL_PROTO set by environment to Simple.\n")
    assert (told.algo, told.proto, s.algo, s.proto) == ("Ring", "Simple", None, None)
    off = parse_nccl_log("h:1:2 [0] NCCL INFO NVLS multicast support is available on dev 0\n"
                         "h:1:2 [0] NCCL INFO 24 coll channels, 0 collnet channels, 0 nvls channels, 32 p2p channels\n")
    assert off.nvls_available and not off.nvls


def test_nvbandwidth_arrows_diagonal_sum():
    got = _get("nvbandwidth_v0_8_a6000.txt")
    recs = got.records
    assert len(recs) == 30 and {r["kind"] for r in recs} == {"copy"}  # 6 x 6 less the N/A diagonal
    r = next(x for x in recs if x["src"] == "GPU3" and x["dst"] == "GPU0")
    assert (r["gbps"], r["copy_kind"], r["direction"], r["source"]["tool_version"]) == (21.82, "peer", "uni", "v0.8")
    assert r["extra"]["sum_gbps"] == 715.53 and r["bytes"] is None and r["time_us"] is None
    host = _get("nvbandwidth_v0_2_rtx4090.txt").records
    h2d = next(x for x in host if x["dst"] == "GPU4" and x["src"] == "host")
    d2h = next(x for x in host if x["src"] == "GPU4" and x["dst"] == "host")
    assert (h2d["gbps"], h2d["direction"], d2h["gbps"], d2h["direction"]) == (26.28, "h2d", 27.10, "d2h")
    assert h2d["gpu_names"] == ["NVIDIA GeForce RTX 4090"] and d2h["extra"]["sum_gbps"] == 214.28
    sm = _get("nvbandwidth_h100_sm.txt").records
    assert len(sm) == 16 and sm[7]["gbps"] == 35.06 and sm[7]["extra"]["method"] == "SM"


def test_nvbandwidth_zero_diagonal_and_bidir(tmp_path):
    p = tmp_path / "nvb.txt"
    p.write_text("Running device_to_device_bidirectional_memcpy_write_ce.\n"
                 "memcpy CE GPU(row) <-> GPU(column) bandwidth (GB/s)\n"
                 "           0         1\n 0      0.00     41.20\n 1     40.90      0.00\n\n")
    recs = import_file(p).records
    assert [(r["src"], r["dst"], r["direction"], r["gbps"]) for r in recs] == \
        [("GPU0", "GPU1", "bidir", 41.2), ("GPU1", "GPU0", "bidir", 40.9)]


def test_cli_import_appends_and_refuses_bad_input(tmp_path, capsys):
    out = tmp_path / "imp.jsonl"
    out.write_text('{"kind": "collective", "op": "all_reduce"}\n')  # something already there stays
    code, printed, err = run_cli(["import", DATA / "nccl_tests_gb200_nvl72.txt", DATA / "nvbandwidth_h100_sm.txt",
                                  "--out", out, "--fabric", "nvl72", "--nranks", "72"], capsys)
    assert code == 0, err
    lines = out.read_text().splitlines()
    assert len(lines) == 1 + 10 + 16 and json.loads(lines[0]) == {"kind": "collective", "op": "all_reduce"}
    rec = json.loads(lines[1])
    assert rec["fabric"] == "nvl72" and rec["schema"] == "fabricbench/1"
    assert "10 collective" in printed and "27 record(s)" not in printed and "26 record(s)" in printed


@pytest.mark.parametrize("make,msg", [
    (lambda d: d / "missing.log", "no such file"),
    (lambda d: (d / "junk.txt").write_text("hello world\n") and d / "junk.txt", "not a format fabricbench imports"),
    (lambda d: (d / "bad.json").write_text('{"version": 3, "args": ["x"]') and d / "bad.json", "bad.json:1"),
    (lambda d: d, "is a folder; give a file"),
])
def test_bad_inputs_are_one_line_exit_2(tmp_path, make, msg):
    path = make(tmp_path)
    code, _, err = run_cli_subprocess(["import", path, "--out", tmp_path / "o.jsonl"], timeout=60,
                                      env={**os.environ})
    assert code == 2, err
    assert msg in one_error_line(err), err
    assert not (tmp_path / "o.jsonl").exists()


def test_first_nccl_tests_era_bytes_header_rows_behind_hash_time_in_ms():
    got = _get("nccl_tests_2019_bytes_ms.txt")
    recs = got.records
    assert got.warnings == [] and len(recs) == 14
    # -b 1 and the next size both round to 0 bytes: one measurement printed twice, its repeats the samples
    zero = [r for r in recs if r["bytes"] == 0]
    assert len(zero) == 2 and zero[0]["time_us"] == 9.0  # first size 0, printed "0.009" ms twice
    assert zero[0]["extra"]["repeats"] == 2 and zero[0]["extra"]["samples_us"] == [9.0, 9.0]
    assert zero[1]["inplace"] and zero[1]["time_us"] == 9.5  # "0.010" and "0.009": their mean
    r = _fig(recs, 1048576, False)
    assert (r["op"], r["time_us"], r["algbw_gbps"], r["busbw_gbps"], r["wrong"]) == ("all_reduce", 293.0, 3.58, 3.58, None)
    assert r["extra"]["time_printed_in"] == "ms" and r["nranks"] == 2 and r["gpu_names"] == ["GeForce RTX 2080 Ti"] * 2
    assert r["extra"]["validation"] is False and r["extra"]["hosts"] == ["ncrh"]


def test_nccl1_tests_device_lines_and_deviation_column():
    recs = _get("nccl1_tests_titanx.txt").records
    r = next(x for x in recs if x["dtype"] == "int32" and not x["inplace"])
    assert (r["op"], r["count"], r["time_us"], r["busbw_gbps"], r["nranks"], r["gpus"]) == \
        ("all_reduce", 2500000, 1611.0, 9.31, 4, [0, 1, 2, 3])
    assert r["wrong"] is None and r["extra"]["max_error"] == 0.0  # "0e+00" is a deviation, not a count
    assert [x["extra"]["redop"] for x in recs if not x["inplace"]] == ["sum", "prod", "sum"]
    assert recs[0]["dtype"] == "int8"  # NCCL 1's "char"


def test_current_era_two_runs_after_shell_prompts_with_nccl_2_28_log():
    got = _get("nccl_tests_2_18_3_gb10_two_runs.txt")
    assert got.warnings == [] and len(got.records) == 12
    runs = {r["source"]["run"] for r in got.records}
    assert runs == {0, 1} and {r["op"] for r in got.records} == {"all_gather"}
    first = [r for r in got.records if r["source"]["run"] == 0]
    second = [r for r in got.records if r["source"]["run"] == 1]
    assert _fig(first, 4294967296, True)["busbw_gbps"] == 22.46 and _fig(first, 1073741824, False)["time_us"] == 27211.0
    r = _fig(second, 4294967296, False)  # the row after an ssh line
    assert (r["time_us"], r["busbw_gbps"], r["iters"], r["busbw_factor"]) == (758966.0, 2.83, 5, 0.5)
    assert r["transport"] == "NET/IB" and r["nvls"] is False and r["extra"]["transport_detail"]["gdrdma"] is False
    assert r["extra"]["nnodes"] == 2 and r["nccl_version"] == "2.28.9" and r["source"]["tool_version"] == "2.18.3"
    assert first[0]["transport"] is None and first[0]["nccl_version"] == "2.28.9"  # nccl-library=22809


def test_nvbandwidth_device_local_copy_and_latency_matrix_skipped(tmp_path):
    # the tail of an nvbandwidth run as a public repository shows it (one GPU): a latency matrix (ns) is no copy
    p = tmp_path / "nvb_local.txt"
    p.write_text("Running host_device_latency_sm.\nmemory latency SM CPU(row) <-> GPU(column) (ns)\n           0\n"
                 " 0    613.22\n\nSUM host_device_latency_sm 613.22\n\nWaived: \nRunning device_local_copy.\n"
                 "memcpy local GPU(column) bandwidth (GB/s)\n           0\n 0     84.33\n\nSUM device_local_copy 84.33\n")
    recs = import_file(p).records
    assert [(r["src"], r["dst"], r["direction"], r["gbps"], r["extra"]["sum_gbps"]) for r in recs] == \
        [("GPU0", "GPU0", "uni", 84.33, 84.33)]


def test_one_file_with_nccl_tests_and_nvbandwidth_reads_both(tmp_path):
    p = tmp_path / "healthcheck.log"
    p.write_text((DATA / "nccl_tests_gb200_nvl72.txt").read_text() + "\n" + (DATA / "nvbandwidth_h100_sm.txt").read_text())
    got = import_file(p, nranks=72)
    assert got.format == "nccl-tests+nvbandwidth"
    assert sorted({r["kind"] for r in got.records}) == ["collective", "copy"] and len(got.records) == 26


def test_wrong_counts_printed_with_g_and_pdsh_prefixes(tmp_path):
    head = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
            "#wrong\n")
    p = tmp_path / "all_reduce_perf.txt"
    p.write_text("node07: " + head + "node07:      1048576        262144     float     sum      -1    27.76   37.78   66.11"
                 "  1e+06    27.49   38.15   66.76       0\n")
    r = import_file(p).records
    assert (r[0]["wrong"], r[0]["status"], r[1]["wrong"], r[1]["status"]) == (1000000, "wrong", 0, "ok")
    bare = tmp_path / "all_gather_perf.txt"  # no header: "0e+00" is the old era's deviation, a plain 0 a count
    bare.write_text("     1048576        262144   float     100.0   10.49   18.35  0e+00    101.0   10.38   18.17  0\n")
    r = import_file(bare).records
    assert (r[0]["wrong"], r[0]["extra"]["max_error"], r[1]["wrong"]) == (None, 0.0, 0)


def test_json_version_4_tuning_kept(tmp_path):
    doc = json.loads((DATA / "constructed_2_19_6_json.json").read_text())
    doc["version"] = 4
    doc["results"][0]["tuning"] = {"implementation": "Coll", "algo": "RING", "proto": "LL", "#channels": 2}
    p = tmp_path / "v4.json"
    p.write_text(json.dumps(doc))
    got = import_file(p)
    assert got.warnings == [] and got.records[0]["extra"]["tuning"]["algo"] == "RING"


def test_nvbandwidth_json_matrices(tmp_path):
    # the layout nvbandwidth's json_output.cpp writes (values as strings, "N/A" where not measured)
    p = tmp_path / "nvb.json"
    p.write_text(json.dumps({"nvbandwidth": {"version": "v0.7", "git_version": "v0.7", "testcases": [
        {"name": "device_to_device_memcpy_read_ce", "status": "Passed",
         "bandwidth_description": "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)",
         "bandwidth_matrix": [["N/A", "389.312"], ["390.01", "N/A"]], "sum": 779.322},
        {"name": "host_device_latency_sm", "status": "Passed",
         "bandwidth_description": "memory latency SM CPU(row) <-> GPU(column) (ns)", "bandwidth_matrix": [["600"]]},
        {"name": "device_to_device_memcpy_write_sm", "status": "Waived"}]}}, indent=2))
    got = import_file(p)
    assert got.format == "nvbandwidth-json" and len(got.warnings) == 1
    assert [(r["src"], r["dst"], r["gbps"], r["extra"]["sum_gbps"], r["source"]["tool_version"]) for r in got.records] \
        == [("GPU0", "GPU1", 389.312, 779.322, "v0.7"), ("GPU1", "GPU0", 390.01, 779.322, "v0.7")]


FRAGMENTS = [l for name in ("nccl_tests_2_18_3_gb10_two_runs.txt", "nvbandwidth_v0_2_rtx4090.txt",
                            "constructed_2_19_6_per_iter_two_runs.txt", "nccl_tests_2019_bytes_ms.txt",
                            "nccl_log_2_2x_nvls_24ranks.log")
             for l in (DATA / name).read_text().splitlines()] + ["", "N/A", "{", '{"results": [', "-nan", "0e+00"]


@pytest.mark.parametrize("seed", range(3))
def test_shuffled_and_cut_real_lines_never_raise_anything_but_one_line(tmp_path, seed):
    """Real lines in any order, cut anywhere: records, or one UsageError line; never another exception."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=60, deadline=None, database=None)
    @given(st.lists(st.tuples(st.sampled_from(FRAGMENTS), st.integers(0, 200)), max_size=40))
    def check(parts):
        p = tmp_path / f"fuzz{seed}.txt"
        p.write_text("\n".join(line[:cut] if cut % 3 == 0 else line for line, cut in parts))
        try:
            got = import_file(p)
        except UsageError as e:
            assert "\n" not in str(e)
            return
        assert got.records and all(r["schema"] == "fabricbench/1" for r in got.records)
        json.dumps(got.records, allow_nan=False)

    check()


def test_parse_nccl_log_more_releases():
    # NCCL 2.9.9 (NVIDIA/nccl#527): bus ids, no sub-index; 2.5.6 under mpirun (NVIDIA/nccl#300); a trailing
    # "comm 0x.. nRanks 08" (ROCm/rccl#1026)
    s = parse_nccl_log(
        "ip-10-216-179-87:417131:417177 [0] NCCL INFO Channel 05 : 8[101c0] -> 9[101d0] via P2P/IPC/read\n"
        "[1,0]<stdout>:NCCL version 2.5.6+cuda10.2\n"
        "g1072:1263985:1264007 [0] NCCL INFO Channel 02/0 : 1[c6000] -> 4[c1000] [receive] via NET/Socket/1 comm "
        "0x95cdeb0 nRanks 08\n")
    assert s.transports == ["NET/Socket", "P2P/IPC"] and s.connections == 2 and s.nccl_version == "2.5.6"
    assert s.gdrdma is False


def test_nvbandwidth_all_to_one_is_a_total_not_a_pair(tmp_path):
    p = tmp_path / "nvb.txt"
    p.write_text("Running all_to_one_write_ce.\nmemcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)\n"
                 "           0         1\n 0    350.10    351.20\n\nSUM all_to_one_write_ce 701.30\n")
    recs = import_file(p).records
    assert [(r["src"], r["dst"], r["copy_kind"], r["gbps"]) for r in recs] == \
        [("all GPUs", "GPU0", "peer_total", 350.1), ("all GPUs", "GPU1", "peer_total", 351.2)]


def test_nccl_lines_between_runs_belong_to_the_next(tmp_path):
    text = (DATA / "nccl_tests_2_18_3_gb10_two_runs.txt").read_text()
    first, second = text.split("mprg@spark-fb97:~/nccl-tests$ DISPLAY=", 1)
    # another process's NCCL start-up lines reach the file before rank 0 prints the second run's header
    early = "spark-4440:25264:25264 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA\n"
    p = tmp_path / "runs.txt"
    p.write_text(first + early + "mprg@spark-fb97:~/nccl-tests$ DISPLAY=" + second)
    recs = import_file(p).records
    assert {r["transport"] for r in recs if r["source"]["run"] == 0} == {None}
    run1 = [r for r in recs if r["source"]["run"] == 1]
    assert run1[0]["transport"] == "NET/IB" and run1[0]["extra"]["transport_detail"]["gdrdma"] is True
