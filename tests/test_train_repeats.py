"""Repeats in fresh processes, intervals and ties (issue 19), without starting a process: the statistics
(measuring/stats.py), the figures, rankings and slowdowns (training/repeats.py), the order and stopping
rule of train's rounds (launch.run with run_strategy replaced), and relate's propagated intervals."""

from __future__ import annotations

import statistics

import pytest

from fabricbench.measuring import stats
from fabricbench.results import ResultWriter
from fabricbench.results.schema import TrainResult
from fabricbench.training import launch, repeats


def test_repeat_ci_uses_student_t_below_six_and_order_statistics_from_six():
    import math

    v = [100.0, 102.0, 98.0]
    lo, hi = stats.repeat_ci(v)
    half = 4.303 * statistics.stdev(math.log(x) for x in v) / 3 ** 0.5  # Student's t on the log times
    assert (lo, hi) == pytest.approx((100 * math.exp(-half), 100 * math.exp(half)))
    assert hi - lo == pytest.approx(2 * 4.303 * statistics.stdev(v) / 3 ** 0.5, rel=0.01)  # ~ the plain one
    assert stats.repeat_ci([5.0]) is None
    # n = 2: t = 12.7, as wide as two values deserve, and still above 0
    lo, hi = stats.repeat_ci([10.0, 15.0])
    assert 0 < lo < 10.0 and hi > 15.0 and lo * hi == pytest.approx(12.5 ** 2)
    many = [float(x) for x in range(1, 21)]
    lo, hi = stats.repeat_ci(many)
    assert lo in many and hi in many and lo < statistics.median(many) < hi


def test_ratio_ci_is_interval_arithmetic_and_overlap_is_a_tie():
    assert stats.ratio_ci((2.0, 3.0), (1.0, 1.5)) == pytest.approx((2 / 1.5, 3.0))
    assert stats.overlaps((1, 2), (2, 3)) and not stats.overlaps((1, 2), (2.1, 3))
    assert not stats.overlaps(None, (1, 2))  # a figure without an interval ties with nothing


def test_tie_groups_rank_best_first_with_overlapping_leaders():
    items = [("fsdp", 90.0, (85.0, 95.0)), ("ddp", 100.0, (92.0, 108.0)), ("zero1", 50.0, (48.0, 52.0))]
    assert stats.tie_groups(items) == [["ddp", "fsdp"], ["zero1"]]
    assert repeats.ranking_text([["ddp", "fsdp"], ["zero1"]]) == "ddp ≈ fsdp (within noise), then zero1"


def test_outliers_are_the_slow_step_a_mean_would_follow():
    steps = [0.074, 0.078, 0.081, 0.361, 0.076, 0.079, 0.080]
    assert stats.outliers(steps) == [3]
    assert stats.outliers([1.0, 1.0, 1.0]) == []  # too few to tell


def _rec(strategy, fabric, step, *, batch=8, status="ok", ci=None, busy=None):
    return {"kind": "train", "strategy": strategy, "fabric": fabric, "status": status, "global_batch": batch,
            "step_time": {"median_s": step, "ci95_rel": ci}, "gpu_busy_fraction": busy}


def test_figures_slowdowns_and_host_bound():
    recs = [_rec("ddp", "default", s, busy=0.3) for s in (0.10, 0.11, 0.09)] + \
           [_rec("ddp", "slow", s, busy=0.9) for s in (0.20, 0.21, 0.19)] + [_rec("fsdp", "default", 0.2, ci=0.05)]
    figs = {(f.strategy, f.fabric): f for f in repeats.figures(recs)}
    d = figs[("ddp", "default")]
    assert d.runs == 3 and d.interval == "run-to-run" and d.step_s == 0.10
    assert d.samples_per_s == pytest.approx(80.0) and d.ci95[0] < 80 < d.ci95[1]
    assert d.host_bound.startswith("host-bound: the GPU was busy 30% of the step")
    assert figs[("ddp", "slow")].host_bound is None
    f = figs[("fsdp", "default")]  # one run: its own interval, said so
    assert f.interval == "within one run" and f.step_ci95 == pytest.approx((0.19, 0.21))
    (sl,) = repeats.slowdowns(list(figs.values()), "default")
    assert sl["value"] == pytest.approx(2.0)
    lo, hi = sl["ci95"]
    assert lo == pytest.approx(figs[("ddp", "slow")].step_ci95[0] / d.step_ci95[1]) and lo < 2.0 < hi
    assert "2.00× slower than on default" in repeats.slowdown_text(sl)


