"""qualify --from folds imported DCGM diagnostics and NCCL RAS health into the node's verdicts; --fleet reads them."""

from __future__ import annotations

import json

import fabricbench
from fabricbench.importing import import_file
from fabricbench.qualifying.api import fleet
from fabricbench.qualifying.config import FleetConfig
from fabricbench.results.status import Severity, Status
from roots import DATA

D = DATA / "imports"


def _node(tmp_path, name, files):
    path = tmp_path / f"{name}.jsonl"
    recs = [r for f in files for r in import_file(D / f).records]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_dcgm_failure_is_critical_and_ras_names_host_and_gpu(tmp_path):
    node = _node(tmp_path, "bad", ["nccl_tests_gb200_nvl72.txt", "dcgm_diag/dcgm_4_2_3_gb10_software_fail.json",
                                   "nccl_ras/ncclras_SYNTHETIC_2_28_7_missing_rank_malformed.json",
                                   "nccl_ras/ncclras_ray_a10g_2_28_9_mismatch.json"])
    res = fabricbench.qualify(fabricbench.QualifyConfig(spec="builtin:h200-sxm-8", records_from=node,
                                                        out=tmp_path / "bad"))
    v = {x.check: x for x in res.verdicts}
    assert (v["dcgm"].status, v["dcgm"].severity, v["dcgm"].code) == (Status.FAIL, Severity.CRITICAL, "FB_DCGM_FAIL")
    assert "DCGM error 29 (software other, severity config)" in v["dcgm"].reason
    ras = v["nccl_ras"]
    assert (ras.severity, ras.code) == (Severity.CRITICAL, "FB_RAS_MISSING_RANK")
    assert "rank 1 host node-b GPU 3 pid 200" in ras.reason
    assert {i.criterion for i in ras.items} == {"missing", "dead", "error"}  # error: RAS's gather timed out
    assert "NCCL: unresponsive, dead" in ras.reason
    mm = v["nccl_ras_mismatch"]
    assert (mm.severity, mm.code) == (Severity.WARNING, "FB_RAS_MISMATCH") and "host 10.0.109.86 GPU 0" in mm.reason
    assert res.verdicts and "FB_DCGM_FAIL" in json.loads((tmp_path / "bad" / "verdicts.json").read_text())[
        "verdicts"][-3]["code"]


def test_healthy_imports_pass_and_the_fleet_counts_per_node(tmp_path):
    good = _node(tmp_path, "good", ["nccl_tests_gb200_nvl72.txt", "dcgm_diag/dcgm_3_1_0_nvidia_jsonresult_test_8gpu.json",
                                    "nccl_ras/ncclras_nccl1730_2_26_2_ok.txt"])
    res = fabricbench.qualify(fabricbench.QualifyConfig(spec="builtin:h200-sxm-8", records_from=good,
                                                        out=tmp_path / "good"))
    v = {x.check: x for x in res.verdicts}
    assert v["dcgm"].status == Status.PASS and len(v["dcgm"].items) == 80
    assert v["nccl_ras"].status == Status.PASS and "nccl_ras_mismatch" not in v
    bad = _node(tmp_path, "bad", ["nccl_tests_gb200_nvl72.txt", "dcgm_diag/dcgm_4_2_3_gb10_software_fail.json",
                                  "nccl_ras/ncclras_nccl1911_2_26_2_mismatch.txt"])
    fabricbench.qualify(fabricbench.QualifyConfig(spec="builtin:h200-sxm-8", records_from=bad, out=tmp_path / "bad"))
    for name, src in (("good", good), ("bad", bad)):  # the fleet's figures come from each node's results.jsonl,
        with open(tmp_path / name / "results.jsonl", "a") as fh:  # where a sweep's records name requested_bytes
            for line in src.read_text().splitlines():
                r = json.loads(line)
                if r["kind"] == "collective":
                    r["requested_bytes"] = r["bytes"]
                fh.write(json.dumps(r) + "\n")
    fl = fleet(FleetConfig(inputs=[tmp_path / "good", tmp_path / "bad"]), quiet=True)
    nodes = {n.name: n for n in fl.nodes}
    assert nodes["bad"].checks["dcgm"] == (Severity.CRITICAL, "FB_DCGM_FAIL")
    assert nodes["bad"].checks["nccl_ras_mismatch"] == (Severity.WARNING, "FB_RAS_MISMATCH")
    assert {"FB_DCGM_FAIL", "FB_RAS_MISMATCH"} <= set(nodes["bad"].codes)
    assert nodes["good"].checks["dcgm"][1] == "FB_PASS" and "dcgm" not in nodes["good"].failed
