"""relate's coverage: how many held-out observed steps lie inside their predicted 95% interval
(fabricbench/relating/coverage.py), in the result, `relate --json` and the text table.

Records built by hand in test_relate's made-up world, so each interval is computed here: e = 1, no link
credit, sweeps without spread, so the interval is the prediction moved by the reference step's interval.
"""

from __future__ import annotations

import json

import pytest

import fabricbench
from clirun import run_cli
from tests.unit.test_relate import DDP_TRACE, FSDP_TRACE, sweep, t_comm, train_rec

REF_STEP, REL = 0.3, 0.05  # the reference's step and its 95% interval, ± 5%


def _with_ci(rec, rel=REL):
    rec["step_time"]["ci95_rel"] = rel
    return rec


def _records(ddp_off, fsdp_off):
    """DDP and FSDP on fast (the reference) and slow: slow's observed step is the prediction + `off` s."""
    recs = sweep("fast", 10.0) + sweep("slow", 1.0)
    for name, tr, off in (("ddp", DDP_TRACE, ddp_off), ("fsdp", FSDP_TRACE, fsdp_off)):
        pred = REF_STEP - t_comm(tr, 10.0) + t_comm(tr, 1.0)  # e = 1: every second of communication exposed
        recs += [_with_ci(train_rec(name, "fast", REF_STEP, tr, exposed=1.0)),
                 _with_ci(train_rec(name, "slow", pred + off, tr, exposed=1.0))]
    return recs


def test_coverage_counts_held_out_points_inside_their_interval():
    # the interval is the prediction -14/+15 ms (the reference step's ± 5%): +10 ms inside, +40 ms outside
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=_records(0.010, 0.040)))
    ddp = next(r for r in res.rows if r.strategy == "ddp" and r.fabric == "slow")
    pred = REF_STEP - t_comm(DDP_TRACE, 10.0) + t_comm(DDP_TRACE, 1.0)
    # the reference's own interval is a factor of 1.05 either way: [0.3 / 1.05, 0.3 * 1.05]
    assert ddp.predicted_step_ci95 == pytest.approx([pred - (REF_STEP - REF_STEP / (1 + REL)),
                                                     pred + REL * REF_STEP])
    cov = res.coverage
    assert (cov.covered, cov.points, cov.fraction) == (1, 2, 0.5)  # the references are not held out
    assert len(cov.outside) == 1 and cov.outside[0].startswith("fsdp on slow (lab, 2 ranks): observed")
    assert cov.line() == "coverage: 1 of 2 observed steps inside their predicted 95% interval (50%)"
    assert fabricbench.relate(fabricbench.RelateConfig(inputs=_records(-0.014, 0.0149))).coverage.covered == 2
    assert fabricbench.relate(fabricbench.RelateConfig(inputs=_records(-0.016, 0.016))).coverage.covered == 0


