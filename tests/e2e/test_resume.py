"""`--resume`: what --out already holds as ok is not measured again, and the command says how many.

    python3 -m pytest -q tests/e2e/test_resume.py
"""

from __future__ import annotations

import json
import os

import pytest

import fabricbench
from fabricbench.errors import UsageError
from fabricbench.measuring import resume as resuming
from fabricbench.measuring.api import make_config
from fabricbench.measuring.config import SweepConfig
from fabricbench.results.writer import read_results
from clirun import one_error_line, run_cli_subprocess

ONE_RANK = dict(engine="torch", backend="gloo", ops="all_reduce,all_to_all", inplace="both", iters=3, warmup=0)


def collective(path) -> list[dict]:
    return list(read_results(path, kind="collective")) if os.path.exists(path) else []


def key(rec: dict) -> tuple:
    return rec["op"], rec["requested_bytes"], rec["inplace"]


def test_library_resume_reuses_ok_records_in_plan_order(tmp_path):
    out = str(tmp_path / "r.jsonl")
    first = fabricbench.sweep(SweepConfig(sizes="1K,4K", **ONE_RANK), out=out).records
    assert [r.status for r in first].count("ok") == 6 and [r.status for r in first].count("waived") == 2
    # An interrupted earlier run: one measurement timed out, the one before it never got written.
    lost = {key(r.to_dict()) for r in first[4:6]}
    assert lost == {("all_to_all", 1024, False), ("all_to_all", 4096, False)}
    recs = [json.loads(line) for line in open(out)]
    coll = [i for i, r in enumerate(recs) if r.get("kind") == "collective"]
    recs[coll[5]]["status"] = "timeout"
    del recs[coll[4]]
    with open(out, "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in recs)

    again = fabricbench.sweep(SweepConfig(sizes="1K,4K,16K", **ONE_RANK), out=out, resume=True).records
    plan = [(r.op, r.requested_bytes, r.inplace) for r in again]
    assert plan == sorted(plan, key=lambda k: (k[0], k[2], k[1]))  # plan order: op, in-place, size
    assert len(again) == 12
    fresh = [r for r in again if r.context["run_id"] != first[0].context["run_id"]]
    # measured now: the two lost ones and the four new 16K items (one of them waived)
    assert {(r.op, r.requested_bytes, r.inplace) for r in fresh} == lost | {
        (op, 16384, inp) for op in ("all_reduce", "all_to_all") for inp in (False, True)}
    written = collective(out)
    assert len(fresh) == 6 and len(written) == 7 + len(fresh)  # nothing reused was written twice
    assert len({key(r) for r in written if r["status"] in ("ok", "waived")}) == 12

    # Everything held: nothing measured, nothing written.
    third = fabricbench.sweep(SweepConfig(sizes="1K,4K,16K", **ONE_RANK), out=out, resume=True).records
    assert len(third) == 12 and len(collective(out)) == len(written)


def test_other_settings_are_measured_again(tmp_path):
    out = str(tmp_path / "r.jsonl")
    fabricbench.sweep(SweepConfig(sizes="1K", **{**ONE_RANK, "ops": "all_reduce", "inplace": "out-of-place"}), out=out)
    fields = {**ONE_RANK, "ops": "all_reduce", "inplace": "out-of-place"}
    for change in ({"iters": 4}, {"check": True}, {"warmup": 1}, {"dtype": "bfloat16"}):
        seen = []
        res = resuming.Resume.from_file(out, on_skip=lambda s, n: seen.append((s, n)))
        from fabricbench.measuring.runner import run_sweep

        run_sweep(make_config(**{**fields, **change}, sizes="1K"), resume=res)
        assert seen == [(0, 1)] and res.skipped == 0, change
    seen = []
    res = resuming.Resume.from_file(out, on_skip=lambda s, n: seen.append((s, n)))
    from fabricbench.measuring.runner import run_sweep

    run_sweep(make_config(**fields, sizes="1K", seed=7, timeout_s=33), resume=res)  # seed, timeout: same numbers
    assert seen == [(1, 1)]


def test_keys_of_records_and_items_agree():
    from fabricbench.measuring.plan import build_plan
    from fabricbench.measuring.runner import make_result

    config = make_config(engine="torch", backend="gloo", nprocs=2, ops="all_gather", sizes="4K")
    (item,) = build_plan(config, 2)
    rec = make_result(item=item, times=[1.0, 2.0], wrong=None, nranks=2, config=config,
                      info={"backend": "gloo", "gpus": []}, extra={"settings": resuming.settings(config)},
                      run_id="x").to_dict()
    assert resuming.record_key(rec) == resuming.item_key(item, config, nranks=2, gpus=[], backend="gloo")
    assert resuming.item_key(item, config, nranks=3, gpus=[], backend="gloo") != resuming.record_key(rec)
    # A record from before --resume existed (no settings) is never trusted.
    rec["extra"] = {}
    assert resuming.record_key(rec) is None
    # Every SweepConfig field not known to only select items is a setting: a new option counts by default.
    assert set(resuming.settings(config)) >= {"iters", "warmup", "check", "graph", "engine", "fabric"}
    assert not set(resuming.settings(config)) & resuming.SELECTING


def test_a_torn_last_record_is_cut_off_and_measured_again(tmp_path, capsys):
    """A run killed mid-write leaves half a line. --resume warns once, repairs the file (every
    line parses) and measures that item again; it was skipped past, and the next record glued onto it."""
    out = tmp_path / "r.jsonl"
    inplace = SweepConfig(sizes="1K,4K", **{**ONE_RANK, "ops": "all_reduce", "inplace": "inplace"})
    fabricbench.sweep(inplace, out=str(out))
    lines = out.read_text().splitlines(keepends=True)
    assert [json.loads(ln)["requested_bytes"] for ln in lines if '"collective"' in ln] == [1024, 4096]
    out.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])  # the 4K record, torn
    capsys.readouterr()
    again = fabricbench.sweep(inplace, out=str(out), resume=True).records
    err = capsys.readouterr().err
    assert err.count("last line was cut short") == 1 and str(out) in err
    assert [r.requested_bytes for r in again] == [1024, 4096]
    assert again[0].context["run_id"] != again[1].context["run_id"]  # 1K reused, 4K measured again
    written = [json.loads(ln) for ln in out.read_text().splitlines()]  # every line parses
    assert [r["requested_bytes"] for r in written if r.get("kind") == "collective"] == [1024, 4096]


