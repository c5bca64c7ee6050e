"""fabricbench export --format simumax: SimuMax's system.json from a sweep, read back and priced with
SimuMax's own formula (compute_net_op_time), re-predicting the measured sweep."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fabricbench.errors import UsageError
from fabricbench.exporting import simumax
from fabricbench.results.records import read
from clirun import refused, run_cli, run_cli_captured
from roots import DATA

D = DATA / "export"
IMPORTS = DATA / "imports"
CPU_SWEEP = D / "cpu_gloo_sweep_2ranks.jsonl"  # a real 2-rank gloo sweep (SOURCES.md)
A100_PCIE = D / "simumax_a100_pcie_acdbb667.json"  # SimuMax's own configs/system/a100_pcie.json


def _export(tmp_path: Path, results: Path, *extra: str) -> tuple[dict, list[dict]]:
    out = tmp_path / "system.json"
    code, _, err = run_cli_captured(["export", results, "--format", "simumax", "--out", out, *extra])
    assert code == 0, err
    return json.loads(out.read_text()), read(results).records


def _largest(rows):
    size, measured, predicted = max(rows)
    return size, predicted / measured - 1


def test_predict_is_simumax_formula_on_its_published_config():
    doc = json.loads(A100_PCIE.read_text())
    # SimuMax, by hand: all_reduce, 8 ranks, 64 MiB on intra_node_pcie_8x (gbps 30, its eff 0.4176, latency
    # 8.98 us, multiplied by (8 - 1) · 2 since num_per_node is 8)
    want = (64 << 20) * 2 * 7 / 8 / (30 * 1024 ** 3 * 0.4176) * 1e6 + 8.98 * 7 * 2
    assert simumax.predict(doc, "all_reduce", 64 << 20, 8, "intra_node_pcie_8x") == pytest.approx(want)
    # p2p has no figures of its own: the group's bandwidth (eff 0.5, latency 10 us, not multiplied)
    assert simumax.predict(doc, "p2p", 1 << 20, 2, "intra_node_pcie_2x") == pytest.approx(
        (1 << 20) / (30 * 1024 ** 3 * 0.5) * 1e6 + 10)
    # inter-node p2p runs on one node's share of the link (gbps / num_per_node)
    assert simumax.predict(doc, "p2p", 1 << 20, 2, "inter_node") == pytest.approx(
        (1 << 20) / (25 / 8 * 1024 ** 3 * 0.6) * 1e6 + 40)
    assert simumax.predict(doc, "all_reduce", 1 << 20, 1, "inter_node") == 0.0  # one rank: no communication


def test_cpu_gloo_sweep_round_trip(tmp_path):
    doc, records = _export(tmp_path, CPU_SWEEP)
    nets = doc["networks"]
    assert doc["num_per_node"] == 2 and nets["intra_with_pcie"] is False and doc["FC8"] is False
    assert nets["high_intra_node"] == nets["low_intra_node"] and "accelerator" not in doc
    ops = nets["high_intra_node"]["op"]
    fitted = {"all_reduce", "all_gather", "reduce_scatter"}  # what the sweep measured; broadcast has no key
    assert set(doc["fabricbench"]["ops"]) == fitted
    # gbps: the best op's own figure (to the 6 digits written), the others' efficient_factor relative to it
    assert max(ops[k]["efficient_factor"] for k in fitted) == pytest.approx(1.0, abs=1e-5)
    assert "efficient_factor" not in ops["all2all"] and ops["p2p"] == {"scale": 1, "offset": 0}
    for op in fitted:
        rows = simumax.repredict(doc, records, op)
        assert len(rows) == len({r["bytes"] for r in records if r["op"] == op})
        size, err = _largest(rows)
        assert abs(err) < 0.02, (op, size, err)
        # the latency is the small sizes' time: they are re-predicted within a factor of 2 (the median of
        # the smaller sizes: a CPU sweep has outliers), where a latency left at 0 would be hundreds of times off
        ratios = sorted(p / t for s, t, p in rows if s != size)
        assert 0.5 < ratios[len(ratios) // 2] < 2, (op, ratios)


def test_eight_gpu_nccl_tests_log_round_trip(tmp_path):
    src = tmp_path / "all_reduce_perf.txt"
    shutil.copy(IMPORTS / "nccl_tests_gb200_oke_8gpu_two_trays.txt", src)
    imported = tmp_path / "imported.jsonl"
    code, _, err = run_cli_captured(["import", src, "--out", imported])
    assert code == 0, err
    doc, records = _export(tmp_path, imported)
    assert doc["num_per_node"] == 8
    # num_per_node 8: SimuMax multiplies an all_reduce's latency by (8 - 1) · 2 = 14, so the file keeps 1/14
    op = doc["networks"]["high_intra_node"]["op"]["all_reduce"]
    rows = simumax.repredict(doc, records, "all_reduce")
    size, err = _largest(rows)
    assert abs(err) < 0.02 and size == max(r["bytes"] for r in records)
    small = min(rows)
    assert small[2] == pytest.approx(op["latency_us"] * 14 + small[0] * 2 * 7 / 8 / (
        doc["networks"]["high_intra_node"]["bandwidth"]["gbps"] * op["efficient_factor"] * 1024 ** 3) * 1e6)
    assert 0.5 < small[2] / small[1] < 2


def test_two_node_log_fills_inter_node(tmp_path):
    src = tmp_path / "all_gather_perf.txt"
    shutil.copy(IMPORTS / "nccl_tests_2_18_3_gb10_two_runs.txt", src)
    imported = tmp_path / "imported.jsonl"
    code, _, err = run_cli_captured(["import", src, "--out", imported])
    assert code == 0, err
    doc, records = _export(tmp_path, imported)
    assert list(doc["networks"]) == ["inter_node"] and doc["num_per_node"] == 1
    size, err = _largest(simumax.repredict(doc, records, "all_gather"))
    assert abs(err) < 0.02


def test_base_config_is_filled_not_replaced(tmp_path):
    doc, records = _export(tmp_path, CPU_SWEEP, "--base", str(A100_PCIE))
    base = json.loads(A100_PCIE.read_text())
    assert doc["accelerator"] == base["accelerator"] and doc["num_per_node"] == 8
    nets = doc["networks"]
    assert nets["intra_with_pcie"] is True  # 2 ranks on a PCIe machine: SimuMax's intra_node_pcie_2x group
    assert nets["inter_node"] == base["networks"]["inter_node"]
    assert nets["intra_node_pcie_8x"] == base["networks"]["intra_node_pcie_8x"]
    group = nets["intra_node_pcie_2x"]
    assert group["bandwidth"] == base["networks"]["intra_node_pcie_2x"]["bandwidth"]  # nominal 30 kept
    assert group["op"]["all2all"] == base["networks"]["intra_node_pcie_2x"]["op"]["all2all"]  # not measured
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        _, err = _largest(simumax.repredict(doc, records, op))
        assert abs(err) < 0.02, op
    # an NVLink-fast sweep against this PCIe base: the efficient_factor above 1 is said
    fast = [{**r, "time_us": r["time_us"] / 100} for r in records]
    _, notes = simumax.system(fast, base=str(A100_PCIE))
    assert any("faster than --base's nominal 30 GiB/s" in n for n in notes)
    assert not any("faster than" in n for n in simumax.system(records, base=str(A100_PCIE))[1])


def test_simumax_export_refusals(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    line = refused(["export", CPU_SWEEP, "--format", "simumax", "--out", tmp_path / "o.json", "--base", bad], capsys)
    assert "--base" in line and "not JSON" in line
    code, _, err = run_cli(["export", CPU_SWEEP, "--format", "simumax", "--out", tmp_path / "o.json", "--group", "DP"],
                           capsys)
    assert code == 0 and "warning: --group is ignored by --format simumax" in err, err
    only_bcast = [r for r in read(CPU_SWEEP).records if r["op"] == "broadcast"]
    with pytest.raises(UsageError, match="SimuMax's network ops"):
        simumax.system(only_bcast)
    with pytest.raises(UsageError, match="no fitted all_to_all"):
        simumax.repredict(simumax.system(read(CPU_SWEEP).records)[0], [], "all_to_all")


@pytest.mark.slow
def test_live_gloo_sweep_round_trip(tmp_path):
    # a sweep measured now (2 gloo ranks), exported with the command, read back: SimuMax re-predicts its
    # largest size of every op within 2%, whatever the load on the machine
    import fabricbench

    sweep = tmp_path / "sweep.jsonl"
    fabricbench.sweep(fabricbench.SweepConfig(engine="torch", backend="gloo", nprocs=2, iters=5, warmup=1,
                                              ops="all_reduce,all_gather,reduce_scatter", sizes="1K-1M:x8"),
                      out=str(sweep))
    doc, records = _export(tmp_path, sweep)
    assert doc["num_per_node"] == 2 and set(doc["fabricbench"]["ops"]) == {"all_reduce", "all_gather",
                                                                         "reduce_scatter"}
    for op in doc["fabricbench"]["ops"]:
        rows = simumax.repredict(doc, records, op)
        assert len(rows) == 4
        size, err = _largest(rows)
        assert size == 512 << 10 and abs(err) < 0.02, (op, err)  # 1K-1M:x8 is 1K, 8K, 64K, 512K