def test_coverage_in_json_and_text(tmp_path, capsys):
    path = tmp_path / "lab.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _records(0.010, 0.040)))
    code, out, err = run_cli(["relate", path, "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert {k: doc["coverage"][k] for k in ("covered", "points", "fraction")} == {"covered": 1, "points": 2,
                                                                                  "fraction": 0.5}
    # the errors of the same held-out points beside the coverage
    errs = sorted(abs(r["predicted_step_s"] / r["observed_step_s"] - 1) for r in doc["rows"]
                  if r["fabric"] != doc["reference"])
    assert len(errs) == 2 and errs[0] < errs[1]
    assert doc["coverage"]["median_abs_error"] == pytest.approx((errs[0] + errs[1]) / 2)
    assert doc["coverage"]["max_abs_error"] == pytest.approx(errs[1])
    code, out, err = run_cli(["relate", path], capsys)
    assert code == 0, err
    assert (f"2 held-out points: median |error| {(errs[0] + errs[1]) / 2:.1%}, largest {errs[1]:.1%}; coverage: 1 "
            f"of 2 observed steps inside their predicted 95% interval (50%)") in out


def test_no_held_out_point_says_so():
    recs = sweep("fast", 10.0) + sweep("slow", 1.0) + [_with_ci(train_rec("ddp", "fast", REF_STEP, DDP_TRACE,
                                                                           exposed=1.0))]
    cov = fabricbench.relate(fabricbench.RelateConfig(inputs=recs)).coverage
    assert (cov.points, cov.fraction) == (0, None) and cov.line().startswith("coverage: no held-out point")


def test_two_runs_that_agree_by_chance_keep_their_own_interval():
    # two reference runs 0.1% apart, each with a ±14% interval of its own: the run-to-run interval alone
    # (±~0.3%) would claim what neither run knows; with fewer than 3 runs the interval is at least theirs
    runs = [_with_ci(train_rec("ddp", "fast", s, DDP_TRACE, exposed=1.0), 0.14) for s in (0.3, 0.3003)]
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=sweep("fast", 10.0) + sweep("slow", 1.0) + runs))
    ref = next(r for r in res.rows if r.fabric == "fast")
    mid = (0.3 + 0.3003) / 2
    assert ref.predicted_step_ci95 == pytest.approx([mid / 1.14, mid * 1.14], rel=1e-3)
    three = [_with_ci(train_rec("ddp", "fast", s, DDP_TRACE, exposed=1.0), 0.14) for s in (0.3, 0.3003, 0.2997)]
    both = sweep("fast", 10.0) + sweep("slow", 1.0)
    ref3 = next(r for r in fabricbench.relate(fabricbench.RelateConfig(inputs=both + three)).rows if r.fabric == "fast")
    assert ref3.predicted_step_ci95[1] - ref3.predicted_step_ci95[0] < 0.01 * mid  # 3 runs: run to run stands


def test_runs_noisier_than_their_step_are_related_not_crashed():
    # CI's loaded 2-core VM: two runs whose own ci95_rel was above 1; the widened interval reached 0 and the
    # study's relate unit died dividing by it. Now the interval is a factor either way, always above 0.
    runs = [_with_ci(train_rec("ddp", f, s, DDP_TRACE, exposed=1.0), 1.3)
            for f, s in (("fast", 0.3), ("fast", 0.31), ("slow", 0.5), ("slow", 0.52))]
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=sweep("fast", 10.0) + sweep("slow", 1.0) + runs))
    slow = next(r for r in res.rows if r.fabric == "slow")
    assert slow.observed_slowdown_ci95 is not None and 0 < slow.observed_slowdown_ci95[0] < 1.67
    assert all(v > 0 for v in slow.predicted_step_ci95)


def test_runs_that_disagree_beyond_their_own_intervals_are_named():
    # the one-GPU lab on an H100: a reference's first run on a machine just started took 44.5 ms a step
    # (±6%), its last 26.2 ms (±4%); the median of the two set every prediction. relate says so, and the
    # three runs' median is the middle run's: one drifted run moves nothing
    def runs(*steps):
        return [_with_ci(train_rec("ddp", "fast", s, DDP_TRACE, exposed=1.0), 0.05) for s in steps]
    base = sweep("fast", 10.0) + sweep("slow", 1.0)
    apart = [p for p in fabricbench.relate(fabricbench.RelateConfig(inputs=base + runs(0.445, 0.262))).problems
             if "disagree beyond" in p]
    assert len(apart) == 1
    assert apart[0].startswith("ddp (lab, 2 ranks, fp32, batch 2) on fast: its 2 runs disagree beyond")
    assert "445 ms [424-467], 262 ms [250-275]" in apart[0]
    assert not [p for p in fabricbench.relate(fabricbench.RelateConfig(inputs=base + runs(0.30, 0.31))).problems
                if "disagree beyond" in p]
    three = fabricbench.relate(fabricbench.RelateConfig(inputs=base + runs(0.445, 0.262, 0.265)))
    assert next(r for r in three.rows if r.fabric == "fast").observed_step_s == pytest.approx(0.265)