def test_resume_without_out_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="out"):
        fabricbench.sweep(SweepConfig(sizes="1K", **ONE_RANK), resume=True)
    for cmd in (["sweep"], ["compare", "--engine", "torch", "--backend", "gloo"],
                ["scaling", "--engine", "torch", "--backend", "gloo", "--num-gpus", "2"]):
        code, _, err = run_cli_subprocess([*cmd, "--resume"])
        assert code == 2, (cmd, err)
        line = one_error_line(err, " ".join(cmd))
        # sweep's CLI checks the flags; compare and scaling's library names its parameters (resume, out)
        assert line.startswith(("Error: --resume", "Error: resume")), cmd
        assert "out" in line, cmd


@pytest.mark.slow
def test_cli_resume_with_local_ranks_says_how_many_it_skipped(tmp_path):
    out = tmp_path / "r.jsonl"
    base = ["sweep", "--engine", "torch", "--backend", "gloo", "--nprocs", "2", "--ops", "all_reduce", "--iters", "3",
            "--quiet", "--out", out]
    code, _, err = run_cli_subprocess([*base, "--sizes", "1K"], timeout=300)
    assert code == 0, err
    code, stdout, err = run_cli_subprocess([*base, "--sizes", "1K,4K", "--resume", "--json"], timeout=300)
    assert code == 0, err
    assert f"resume: 1 of 2 measurement(s) already recorded ok in {out}; skipped" in err
    shown = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert [r["requested_bytes"] for r in shown] == [1024, 4096]  # the reused one is shown, in plan order
    assert [r["requested_bytes"] for r in collective(out)] == [1024, 4096]  # and written once


@pytest.mark.slow
def test_compare_resume_runs_only_the_fabric_not_yet_complete(tmp_path):
    out = tmp_path / "c.jsonl"
    base = ["compare", "--fabrics", "default,lo:GLOO_SOCKET_IFNAME=lo", "--engine", "torch", "--backend", "gloo",
            "--nprocs", "2", "--sizes", "1K,4K", "--iters", "3", "--out", out, "--json"]
    code, _, err = run_cli_subprocess(base, timeout=300)
    assert code == 0, err
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    # the second fabric lost its last record (an interrupted run)
    drop = max(i for i, r in enumerate(recs) if r.get("fabric") == "lo" and r.get("kind") == "collective")
    out.write_text("".join(json.dumps(r) + "\n" for i, r in enumerate(recs) if i != drop))
    code, stdout, err = run_cli_subprocess([*base, "--resume"], timeout=300)
    assert code == 0, err
    assert err.count("resume: all 2 measurement(s) already recorded ok") == 1  # default only
    doc = json.loads(stdout)
    assert {(r["fabric"], r["requested_bytes"]) for r in doc["records"]} == {
        (f, b) for f in ("default", "lo") for b in (1024, 4096)}
    coll = collective(out)
    assert len([r for r in coll if r["fabric"] == "default"]) == 2  # not measured again
    assert len([r for r in coll if r["fabric"] == "lo"]) == 1 + 2  # run whole: the sweep is the unit


@pytest.mark.slow
def test_sweep_under_a_delegated_fabric_resumes(tmp_path, monkeypatch):
    """--fabric X not in force here runs in a child sweep; --resume hands it what --out holds."""
    from fabricbench.measuring import child
    from fabricbench.measuring.runner import run_sweep
    from fabricbench.results.writer import ResultWriter

    out = str(tmp_path / "r.jsonl")
    fields = {**ONE_RANK, "ops": "all_reduce", "inplace": "out-of-place", "fabric": "lo:GLOO_SOCKET_IFNAME=lo"}
    first = fabricbench.sweep(SweepConfig(sizes="4K", **fields), out=out).records
    assert [(r.requested_bytes, r.status, r.context["fabric"]) for r in first] == [(4096, "ok", "lo")]

    def resumed(sizes):
        seen = []
        res = resuming.Resume.from_file(out, on_skip=lambda s, n: seen.append((s, n)))
        with ResultWriter(out) as writer:
            results = run_sweep(make_config(**fields, sizes=sizes), writer=writer, resume=res)
        return results, seen

    again, seen = resumed("1K,4K,16K")
    assert seen == [(1, 3)]
    assert [r.requested_bytes for r in again] == [1024, 4096, 16384]  # plan order, the reused one between
    assert again[1].context["run_id"] == first[0].context["run_id"]
    written = collective(out)
    assert [r["requested_bytes"] for r in written] == [4096, 1024, 16384]  # the held one not written twice
    assert all(r["fabric"] == "lo" and r["extra"]["transport_detail"]["fabric_env"] == {"GLOO_SOCKET_IFNAME": "lo"}
               for r in written)

    # Everything held: no child is started at all.
    monkeypatch.setattr(child, "run_child", lambda *a, **k: pytest.fail("started a child with nothing to do"))
    third, seen = resumed("1K,4K,16K")
    assert seen == [(3, 3)] and [r.requested_bytes for r in third] == [1024, 4096, 16384]
    assert len(collective(out)) == 3
