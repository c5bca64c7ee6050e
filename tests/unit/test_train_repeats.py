"""Repeats in fresh processes, intervals and verdicts (issues 19, 27), without starting a process: the
statistics (statistics/figures.py), the figures, comparisons, rankings and slowdowns (training/repeats.py), the
order and stopping rule of train's rounds (launch.run with run_strategy replaced), and relate's intervals."""

from __future__ import annotations

import statistics

import pytest

from fabricbench.statistics import figures as stats
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


def test_ratio_ci_is_interval_arithmetic_and_overlap():
    assert stats.ratio_ci((2.0, 3.0), (1.0, 1.5)) == pytest.approx((2 / 1.5, 3.0))
    assert stats.ratio_ci((2.0, 3.0), (0.0, 1.5)) is None  # a divisor that may be 0: no interval, not a crash
    assert stats.overlaps((1, 2), (2, 3)) and not stats.overlaps((1, 2), (2.1, 3))
    assert not stats.overlaps(None, (1, 2))  # a figure without an interval overlaps nothing


def test_rankings_order_only_where_a_comparison_says_faster():
    # ddp 5% ahead of fsdp in every round, zero1 half as fast: ddp > fsdp > zero1, each a finding
    recs = [_rec(st, "default", step * k, rnd=r) for r, k in enumerate((1.0, 1.02, 0.99, 1.01), 1)
            for st, step in (("ddp", 0.100), ("fsdp", 0.105), ("zero1", 0.200))]
    s = repeats.summary(recs, last_look=4)
    assert s["rankings"]["default"] == [["ddp"], ["fsdp"], ["zero1"]]
    # one run each: no interval, nothing decided, so no order
    one = repeats.summary([_rec("ddp", "default", 0.1, rnd=1), _rec("fsdp", "default", 0.2, rnd=1)])
    assert one["rankings"]["default"] == [["ddp", "fsdp"]]
    assert [c["verdict"] for c in one["comparisons"]] == ["undecided"]


def test_outliers_are_the_slow_step_a_mean_would_follow():
    steps = [0.074, 0.078, 0.081, 0.361, 0.076, 0.079, 0.080]
    assert stats.outliers(steps) == [3]
    assert stats.outliers([1.0, 1.0, 1.0]) == []  # too few to tell


def _rec(strategy, fabric, step, *, batch=8, status="ok", ci=None, busy=None, rnd=None):
    r = {"kind": "train", "strategy": strategy, "fabric": fabric, "status": status, "global_batch": batch,
         "step_time": {"median_s": step, "ci95_rel": ci}, "gpu_busy_fraction": busy}
    if rnd is not None:  # the round, as a study names it (train's own runs say "repeat")
        r["study"] = {"unit": f"train {strategy} @ {fabric}" + (f" #{rnd}" if rnd > 1 else "")}
    return r


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
    assert f.interval == "within one run" and f.step_ci95 == pytest.approx((0.2 / 1.05, 0.21))


def test_a_run_noisier_than_its_own_step_keeps_a_positive_interval():
    # CI's 2-core VM: one run's own ci95_rel reached 1 or more, and step * (1 - rel) put 0 in the interval;
    # relate then divided by it (the study's relate unit failed with "divisor interval must be positive")
    f = repeats.figures([_rec("ddp", "default", 0.2, ci=1.4)])[0]
    assert f.step_ci95 == pytest.approx((0.2 / 2.4, 0.2 * 2.4)) and f.step_ci95[0] > 0
    assert stats.around(0.2, 0.0) == (0.2, 0.2)

def test_slowdown_is_the_paired_ratio_of_the_fabric_comparison():
    # the slow fabric doubles the step in every round; the second round is slow on both (the machine drifted)
    recs = [_rec("ddp", f, step * k, rnd=r) for r, k in enumerate((1.0, 1.3, 0.95), 1)
            for f, step in (("default", 0.10), ("slow", 0.20))]
    (sl,) = repeats.summary(recs, fabrics=["default", "slow"], last_look=3)["slowdowns"]
    assert sl["value"] == pytest.approx(2.0) and sl["paired"] and sl["rounds"] == 3
    # the drift is shared by the pair: it cancels, and the interval is the ratio itself
    assert sl["verdict"] == "faster" and sl["ci95"] == pytest.approx([2.0, 2.0], rel=1e-6)
    assert sl["text"].startswith("ddp: default is 2.00× faster than slow [")


def test_summary_and_contradictions_between_two_studies():
    def study(ratio, noise):  # ddp's step / fsdp's, over 4 paired rounds
        return repeats.summary([_rec(st, "default", 0.1 * (ratio if st == "ddp" else 1.0) * (1 + e), rnd=r)
                                for r, e in enumerate(noise, 1) for st in ("ddp", "fsdp")], last_look=4)

    tight = (0.0, 0.001, -0.001, 0.0)
    a, b = study(1.05, tight), study(0.95, tight)  # fsdp faster in one, ddp faster in the other
    assert a["comparisons"][0]["verdict"] == b["comparisons"][0]["verdict"] == "faster"
    problems = repeats.contradictions(a, b)
    assert any(p.startswith("one says: on default: fsdp is") for p in problems)
    assert a["headline"][0].startswith("on default: fsdp is 5.0% faster than ddp [")
    same = study(1.05, (0.0, 0.002, -0.001, 0.001))
    assert repeats.contradictions(a, same) == []
    eq = study(1.0, tight)
    assert eq["comparisons"][0]["verdict"] == "equivalent" and repeats.contradictions(a, eq)
    # a twin on a machine 10% slower throughout: its figures move, its answer does not
    slower = study(1.05, tuple(e + 0.1 for e in tight))
    assert repeats.contradictions(a, slower) == []
    (moved,) = [p for p in repeats.disjoint_figures(a, slower) if p.startswith("fsdp @ default")]
    assert "the intervals do not overlap" in moved
    assert repeats.disjoint_figures(a, same) == []


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


