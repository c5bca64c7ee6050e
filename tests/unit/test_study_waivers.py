"""One rule for a fabric that changes nothing on the chosen backend, and a study across
nodes of one rank each: what the plan waives and why, what a waived unit records,
and what "In short" says about a busbw ratio whose interval holds 1.

Fast: nothing here starts a rank (a waived unit runs no child; the report parts read records built here).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from fabricbench.errors import UsageError
from fabricbench.fabrics import get_fabric
from fabricbench.measuring import child
from fabricbench.measuring.config import SweepConfig
from fabricbench.results.schema import CollectiveResult
from fabricbench.studying import plan as study_plan
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.report.common import waived_fabrics
from fabricbench.studying.report.short import busbw_said
from fabricbench.studying.runner import run_units
from clirun import run_cli

MODEL = "tiny-mistral"


def _config(tmp_path, **kw):
    base = dict(out=str(tmp_path / "s"), device="cpu", nprocs=2, fabrics=("default", "p2p-off"),
                strategies=("ddp",), model=MODEL, repeats=1)
    base.update(kw)
    return StudyConfig(**base)


def _nodes(tmp_path, **kw):
    return _config(tmp_path, nnodes=2, node_rank=0, master_addr="127.0.0.1", master_port=29531, **kw)


# -- item 4: p2p-off on gloo ------------------------------------------------------------------------------------
def test_study_waives_p2p_off_on_gloo_with_compares_own_words(tmp_path):
    units = {u.name: u for u in study_plan.build_plan(_config(tmp_path))}
    job = SweepConfig(ops="all_reduce", sizes="1K", iters=1, warmup=0, engine="torch", backend="gloo", nprocs=2)
    compare_says = child.run_child(get_fabric("p2p-off"), job).waived  # refused before any child starts
    assert compare_says and "change nothing" in compare_says
    for name in ("sweep @ p2p-off", "train ddp @ p2p-off"):
        assert units[name].waived == compare_says
    assert units["relate"].waived and "waived" in units["relate"].waived  # one fabric left: nothing to relate
    for name in ("sweep @ default", "train ddp @ default", "machine", "estimate"):
        assert units[name].waived is None


def test_the_study_asks_the_one_rule(tmp_path, monkeypatch):
    """The study decides through measuring.child.waiver, the function compare's run_child asks: change the
    rule there and both follow."""
    monkeypatch.setattr(study_plan, "waiver", lambda fabric, **kw: "ruled here" if fabric.name == "default" else None)
    units = {u.name: u for u in study_plan.build_plan(_config(tmp_path))}
    assert units["sweep @ default"].waived == "ruled here" and units["sweep @ p2p-off"].waived is None


def test_a_gpu_study_keeps_p2p_off(tmp_path, monkeypatch):
    cfg = SimpleNamespace(device="cuda", fabrics=("default", "p2p-off"))
    assert study_plan.fabric_waiver(cfg, "p2p-off") is None  # NCCL reads NCCL_P2P_DISABLE there


def test_a_waived_unit_is_recorded_and_runs_nothing(tmp_path):
    c = _config(tmp_path)
    waived = [u for u in study_plan.build_plan(c) if u.waived]
    runs = run_units(c, waived, resume=False, progress=False)
    assert {r.status for r in runs} == {"waived"} and all(not r.commands for r in runs)
    recs = [json.loads(line) for line in (Path(c.out) / "results.jsonl").read_text().splitlines()]
    units = {r["name"]: r for r in recs if r["kind"] == "study_unit"}
    by_name = {u.name: u for u in waived}
    for name in ("sweep @ p2p-off", "train ddp @ p2p-off", "relate"):
        assert units[name]["status"] == "waived" and units[name]["message"] == by_name[name].waived
    sr = SimpleNamespace(units=units)
    assert set(waived_fabrics(sr, c)) == {"p2p-off"}


def test_dry_run_says_which_units_are_waived_and_why(tmp_path, capsys):
    code, out, err = run_cli(["study", "--device", "cpu", "--nprocs", "2", "--fabrics", "default,p2p-off", "--model",
                              MODEL, "--strategies", "ddp", "--repeats", "1", "--out", tmp_path / "d", "--dry-run",
                              "--json"], capsys)
    assert code == 0, err
    plan = {u["name"]: u for u in json.loads(out)["plan"]}
    assert "change nothing" in plan["sweep @ p2p-off"]["waived"] and plan["sweep @ default"]["waived"] is None


# -- "In short" never calls noise a slowdown --------------------------------------------------------------------
def _coll(fabric: str, busbw: float, rel: float | None, iters: int = 20) -> CollectiveResult:
    t = 1000.0
    return CollectiveResult.from_record({
        "kind": "collective", "fabric": fabric, "op": "all_reduce", "dtype": "float32", "bytes": 1 << 20,
        "requested_bytes": 1 << 20, "count": 1 << 18, "nranks": 2, "gpus": [], "inplace": False, "graph": False,
        "iters": iters, "time_us": t, "mean_us": t, "min_us": t / 2, "max_us": t * 2, "p95_us": t, "cv": 0.1,
        "ci95_rel": rel, "algbw_gbps": busbw, "busbw_gbps": busbw, "busbw_factor": 1.0, "busbw_note": None,
        "wrong": None, "status": "ok", "engine": "torch", "backend": "gloo"})


def test_in_short_calls_a_ratio_slower_only_when_its_interval_says_so():
    noise = busbw_said([_coll("default", 1.68, 0.4), _coll("x", 1.0, 0.4)], "default", "x", 0.02)
    assert "no difference shown" in noise and "load noise" in noise
    real = busbw_said([_coll("default", 10.0, 0.05), _coll("x", 1.0, 0.05)], "default", "x", 0.02)
    assert real.startswith("10.00× slower (95% CI")
    none = busbw_said([_coll("default", 1.68, None, iters=2), _coll("x", 1.0, None, iters=2)], "default", "x", 0.02)
    assert "no interval" in none and not none.startswith("1.68× slower")


# -- item 11: nodes of one rank each ---------------------------------------------------------------------------
def test_two_nodes_of_one_rank_are_a_study(tmp_path):
    c = _nodes(tmp_path, nprocs=1, fabrics=("default",))
    assert c.world_size == 2
    units = {u.name: u for u in study_plan.build_plan(c)}
    assert units["sweep @ default"].span and units["sweep @ default"].waived is None
    assert units["train ddp @ default"].span and units["train ddp @ default"].waived is None
    intra = units["intra-node sweep @ default"]
    assert intra.waived and "one rank per node" in intra.waived


def test_one_rank_on_one_node_is_still_refused(tmp_path):
    with pytest.raises(UsageError, match="at least 2 ranks"):
        _config(tmp_path, nprocs=1)


def test_two_ranks_per_node_keep_the_intra_node_sweep(tmp_path):
    units = {u.name: u for u in study_plan.build_plan(_nodes(tmp_path, fabrics=("default",)))}
    assert units["intra-node sweep @ default"].waived is None
