"""--buffers (rotate | reuse), --timing (events | loop) and --alloc (cuda | nccl): validated, planned, run and
recorded (CPU tier)."""

import json

import pytest

from fabricbench.errors import UsageError
from fabricbench.measuring.api import make_config
from fabricbench.measuring.config import SweepConfig
from fabricbench.measuring.engines.torch_engine import MAX_ROTATE, rotate_count
from fabricbench.measuring.plan import build_plan
from fabricbench.measuring.runner import run_sweep
from clirun import refused, run_cli


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


def test_defaults_keep_the_cold_cache_event_timing():
    c = SweepConfig()
    assert (c.buffers, c.timing, c.alloc) == ("rotate", "events", "cuda")


@pytest.mark.parametrize("field,value,flag", [("buffers", "same", "--buffers"), ("buffers", "", "--buffers"),
                                              ("timing", "host", "--timing"), ("alloc", "vmm", "--alloc")])
def test_bad_value_is_refused_by_the_type(field, value, flag):
    with pytest.raises(UsageError, match=f"^{flag} {value}: choose"):
        SweepConfig(**{field: value})


def test_nccl_allocator_is_for_the_native_engine():
    with pytest.raises(UsageError, match="--alloc nccl is for --engine native"):
        make_config(engine="torch", backend="gloo", alloc="nccl")


def test_adaptive_needs_per_iteration_times():
    with pytest.raises(UsageError, match="--adaptive needs --timing events"):
        make_config(timing="loop", adaptive=0.02)


@pytest.mark.parametrize("args,msg", [(["--buffers", "warm"], "Error: --buffers warm: choose rotate or reuse"),
                                      (["--timing", "clock"], "Error: --timing clock: choose events or loop"),
                                      (["--alloc", "vmm"], "Error: --alloc vmm: choose cuda or nccl")])
def test_cli_bad_value_is_one_line_exit_2(args, msg, no_gpu, capsys):
    assert refused(["sweep", "--gpus", "0", "--dry-run", *args], capsys) == msg


def test_dry_run_plan_names_both_settings(no_gpu, capsys):
    code, out, err = run_cli(["sweep", "--gpus", "0", "--sizes", "1M", "--ops", "all_reduce", "--buffers", "reuse",
                              "--timing", "loop", "--alloc", "nccl", "--dry-run"], capsys)
    assert code == 0, err
    assert "buffers reuse, timing loop, alloc nccl" in out.splitlines()[0]


def test_every_case_carries_the_settings():
    for buffers in ("rotate", "reuse"):
        plan = build_plan(make_config(sizes="8-1M:x16", buffers=buffers, timing="loop", alloc="nccl"), nranks=2)
        assert plan and all(p.case.buffers == buffers and p.case.timing == "loop" and p.case.alloc == "nccl"
                            for p in plan if p.case)


def test_torch_rotation_counts():
    [small] = [p.case for p in build_plan(make_config(sizes="1K", ops="all_reduce"), nranks=2)]
    [big] = [p.case for p in build_plan(make_config(sizes="1G", ops="all_reduce"), nranks=2)]
    assert rotate_count(small) == MAX_ROTATE and rotate_count(big) == 1
    assert rotate_count(small.__class__(**{**small.__dict__, "buffers": "reuse"})) == 1


@pytest.fixture(scope="module")
def gloo_runs():
    """Both buffer modes and both timings on 2 gloo ranks, checked."""
    runs = {}
    for buffers in ("rotate", "reuse"):
        for timing in ("events", "loop"):
            config = make_config(engine="torch", backend="gloo", nprocs=2, ops="all_reduce,all_gather",
                                 sizes="4K,256K", iters=8, warmup=1, check=True, timeout_s=60, buffers=buffers,
                                 timing=timing)
            runs[buffers, timing] = run_sweep(config)
    return runs


def test_gloo_records_say_how_buffers_were_used(gloo_runs):
    for (buffers, timing), results in gloo_runs.items():
        assert len(results) == 4
        for r in results:
            assert r.status == "ok" and r.wrong == 0, (buffers, timing, r.op, r.bytes)
            assert r.extra["buffers"] == buffers and r.extra["timing"] == timing and r.extra["alloc"] == "cpu"
            per_set = 2 * r.bytes if r.op == "all_reduce" else r.bytes + r.bytes // 2
            assert r.extra["rotate"] == (1 if buffers == "reuse" else min(MAX_ROTATE, -(-(128 << 20) // per_set)))
            # events: one time per iteration; loop: one time for the whole loop of 8
            assert r.iters == (8 if timing == "events" else 1)
            assert r.time_us > 0
            assert ("loop" in r.timing_rule) == (timing == "loop")


def test_record_round_trips_the_setting(gloo_runs):
    r = gloo_runs["reuse", "loop"][0]
    rec = json.loads(json.dumps(r.to_dict()))
    assert rec["extra"]["buffers"] == "reuse" and rec["extra"]["rotate"] == 1 and rec["extra"]["timing"] == "loop"


@pytest.mark.parametrize("fields", [dict(engine="native"), dict(engine="torch", backend="gloo", timing="loop"),
                                    dict(engine="torch", backend="gloo", adaptive=0.05)])
def test_a_gap_needs_calls_timed_one_by_one(fields):
    with pytest.raises(UsageError, match="^--gap 0.01 times each call alone after an idle gap"):
        make_config(gap_s=0.01, **fields)
    with pytest.raises(UsageError, match=r"^--gap -1.0: outside \[0, 60\] s \(SweepConfig.gap_s\)"):
        SweepConfig(gap_s=-1.0)


def test_gloo_sweep_with_a_gap_idles_before_each_call_and_records_it():
    """sweep --gap: each timed call after every rank slept the gap (relate's link credit, credit.py): the run
    lasts at least iterations x gap, and each record says the gap, in its extra and its settings."""
    import time

    config = make_config(engine="torch", backend="gloo", nprocs=2, ops="all_gather", sizes="4K,64K", iters=4,
                         warmup=1, check=True, timeout_s=60, gap_s=0.1)
    t0 = time.monotonic()
    results = run_sweep(config)
    assert time.monotonic() - t0 >= 2 * 4 * 0.1
    assert [r.status for r in results] == ["ok", "ok"] and all(r.wrong == 0 for r in results)
    for r in results:
        assert r.extra["gap_s"] == 0.1 and r.extra["settings"]["gap_s"] == 0.1 and r.iters == 4
        assert 0 < r.time_us < 0.1e6  # the call alone, not its gap
