"""`fabricbench compare`: the ratio table, child runs under a fabric, and end to end on gloo CPU ranks."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from fabricbench.reporting.analysis import comparison
from fabricbench.fabrics import get_fabric
from fabricbench.jobs.configs import SweepDelivery, sweep_command
from fabricbench.measuring.child import ChildRun, run_child
from fabricbench.measuring.config import SweepConfig
from fabricbench.results import read_results
from clirun import run_cli_subprocess

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _rec(op, nbytes, busbw, nranks=2, algbw=None):
    return {"op": op, "dtype": "float32", "inplace": False, "bytes": nbytes, "nranks": nranks,
            "busbw_gbps": busbw, "algbw_gbps": algbw if algbw is not None else busbw}


def test_comparison_ratio_against_first_fabric():
    runs = [ChildRun(fabric=get_fabric("default"), records=[_rec("all_reduce", 1 << 20, 300.0),
                                                             _rec("all_reduce", 1 << 30, 400.0)]),
            ChildRun(fabric=get_fabric("p2p-off"), records=[_rec("all_reduce", 1 << 20, 30.0),
                                                             _rec("all_reduce", 1 << 30, 50.0)]),
            ChildRun(fabric=get_fabric("net"), records=[_rec("all_reduce", 1 << 30, 10.0)])]
    t = comparison(runs)
    assert t["metric"] == "busbw_gbps" and t["note"] is None and t["fabrics"] == ["default", "p2p-off", "net"]
    small, big = t["rows"]
    assert small["bytes"] == 1 << 20 and small["ratio"] == {"default": 1.0, "p2p-off": 0.1, "net": None}
    assert big["ratio"]["p2p-off"] == pytest.approx(0.125) and big["ratio"]["net"] == pytest.approx(0.025)


def test_comparison_single_rank_uses_algbw():
    runs = [ChildRun(fabric=get_fabric("default"), records=[_rec("all_reduce", 1 << 20, None, 1, 1000.0)]),
            ChildRun(fabric=get_fabric("p2p-off"), records=[_rec("all_reduce", 1 << 20, None, 1, 800.0)])]
    t = comparison(runs)
    assert t["metric"] == "algbw_gbps" and "busbw factor is 0" in t["note"]
    assert t["rows"][0]["ratio"]["p2p-off"] == pytest.approx(0.8)


def test_sweep_command_names_fabric_out_and_resume_once():
    """The parent's additions come from SweepDelivery, never twice: the sweep's own fabric is no option (the
    delivery names it), a sweep type with a field of the delivery is refused (the child would get the flag
    twice), and a custom fabric goes by name alone."""
    job = SweepConfig(ops="all_reduce", sizes="1K", iters=2, warmup=0, engine="native", check=True, gpus=(0, 2))
    cmd = sweep_command(dataclasses.replace(job, fabric="p2p-off"),
                        SweepDelivery(fabric="sec:MY_TOKEN=hunter2", out="/w/out.jsonl", resume=True))
    assert cmd[:8] == [sys.executable, "-m", "fabricbench", "sweep", "--gpus", "0,2", "--ops", "all_reduce"]
    assert "--check" in cmd and cmd.count("--fabric") == 1
    assert cmd[-6:] == ["--fabric", "sec", "--out", "/w/out.jsonl", "--quiet", "--resume"]
    assert not any("hunter2" in a for a in cmd)

    @dataclasses.dataclass(frozen=True)
    class Own:
        out: str = "x.jsonl"

    with pytest.raises(ValueError, match="from the delivery"):
        sweep_command(Own(), SweepDelivery(fabric="default", out="o"))


_JOB = SweepConfig(ops="all_reduce", sizes="1K", iters=2, warmup=0, engine="native")


def _fake_spawn(monkeypatch, seen, *, write=None, rc=0, stderr=""):
    """procs.spawn stand-in: `write(cmd, env)` plays the child's files, then a real process exits rc."""
    def spawn(argv, env, stdout, stderr_fh):
        seen["cmd"], seen["env"] = argv, env
        if write:
            write(argv, env)
        return subprocess.Popen(["sh", "-c", f"printf '%s' \"$E\" >&2; exit {rc}"], env={"E": stderr},
                                stdout=stdout, stderr=stderr_fh, text=True)

    monkeypatch.setattr("fabricbench.procs.spawn", lambda argv, env=None, stdout=None, stderr=None:
                        spawn(argv, env, stdout, stderr))


