"""One-GPU tier for the sweep command: every op and dtype from 8 B to 8 GiB with --check, graph mode,
in-place, the torch engine on nccl beside the native one, and the errors a GPU run can hit."""

import json
import re

import pytest

from fabricbench.results.writer import read_results
from clirun import run_cli_subprocess

pytestmark = pytest.mark.gpu(1)
SWEEP = ["sweep", "--gpus", "0"]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_every_op_8B_to_8G_checked(dtype, tmp_path):
    out = tmp_path / "r.jsonl"
    code, _, err = run_cli_subprocess([*SWEEP, "--ops", "all_reduce,all_gather,reduce_scatter,broadcast,all_to_all",
                                       "--sizes", "8-8G:x8", "--dtype", dtype, "--both", "--check", "--iters", "5",
                                       "--warmup", "2", "--quiet", "--out", out], timeout=900)
    assert code == 0, err[-3000:]
    recs = list(read_results(out, kind="collective"))
    ran = [r for r in recs if r["status"] != "waived"]
    assert {r["op"] for r in ran} == {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"}
    assert max(r["bytes"] for r in ran) == 8 << 30 and min(r["requested_bytes"] for r in ran) == 8
    for r in ran:
        assert r["status"] == "ok" and r["wrong"] == 0, r
        assert r["time_us"] > 0 and r["nccl_version"] and r["gpu_names"] == [r["gpu_names"][0]]
        assert r["algbw_gbps"] == pytest.approx(r["bytes"] / (r["time_us"] * 1e-6) / 1e9)
        assert r["busbw_gbps"] is None and "factor" in r["busbw_note"]  # one rank
    waived = [r for r in recs if r["status"] == "waived"]
    assert all(r["op"] == "all_to_all" and r["inplace"] for r in waived)
    # a topology snapshot heads the file, so it can be read without the machine
    assert next(read_results(out))["kind"] == "topology"


def test_graph_mode_is_faster_at_8B(tmp_path):
    code_e, eager, err_e = run_cli_subprocess([*SWEEP, "--ops", "all_reduce", "--sizes", "8", "--iters", "200",
                                               "--json"], timeout=900)
    code_g, graph, err_g = run_cli_subprocess([*SWEEP, "--ops", "all_reduce", "--sizes", "8", "--iters", "50",
                                               "--graph", "--json"], timeout=900)
    assert code_e == 0 and code_g == 0, err_e + err_g
    e = json.loads(eager.strip().splitlines()[-1])
    g = json.loads(graph.strip().splitlines()[-1])
    assert g["graph"] is True and 0 < g["time_us"] < e["time_us"]


def test_torch_engine_on_nccl_checks(tmp_path):
    code, out, err = run_cli_subprocess([*SWEEP, "--engine", "torch", "--backend", "nccl", "--ops",
                                         "all_reduce,all_gather,reduce_scatter", "--sizes", "8,1M,256M", "--check",
                                         "--iters", "5", "--json"], timeout=900)
    assert code == 0, err[-3000:]
    recs = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    assert len(recs) == 9 and all(r["wrong"] == 0 and r["backend"] == "nccl" for r in recs)


def test_sizes_larger_than_free_memory_say_what_fits():
    code, _, err = run_cli_subprocess([*SWEEP, "--ops", "all_reduce", "--sizes", "1G,512G"], timeout=900)
    assert code == 2
    assert err.startswith("Error: --sizes up to 512G: all_reduce out-of-place needs 1024.0 GiB per GPU")
    assert "sizes up to 1G fit" in err and "Traceback" not in err


def test_gpu_out_of_range():
    code, _, _ = run_cli_subprocess([*SWEEP, "--ops", "all_reduce", "--sizes", "8"])  # sanity: GPU 0 works
    assert code == 0
    code, _, err = run_cli_subprocess(["sweep", "--gpus", "0-63", "--sizes", "8"])
    assert code == 2 and "names 64 GPU(s) up to 63 but" in err


def test_timeout_keeps_what_was_measured(tmp_path):
    """A sweep whose first sizes finish and whose last cannot within --timeout keeps the first ones."""
    out = tmp_path / "r.jsonl"
    # A 32 GiB all_gather on one rank is a 32 GiB copy (~16 ms): 200 timed iterations take ~3 s, past
    # a 2 s deadline, while communicator set-up and the 8 B case finish well within it.
    code, _, err = run_cli_subprocess([*SWEEP, "--ops", "all_gather", "--sizes", "8,32G", "--iters", "200",
                                       "--timeout", "2", "--quiet", "--out", out], timeout=900)
    assert code == 1, err
    # The user reads what ran out, not the exception's class name (tests/cli/test_plain_errors.py).
    assert re.search(r"^Error: timeout: ", err, re.M) and "CollectiveTimeout" not in err
    recs = list(read_results(out, kind="collective"))
    assert [r["status"] for r in recs] == ["ok", "timeout"]


def test_delegated_fabric_keeps_the_matched_mode_and_resumes(tmp_path):
    """--fabric p2p-off runs in a child sweep: it measures with the options given, and --resume skips."""
    out = tmp_path / "r.jsonl"
    matched = ("--ops", "all_reduce", "--fabric", "p2p-off", "--buffers", "reuse", "--timing", "loop",
               "--alloc", "nccl", "--iters", "20", "--quiet", "--out", str(out))
    code, _, err = run_cli_subprocess([*SWEEP, "--sizes", "1M", *matched], timeout=900)
    assert code == 0, err[-3000:]
    code, _, err = run_cli_subprocess([*SWEEP, "--sizes", "1M,2M", "--resume", *matched], timeout=900)
    assert code == 0, err[-3000:]
    assert f"resume: 1 of 2 measurement(s) already recorded ok in {out}; skipped" in err
    recs = list(read_results(out, kind="collective"))
    assert [r["requested_bytes"] for r in recs] == [1 << 20, 2 << 20]
    for r in recs:
        s = r["extra"]["settings"]
        assert r["status"] == "ok" and r["fabric"] == "p2p-off", r
        assert (s["buffers"], s["timing"], s["alloc"]) == ("reuse", "loop", "nccl"), s
        assert r["transport"] and "transport_detail" in r["extra"]
