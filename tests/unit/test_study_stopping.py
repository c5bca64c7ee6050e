"""The study's stopping rule on the question (studying/units/train.enough_runs): another round while a comparison is
undecided, none once every one is decided; a round is all or nothing; out of budget it names what is open."""

from __future__ import annotations

import time
from pathlib import Path

from fabricbench.studying.config import StudyConfig
from fabricbench.studying.units import Context, Unit
from fabricbench.studying.units.train import enough_runs as _enough_runs


def _rec(strategy, step, rnd, status="ok"):
    return {"kind": "train", "strategy": strategy, "fabric": "default", "status": status, "global_batch": 8,
            "step_time": {"median_s": step, "ci95_rel": 0.01},
            "study": {"unit": f"train {strategy} @ default" + (f" #{rnd}" if rnd > 1 else "")}}


def _ctx(records, **kw):
    c = StudyConfig(out="x", device="cpu", fabrics=("default",), strategies=("ddp", "fsdp"), model="tiny-mistral",
                    max_repeats=6, target_ci=None, **kw)
    return Context(config=c, out_dir=Path("x"), records=records)


def _unit(strategy, rnd):
    return Unit(name=f"train {strategy} @ default #{rnd}", kind="train", fabric="default", strategy=strategy,
                repeat=rnd)


def test_decided_after_three_rounds_stops():
    # fsdp's step ~20% longer in each round, the machine drifting by 10% between rounds
    recs = [_rec(s, step * k * (1 + e if s == "fsdp" else 1), r) for r, k, e in ((1, 1.0, 0.0), (2, 1.1, 0.004),
                                                                             (3, 0.97, -0.003))
            for s, step in (("ddp", 0.10), ("fsdp", 0.12))]
    why = _enough_runs(_unit("ddp", 4), _ctx(recs))
    assert why and why.startswith("not needed: after 3 rounds every comparison is decided")


def test_undecided_goes_on_and_a_begun_round_is_finished():
    noisy = (1.0, 1.25, 0.8)
    recs = [_rec("ddp", 0.10 * k, r) for r, k in enumerate(noisy, 1)] + \
           [_rec("fsdp", 0.101 * k2, r) for r, k2 in enumerate((1.2, 0.85, 1.0), 1)]
    assert _enough_runs(_unit("ddp", 4), _ctx(recs)) is None
    # ddp's fourth round ran: fsdp's fourth runs whatever the stopping rule would now say (pairs stay whole)
    recs.append(_rec("ddp", 0.10, 4))
    spent = _ctx(recs, repeat_budget_s=1.0)
    spent.started = time.monotonic() - 5  # the budget is spent: a begun round is finished all the same
    assert _enough_runs(_unit("fsdp", 4), spent) is None


def test_out_of_budget_names_the_open_questions():
    recs = [_rec("ddp", 0.10 * k, r) for r, k in enumerate((1.0, 1.25, 0.8), 1)] + \
           [_rec("fsdp", 0.101 * k, r) for r, k in enumerate((1.2, 0.85, 1.0), 1)]
    ctx = _ctx(recs, repeat_budget_s=1.0)
    ctx.started = time.monotonic() - 5
    why = _enough_runs(_unit("ddp", 4), ctx)
    assert why.startswith("not run: the study's repeat budget (1 s) is spent with 1 question(s) open")
    assert "undecided" in why and "rounds would" in why


def test_a_strategy_whose_last_run_failed_is_not_repeated():
    recs = [_rec("ddp", 0.1, 1), _rec("fsdp", 0.1, 1, status="oom")]
    assert _enough_runs(_unit("fsdp", 4), _ctx(recs)).startswith("not repeated")