def test_summary_and_contradictions_between_two_studies():
    a = repeats.summary([_rec("ddp", "default", 0.100, ci=0.02), _rec("fsdp", "default", 0.103, ci=0.02)])
    b = repeats.summary([_rec("ddp", "default", 0.104, ci=0.02), _rec("fsdp", "default", 0.101, ci=0.02)])
    # the order flips, but each calls it a tie: no contradiction
    assert a["rankings"]["default"] == [["ddp", "fsdp"]] and repeats.contradictions(a, b) == []
    c = repeats.summary([_rec("ddp", "default", 0.100, ci=0.01), _rec("fsdp", "default", 0.200, ci=0.01)])
    d = repeats.summary([_rec("ddp", "default", 0.200, ci=0.01), _rec("fsdp", "default", 0.100, ci=0.01)])
    problems = repeats.contradictions(c, d)
    assert any("neither a tie" in p for p in problems) and any("do not overlap" in p for p in problems)
    assert c["headline"] == ["on default: ddp, then fsdp"]


def _fake_run(calls, steps_by_strategy):
    def run_strategy(config, name, resolved, psi, **kw):
        calls.append(name)
        n = sum(1 for c in calls if c == name)
        step = steps_by_strategy[name][n - 1]
        return {"strategy": name, "model": "tiny-mistral", "task": "causal-lm", "params": psi, "batch_size": 2,
                "global_batch": 4, "seq_len": 32, "image_size": None, "tokens_per_sample": 32, "device": "cpu",
                "gpus": [], "nranks": 2, "nnodes": 1, "steps": 4, "warmup_steps": 1, "lr": 1e-4,
                "optimizer": "AdamW", "status": "ok", "step_times_s": [step] * 4,
                "step_time": {"median_s": step, "ci95_rel": None}}
    return run_strategy


def _config(**kw):
    base = dict(strategies=["ddp", "fsdp"], model="tiny-mistral", device="cpu", nprocs=2, steps=4, warmup_steps=1)
    base.update(kw)
    return launch.TrainConfig(**base)


def test_rounds_interleave_and_stop_when_the_ci_is_within_target(tmp_path, monkeypatch):
    calls: list[str] = []
    # ddp repeats tightly (done after the minimum of 3), fsdp spreads (runs to --max-repeats 5)
    monkeypatch.setattr(launch, "run_strategy", _fake_run(calls, {"ddp": [0.100, 0.1001, 0.0999, 0.1, 0.1],
                                                                  "fsdp": [0.1, 0.2, 0.15, 0.12, 0.18]}))
    with ResultWriter(tmp_path / "t.jsonl") as w:
        recs = launch.run(_config(max_repeats=5), w)
    assert calls == ["ddp", "fsdp"] * 3 + ["fsdp", "fsdp"]  # A B A B A B, then only what is not yet within 3%
    assert [r["repeat"] for r in recs if r["strategy"] == "fsdp"] == [1, 2, 3, 4, 5]


