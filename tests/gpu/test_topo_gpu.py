"""One-GPU tier for the topology and fabric layer: NVML topology, host<->GPU copies, compare on one GPU.

    pytest tests/gpu/test_topo_gpu.py
"""

from __future__ import annotations

import json
import re

import pytest

from clirun import run_cli_subprocess


@pytest.mark.gpu(1)
def test_nvml_topology_names_the_gpu():
    from fabricbench.topology import snapshot
    from fabricbench.topology.nvml import read_nvml

    t = read_nvml()
    assert t is not None and t.source == "nvml" and len(t.gpus) >= 1
    g = t.gpus[0]
    assert g.index == 0 and g.name and "NVIDIA" in g.name
    assert re.fullmatch(r"GPU-[0-9a-f-]{36}", g.uuid)
    assert re.fullmatch(r"[0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]", g.bus_id)
    assert g.pcie_gen_max is not None and g.pcie_gen_max >= 3 and g.pcie_width_max in (1, 2, 4, 8, 16)
    assert t.links[0][0] == "X" and len(t.islands()) >= 1
    snap = snapshot()
    assert snap["gpus"][0]["uuid"] == g.uuid and snap["links"] == [list(r) for r in t.links]


@pytest.mark.gpu(1)
def test_host_device_copy_bandwidth():
    from fabricbench.measuring.copy import measure_all

    res = measure_all((0,), 256 << 20, 3, 10, peers=False)
    by = {r.direction: r for r in res}
    assert set(by) == {"h2d", "d2h", "bidir"}
    assert by["h2d"].gbps > 10 and by["d2h"].gbps > 10 and by["bidir"].gbps > by["h2d"].gbps * 0.9
    assert by["h2d"].gbps == pytest.approx((256 << 20) / (by["h2d"].time_us * 1e-6) / 1e9)


@pytest.mark.gpu(1)
def test_compare_on_one_gpu_records_the_transport(tmp_path):
    out = tmp_path / "cmp.jsonl"
    code, stdout, err = run_cli_subprocess(["compare", "--fabrics", "default,p2p-off", "--gpus", "0", "--sizes",
                                            "1M,64M", "--iters", "5", "--warmup", "2", "--out", out, "--json"],
                                           timeout=300)
    assert code == 0, err
    doc = json.loads(stdout)
    recs = [json.loads(l) for l in out.read_text().splitlines()]
    assert recs[0]["kind"] == "topology"
    coll = [r for r in recs if r["kind"] == "collective"]
    assert [r["fabric"] for r in coll] == ["default", "default", "p2p-off", "p2p-off"]
    assert all(r["transport"] == "none (single rank)" and r["nranks"] == 1 for r in coll)
    assert all(r["extra"]["transport_detail"]["nranks"] == 1 for r in coll)
    assert all(r["env"].get("NCCL_P2P_DISABLE") == "1" for r in coll if r["fabric"] == "p2p-off")
    assert doc["metric"] == "algbw_gbps" and all(row["ratio"]["default"] == 1.0 for row in doc["comparison"])