def test_run_child_reads_records_and_transport(monkeypatch):
    """A stand-in child writes one record and an NCCL log that shows P2P under p2p-off: flagged."""
    seen = {}

    def write(cmd, env):
        out = cmd[cmd.index("--out") + 1]
        with open(out, "w") as fh:
            fh.write(json.dumps({"kind": "topology", "run_id": "c"}) + "\n")
            fh.write(json.dumps({"kind": "collective", "run_id": "c", "fabric": "p2p-off", "nranks": 2,
                                 "op": "all_reduce", "bytes": 1024, "extra": {"rotate": 2}}) + "\n")
        log = env["NCCL_DEBUG_FILE"].replace("%h", "node").replace("%p", "42")
        with open(log, "w") as fh:
            fh.write("node:42:43 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init START\n"
                     "node:42:43 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n")

    _fake_spawn(monkeypatch, seen, write=write)
    streamed = []
    run = run_child(get_fabric("p2p-off"), _JOB, base_env={"NCCL_ALGO": "Ring"},
                    extra={"placement": "intra-island"}, on_record=streamed.append)
    assert seen["cmd"][:4] == [sys.executable, "-m", "fabricbench", "sweep"]
    assert seen["cmd"][-5:-3] == ["--fabric", "p2p-off"] and seen["cmd"][-1] == "--quiet"
    assert seen["env"]["NCCL_P2P_DISABLE"] == "1" and seen["env"]["NCCL_ALGO"] == "Ring"
    assert seen["env"]["FABRICBENCH_FABRIC_APPLIED"] == "p2p-off"
    assert run.error is None and len(run.records) == 1  # the child's topology record is not carried
    assert streamed == run.records
    rec = run.records[0]
    assert rec["transport"] == "P2P/CUMEM" and run.transport == "P2P/CUMEM"
    assert rec["transport_mismatch"] == run.mismatch and "NCCL used P2P/CUMEM" in run.mismatch
    assert rec["extra"]["rotate"] == 2 and rec["extra"]["placement"] == "intra-island"
    assert rec["extra"]["transport_detail"]["transports"] == ["P2P/CUMEM"]
    assert rec["extra"]["transport_detail"]["expected"] == "SHM"
    assert rec["extra"]["transport_detail"]["fabric_env"] == {"NCCL_P2P_DISABLE": "1"}
    assert rec["shaped_rate_bps"] is None


def test_run_child_failure_is_reported(monkeypatch):
    msg = "Error: --gpus 0,1 names 2 GPU(s) up to 1 but 1 are visible (0-0)"
    _fake_spawn(monkeypatch, {}, rc=2, stderr=msg + "\n")
    run = run_child(get_fabric("default"), _JOB)
    assert run.returncode == 2 and run.records == []
    assert run.error == msg


@pytest.mark.parametrize("args,msg", [
    (["--fabrics", "nvlink"], "unknown fabric 'nvlink'; choose from default, p2p-off, net"),
    (["--fabrics", "x:BAD"], "'BAD' is not VAR=VALUE"),
    (["--fabrics", "default", "--ops", "all_mix"], "unknown op 'all_mix'"),
    (["--fabrics", "default", "--iters", "0"], "--iters 0"),
    (["--fabrics", "default", "--plot", "/nonexistent/dir/x.png"], "--plot /nonexistent/dir/x.png"),
])
def test_compare_bad_input(args, msg):
    code, _, err = run_cli_subprocess(["compare", *args], timeout=300)
    assert code == 2, err
    assert msg in err and err.startswith("Error: ") and "Traceback" not in err


@pytest.mark.slow
def test_compare_end_to_end_on_gloo(tmp_path):
    out, png = tmp_path / "cmp.jsonl", tmp_path / "cmp.png"
    code, stdout, err = run_cli_subprocess(
        ["compare", "--fabrics", "default,lo:GLOO_SOCKET_IFNAME=lo", "--engine", "torch", "--backend", "gloo",
         "--nprocs", "2", "--ops", "all_reduce,all_gather", "--sizes", "1K-64K:x4", "--iters", "3", "--warmup", "1",
         "--out", out, "--plot", png, "--json"], timeout=300)
    assert code == 0, err
    doc = json.loads(stdout)
    recs = list(read_results(out, kind="collective"))
    assert len(recs) == 2 * 2 * 4  # fabrics x ops x sizes (1K, 4K, 16K, 64K)
    assert {r["fabric"] for r in recs} == {"default", "lo"}
    assert len({r["run_id"] for r in recs}) == 1 and recs[0]["run_id"] == doc["run_id"]
    assert all(r["transport"] == "gloo (no NCCL)" and r["nranks"] == 2 for r in recs)
    lo = [r for r in recs if r["fabric"] == "lo"]
    assert all(r["env"].get("GLOO_SOCKET_IFNAME") == "lo" for r in lo)
    assert all("GLOO_SOCKET_IFNAME" not in r["env"] for r in recs if r["fabric"] == "default")
    assert sorted({r["bytes"] for r in recs if r["op"] == "all_reduce"}) == [1024, 4096, 16384, 65536]
    by = {(r["fabric"], r["op"], r["bytes"]): r["busbw_gbps"] for r in recs}
    assert len(doc["comparison"]) == 8
    for row in doc["comparison"]:
        want = by[("lo", row["op"], row["bytes"])] / by[("default", row["op"], row["bytes"])]
        assert row["ratio"]["lo"] == pytest.approx(want, rel=1e-12) and row["ratio"]["default"] == 1.0
        assert row["busbw_gbps"]["lo"] == by[("lo", row["op"], row["bytes"])]
    assert doc["transport"] == {"default": "gloo (no NCCL)", "lo": "gloo (no NCCL)"}
    assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 5000


@pytest.mark.slow
def test_compare_keeps_other_fabrics_when_one_fails(tmp_path):
    out = tmp_path / "cmp.jsonl"
    code, stdout, err = run_cli_subprocess(
        ["compare", "--fabrics", "default,broken:GLOO_SOCKET_IFNAME=nonexistent0", "--engine", "torch", "--backend",
         "gloo", "--nprocs", "2", "--sizes", "1K,4K", "--iters", "2", "--warmup", "0", "--out", out], timeout=300)
    assert code == 1
    assert "fabric broken failed:" in err and "nonexistent0" in err
    recs = list(read_results(out, kind="collective"))
    assert [r["fabric"] for r in recs] == ["default", "default"] and [r["bytes"] for r in recs] == [1024, 4096]
    assert "default" in stdout and "FAILED" in stdout