def test_rounds_interleave_and_stop_when_the_question_is_answered(tmp_path, monkeypatch):
    calls: list[str] = []
    # ddp 2x faster, both tight: decided at the first look (the third round), both precise: stop
    monkeypatch.setattr(launch, "run_strategy", _fake_run(calls, {"ddp": [0.100, 0.1001, 0.0999, 0.1, 0.1],
                                                                  "fsdp": [0.2, 0.2001, 0.1999, 0.2, 0.2]}))
    with ResultWriter(tmp_path / "t.jsonl") as w:
        launch.run(_config(max_repeats=5), w)
    assert calls == ["ddp", "fsdp"] * 3
    # fsdp spreads: the comparison stays undecided, so whole rounds go on to --max-repeats (pairs kept)
    calls.clear()
    monkeypatch.setattr(launch, "run_strategy", _fake_run(calls, {"ddp": [0.100, 0.1001, 0.0999, 0.1, 0.1],
                                                                  "fsdp": [0.1, 0.2, 0.15, 0.12, 0.18]}))
    with ResultWriter(tmp_path / "u.jsonl") as w:
        recs = launch.run(_config(max_repeats=5), w)
    assert calls == ["ddp", "fsdp"] * 5
    assert [r["repeat"] for r in recs if r["strategy"] == "fsdp"] == [1, 2, 3, 4, 5]


def test_repeats_n_runs_exactly_n_rounds(tmp_path, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(launch, "run_strategy", _fake_run(calls, {"ddp": [0.1, 0.3], "fsdp": [0.1, 0.3]}))
    with ResultWriter(tmp_path / "t.jsonl") as w:
        launch.run(_config(repeats=2), w)
    assert calls == ["ddp", "fsdp", "ddp", "fsdp"]


def test_train_config_refuses_nccl_with_two_ranks_on_one_gpu_and_maps_the_gloo_lab():
    with pytest.raises(Exception, match="Duplicate GPU detected"):
        _config(device="cuda", gpus=(0,), nprocs=2)
    lab = _config(device="cuda", gpus=(0,), nprocs=3, backend="gloo")
    assert lab.procs_per_node == 3 and lab.rank_gpus == [0, 0, 0]
    assert launch.local_devices(lab) == [0, 0, 0]
    assert launch.worker_env(lab)["CUDA_VISIBLE_DEVICES"] == "0"
    one_each = _config(device="cuda", gpus=(2, 5))
    assert one_each.procs_per_node == 2 and launch.local_devices(one_each) is None
    # the library's own default on one GPU: one rank (the H200 tier once failed here, when the CPU ranks'
    # default of 2 leaked into cuda and only the CLI mapped it back)
    from fabricbench.training.config import CPU_RANKS, TrainConfig

    one = TrainConfig(strategies=["ddp"], model="tiny-mistral", device="cuda", gpus=(0,))
    assert one.procs_per_node == 1 and one.world_size == 1
    assert TrainConfig(strategies=["ddp"], model="tiny-mistral", device="cpu").procs_per_node == CPU_RANKS


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
    from fabricbench.advising.strategy import predict

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


def test_train_ends_with_the_verdicts_at_80_columns():
    recs = [dict(_rec(st, "default", step * k * (1 + e if st == "fsdp" else 1)), repeat=r)
            for r, k, e in ((1, 1.0, 0.0), (2, 1.01, 0.002), (3, 0.99, -0.002))
            for st, step in (("ddp", 0.100), ("fsdp", 0.130))]
    lines = repeats.answer_lines(recs, repeats=3)
    assert lines[0] == "answers (95% intervals, margin ±2%):"
    assert lines[1].startswith("  on default: ddp is 30.0% faster than fsdp [") and "(3 paired rounds)" in lines[1]
    assert all(len(line) <= 80 for line in lines)
    assert repeats.answer_lines([r for r in recs if r["strategy"] == "ddp"], repeats=3) == []  # nothing compared


def test_train_stops_repeating_on_its_own_margin():
    """train --margin: the stopping rule asks its question. Two strategies whose paired ratio over 3 rounds
    is 1.003, 0.998, 1.001: within ±2% they are equivalent (decided: no 4th round); within ±0.1% that is
    undecided (one more round, up to --max-repeats)."""
    from fabricbench.training.config import TrainConfig

    recs = []
    for r, (drift, ratio) in enumerate(((1.0, 1.003), (1.05, 0.998), (0.97, 1.001)), 1):
        recs += [_rec("ddp", "default", 0.1 * drift, rnd=r), _rec("fsdp", "default", 0.1 * drift * ratio, rnd=r)]
    wide = TrainConfig(strategies=("ddp", "fsdp"), model="tiny-mistral", device="cpu", target_ci=None)
    tight = TrainConfig(strategies=("ddp", "fsdp"), model="tiny-mistral", device="cpu", target_ci=None, margin=0.001)
    assert repeats.still_to_run(wide, recs, round_=3, elapsed_s=1.0) == []
    assert repeats.still_to_run(tight, recs, round_=3, elapsed_s=1.0) == ["ddp", "fsdp"]