def test_repeats_n_runs_exactly_n_rounds(tmp_path, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(launch, "run_strategy", _fake_run(calls, {"ddp": [0.1, 0.3], "fsdp": [0.1, 0.3]}))
    with ResultWriter(tmp_path / "t.jsonl") as w:
        launch.run(_config(repeats=2), w)
    assert calls == ["ddp", "fsdp", "ddp", "fsdp"]


def test_train_config_refuses_nccl_with_two_ranks_on_one_gpu_and_maps_the_gloo_lab():
    with pytest.raises(Exception, match="Duplicate GPU detected"):
        _config(device="cuda", gpus=(0,), nprocs=2).validate()
    lab = _config(device="cuda", gpus=(0,), nprocs=3, backend="gloo")
    assert lab.procs_per_node == 3 and lab.rank_gpus == [0, 0, 0]
    assert launch._local_devices(lab) == [0, 0, 0]
    assert launch.worker_env(lab)["CUDA_VISIBLE_DEVICES"] == "0"
    one_each = _config(device="cuda", gpus=(2, 5))
    assert one_each.procs_per_node == 2 and launch._local_devices(one_each) is None


def test_step_stats_give_ci_and_outliers_and_throughput_uses_the_median():
    from fabricbench.training import metrics

    steps = [0.074, 0.078, 0.081, 0.361, 0.076, 0.079, 0.080]
    st = metrics.step_stats(steps, first_index=3)
    assert st["outliers"] == [[6, 0.361]] and st["ci95_rel"] is not None
    thr = metrics.throughput(times_s=steps, global_batch=32, tokens_per_sample=1, psi=1, nranks=1, gpu_name=None)
    assert thr["samples_per_s"] == pytest.approx(32 / 0.079)  # a mean would give 32 / 0.118


def test_relate_intervals_contain_the_prediction():
    from fabricbench.relating.model import predict_interval, step_formula

    mid = step_formula(ref_step_s=1.0, e=0.5, t_ref=0.2, t_fab=0.6)
    assert mid == pytest.approx(1.0 - 0.1 + 0.6 - 0.1)
    lo, hi = predict_interval(ref_ci=(0.95, 1.05), e=0.5, t_ref=(0.19, 0.21), t_fab=(0.55, 0.65))
    assert lo < mid < hi and hi - lo == pytest.approx((1.05 - 0.95) + 0.5 * 0.02 * 0 + (0.65 - 0.55) + 0.01, rel=0.3)


def test_advise_takes_the_runs_interval_and_the_host_bound_note():
    from fabricbench.advise.strategy import predict

    def rec(strategy, step, busy):
        return {**_rec(strategy, "default", step, busy=busy), "model": "m", "device": "cuda", "gpus": [0],
                "nranks": 1, "batch_size": 8}

    recs = [rec("ddp", s, 0.3) for s in (0.10, 0.11, 0.09)] + [rec("fsdp", s, 0.8) for s in (0.105, 0.1, 0.11)]
    trains = [TrainResult.from_record(r) for r in recs]  # advise takes train records typed (results/records.py)
    times = {t.strategy: t for t in predict(strategies=["ddp", "fsdp"], gpus=[0], busbw_gbps=None, psi=1000, n=1,
                                            trains=trains, model="m", batch_size=8)}
    assert times["ddp"].time_source == "measured" and times["ddp"].step_time_s == 0.10
    assert stats.overlaps(times["ddp"].step_ci95, times["fsdp"].step_ci95)  # advise calls them even
    assert times["ddp"].host_bound.startswith("host-bound") and times["fsdp"].host_bound is None


def test_sweep_gloo_lab_shares_gpus_and_nccl_is_refused_up_front():
    from fabricbench.errors import UsageError
    from fabricbench.measuring.api import resolve_devices
    from fabricbench.measuring.config import SweepConfig, validate

    validate(SweepConfig(engine="torch", backend="gloo", nprocs=3, gpus=(0,)))  # 3 ranks on GPU 0: the lab
    with pytest.raises(UsageError, match="Duplicate GPU detected"):
        validate(SweepConfig(engine="torch", backend="nccl", nprocs=2, gpus=(0,)))
    cfg, warnings = resolve_devices(SweepConfig(engine="torch", backend="gloo", nprocs=2, gpus=(0,)), visible=1)
    assert cfg.gpus == (0,) and warnings == []  # kept: the ranks' tensors live on GPU 0
    cfg, warnings = resolve_devices(SweepConfig(engine="torch", backend="gloo", nprocs=2), visible=0)
    assert cfg.gpus is None  # no --gpus: CPU ranks, as before
