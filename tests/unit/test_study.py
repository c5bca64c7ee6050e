"""`fabricbench study` on CPU, the cheap parts: plan, sweep sizes, records, config validation, the CLI's errors
and surfaces, dry runs and the commands each unit runs. The end-to-end studies: test_study_e2e.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from fabricbench.errors import UsageError
from fabricbench.studying import records as study_records
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.plan import build_plan
from fabricbench.studying.sweeps import covering_sizes, sweep_plan, traced_sizes
from fabricbench.studying.units import Context
from fabricbench.topology.smi import read_file
from studyrun import MODEL
import roots
from clirun import one_error_line, run_cli, run_cli_subprocess

DATA = roots.DATA / "topo"


# -- cheap parts: plan, sizes, records, config -----------------------------------------------------------------
def _config(**kw):
    base = dict(out="/tmp/x", device="cpu", nprocs=2, fabrics=("default", "shaped:1gbit"), strategies=("ddp", "fsdp"),
                model=MODEL)
    base.update(kw)
    return StudyConfig(**base)


def test_plan_order_trains_first_fabric_before_sweeps_then_the_rest():
    names = [u.name for u in build_plan(_config(repeats=2))]
    assert names == ["machine", "estimate", "train ddp @ default", "train fsdp @ default", "sweep @ default",
                     "sweep @ shaped:1gbit", "train ddp @ shaped:1gbit", "train fsdp @ shaped:1gbit",
                     "train ddp @ default #2", "train fsdp @ default #2", "train ddp @ shaped:1gbit #2",
                     "train fsdp @ shaped:1gbit #2", "relate", "summary"]  # rounds interleaved: A B C D A B C D


def test_scaling_unit_only_when_the_gpus_span_islands():
    nvl = read_file(str(DATA / "h200_nvl_two_quads.txt"))
    sxm = read_file(str(DATA / "h200_sxm_nvswitch.txt"))
    # a GPU config without GPUs here: the config checks what it can alone; the call (placed) looks for GPUs
    cfg = StudyConfig(out="/tmp/x", device="cuda", gpus=tuple(range(8)), fabrics=("default", "p2p-off"),
                      strategies=("ddp",), model=MODEL, iters=5, warmup=1)
    assert "scaling @ default" in [u.name for u in build_plan(cfg, nvl)]
    assert "scaling @ default" not in [u.name for u in build_plan(cfg, sxm)]
    cfg = dataclasses.replace(cfg, gpus=(0, 1, 2, 3))  # one quad: no island boundary inside the study's GPUs
    assert "scaling @ default" not in [u.name for u in build_plan(cfg, nvl)]


def test_sweep_sizes_cover_the_traced_collectives():
    recs = [{"kind": "train", "comm": {"collectives": [
        {"op": "all_reduce", "bytes": 3000, "dtype": "float32", "group_size": 2, "calls_per_step": 2.0},
        {"op": "all_gather", "bytes": 300_000, "dtype": "float32", "group_size": 2, "calls_per_step": 1.0},
        {"op": "all_reduce", "bytes": 50_000, "dtype": "bfloat16", "group_size": 2, "calls_per_step": 1.0},
        {"op": "barrier", "bytes": 4, "dtype": "float32", "group_size": 2, "calls_per_step": 1.0}]}}]
    t = traced_sizes(recs)
    assert t == {"float32": {"ops": ["all_reduce", "all_gather"], "min": 3000, "max": 300_000},
                 "bfloat16": {"ops": ["all_reduce"], "min": 50_000, "max": 50_000}}
    from fabricbench.sizes import SizeSweep

    sizes = SizeSweep.parse(covering_sizes(3000, 300_000)).expand()
    assert sizes[0] < 3000 and sizes[-1] > 300_000 and len(sizes) <= 14  # interpolation never extrapolates
    plan = sweep_plan(Context(config=_config(), out_dir=Path("/tmp/x"), records=recs))
    assert [(p["dtype"], p["ops"]) for p in plan] == [("bfloat16", ["all_reduce"]),
                                                       ("float32", ["all_gather", "all_reduce"])]
    empty = sweep_plan(Context(config=_config(), out_dir=Path("/tmp/x"), records=[]))
    assert empty[0]["sizes"] == "4K-1M:x4" and "default grid" in empty[0]["source"]


def test_records_keep_only_each_units_latest_attempt(tmp_path):
    plan = {"kind": "plan", "study": {"config": {"out": str(tmp_path)}, "units": []}}  # a readable plan: out at least
    lines = [plan,
             {"kind": "machine", "strategy": "ddp", "study": {"unit": "train ddp @ default", "attempt": "a1"}},
             {"kind": "study_unit", "name": "train ddp @ default", "attempt": "a1", "status": "error"},
             plan,
             {"kind": "machine", "strategy": "ddp", "v": 2, "study": {"unit": "train ddp @ default", "attempt": "a2"}},
             {"kind": "study_unit", "name": "train ddp @ default", "attempt": "a2", "status": "ok"}]
    from fabricbench.results import header

    lines = [{**header(x["kind"], run_id="r"), **x} for x in lines]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"torn": ')
    sr = study_records.load(tmp_path)
    assert len(sr.plans) == 2 and sr.status("train ddp @ default") == "ok"
    assert [r.get("v") for r in sr.records] == [2]


def test_config_validation_messages():
    with pytest.raises(UsageError, match="exactly one of --model"):
        _config(model=None)
    with pytest.raises(UsageError, match="unknown strategy"):
        _config(strategies=("ddp", "zero9"))
    with pytest.raises(UsageError, match="at least 2"):
        _config(nprocs=1)
    a, b = _config(), _config(steps=9)
    assert a.differences(b) == ["steps: 8 -> 9"] and a.differences(_config(out="/elsewhere")) == []
    # --resume --max-repeats N adds the rounds an undecided comparison asked for; fewer would drop some
    assert a.differences(_config(max_repeats=a.max_repeats + 10, repeat_budget_s=7200)) == []
    assert a.differences(_config(max_repeats=a.max_repeats - 1)) == [
        f"max_repeats: {a.max_repeats} -> {a.max_repeats - 1}"]


def test_cli_bad_input_is_one_line(tmp_path):
    code, _, err = run_cli_subprocess(["study", "--device", "cpu", "--model", "nope", "--out", tmp_path / "s"])
    assert code == 2 and err.startswith("Error: unknown model") and one_error_line(err)
    code, _, err = run_cli_subprocess(["report", tmp_path / "none"])
    assert code == 2 and ": no such folder" in err


def test_cli_exit_1_names_the_failed_units(tmp_path, monkeypatch, capsys):
    """The study goes on past a failed unit and writes its report; the exit status still says it failed
    (oom and waived are results, not failures)."""
    import fabricbench.studying.api as api
    from fabricbench.studying.runner import UnitRun

    cfg = _config()
    plan = build_plan(cfg)
    runs = [UnitRun(unit=u, status=s) for u, s in zip(plan, ["ok", "oom", "error", "waived", "timeout"])]

    def fake(config, **kw):
        return api.StudyResult(out_dir=tmp_path, config=cfg, plan=plan, units=runs,
                               results_path=tmp_path / "results.jsonl", report_md=tmp_path / "report.md",
                               report_html=tmp_path / "report.html")

    monkeypatch.setattr(api, "study", fake)
    code, _, err = run_cli(["study", "--device", "cpu", "--model", MODEL, "--out", tmp_path], capsys)
    line = one_error_line(err)
    assert code == 1
    failed = [r.unit.name for r in runs if r.status in ("error", "timeout")]
    assert f"{len(failed)} unit(s) failed" in line and all(n in line for n in failed)
    assert all(r.unit.name not in line for r in runs if r.status in ("ok", "oom", "waived"))
    runs[2].status = runs[4].status = "ok"
    code, _, err = run_cli(["study", "--device", "cpu", "--model", MODEL, "--out", tmp_path], capsys)
    assert code == 0, err  # no failed unit


def test_dry_run_lists_units_and_measures_nothing(tmp_path):
    out = tmp_path / "s"
    # an empty cache folder: this host's store of earlier studies' durations (which a developer's own runs
    # fill) would change the estimates' figures and so the plan table's width
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    code, stdout, err = run_cli_subprocess(["study", "--device", "cpu", "--nprocs", "2", "--fabrics",
                                            "default,shaped:1gbit", "--strategies", "ddp,fsdp", "--model", MODEL,
                                            "--out", out, "--dry-run"], env=env, timeout=600)
    assert code == 0, err
    # 2 sweeps and 2 x 2 trains in each of up to 5 rounds (--max-repeats; past 3 only while the CI is wide)
    assert stdout.count(" @ ") == 22 and "estimate: ~" in stdout and "sweep @ shaped:1gbit" in stdout
    assert not (out / "results.jsonl").exists()


def test_library_dry_run_returns_the_plan(tmp_path):
    import fabricbench

    res = fabricbench.study_plan(fabricbench.StudyConfig(out=str(tmp_path / "s"), device="cpu", nprocs=2,
                                                         fabrics="default", strategies=["ddp"], model=MODEL, steps=4,
                                                         warmup_steps=1))
    assert [u.name for u in res.plan] == ["machine", "estimate", "train ddp @ default", "sweep @ default",
                                          "train ddp @ default #2", "train ddp @ default #3", "train ddp @ default #4",
                                          "train ddp @ default #5", "relate", "summary"]
    est = res.estimate  # each unit's middle figure in the plan; the total adds the start and the report
    assert isinstance(res, fabricbench.StudyPlan) and not hasattr(res, "units")
    assert res.estimate_s == est.total.s and est.total.lo_s < est.total.s < est.total.hi_s
    assert [u.estimate_s for u in res.plan] == [round(est.units[u.name].s, 1) for u in res.plan]
    assert est.total.s > sum(u.estimate_s for u in res.plan if u.name not in est.optional)
    assert not (tmp_path / "s").exists()


def test_study_and_report_surfaces_are_frozen():
    from fabricbench.cli.report import report
    from fabricbench.cli.study import study

    assert sorted(o for p in study.params for o in p.opts) == sorted([
        "--out", "--gpus", "--device", "--nprocs", "--fabrics", "--strategies", "--model", "--model-config",
        "--steps", "--warmup-steps", "--batch-size", "--seq-len", "--image-size", "--precision", "--sizes",
        "--iters", "--warmup", "--trace-rounds", "--train-timeout", "--sweep-timeout", "--resume", "--dry-run",
        "--json", "--quiet", "--max-steps", "--target-ci", "--repeats", "--max-repeats", "--repeat-budget", "--margin", "--stall-timeout",
        "--nnodes", "--node-rank", "--master-addr", "--master-port", "--join-timeout"])  # across nodes
    assert [p.name for p in report.params] == ["out_dir", "as_json"]


@pytest.mark.parametrize("model, kept, dropped", [("lab-mistral", "--seq-len", "--image-size"),
                                                  ("tiny-dinov2", "--image-size", "--seq-len")])
def test_commands_pass_only_the_shape_the_model_reads(tmp_path, model, kept, dropped):
    from fabricbench.studying.config import StudyConfig
    from fabricbench.studying.report import study_command
    from fabricbench.studying.units import Context, Unit, UNIT_KINDS

    c = StudyConfig(out=str(tmp_path / "s"), device="cpu", nprocs=2, fabrics=("default",), strategies=("ddp",),
                    model=model, steps=4, warmup_steps=1)
    cmd = study_command(c)
    assert kept in cmd and dropped not in cmd
    ctx = Context(config=c, out_dir=tmp_path / "s")
    for kind, unit in (("estimate", Unit(kind="estimate", name="estimate")),
                       ("train", Unit(kind="train", name="train ddp @ default", strategy="ddp", fabric="default"))):
        (argv,), _ = UNIT_KINDS.get(kind).commands(unit, ctx)
        assert kept in argv and dropped not in argv, (kind, argv)


def _profiled_rounds(tmp_path, rounds: int, *, alone: bool, **study) -> list[int]:
    """The rounds whose train unit's command profiles steps (no --trace-steps: train's own default, 2 where
    the run has peers, 0 alone)."""
    from fabricbench.studying.config import StudyConfig
    from fabricbench.studying.units import Context, Unit, UNIT_KINDS

    c = StudyConfig(out=str(tmp_path / "s"), fabrics=("default",), strategies=("ddp",), model="tiny-mistral",
                    repeats=rounds, **study)
    ctx = Context(config=c, out_dir=tmp_path / "s")
    seen = []
    for k in range(1, rounds + 1):
        unit = Unit(kind="train", name=f"train ddp @ default #{k}", strategy="ddp", fabric="default", repeat=k)
        (argv,), _ = UNIT_KINDS.get("train").commands(unit, ctx)
        steps = argv[argv.index("--trace-steps") + 1] if "--trace-steps" in argv else None
        assert steps in ("0", "2", None), argv
        if (steps or ("0" if alone else "2")) != "0":
            seen.append(k)
    return seen


@pytest.mark.parametrize("trace_rounds, profiled", [(2, [1, 2]), (0, []), (4, [1, 2, 3, 4])])
def test_only_the_first_trace_rounds_are_profiled(tmp_path, trace_rounds, profiled):
    """A train unit past --trace-rounds runs with --trace-steps 0 (its steps timed alone); the earlier ones
    keep train's own profiled steps."""
    assert _profiled_rounds(tmp_path, 4, alone=False, device="cpu", nprocs=2, trace_rounds=trace_rounds) == profiled


@pytest.mark.parametrize("gpus, profiled", [("0", [1]), ("0,1", [1, 2])])
def test_a_run_of_one_rank_is_profiled_in_its_first_round_only(tmp_path, gpus, profiled):
    """One rank runs no collective: its trace gives the report's GPU-busy fraction alone, so only the first round
    pays for it; runs with peers keep --trace-rounds (2 here)."""
    from fabricbench.training.config import TrainConfig

    assert _profiled_rounds(tmp_path, 3, alone="," not in gpus, device="cuda", gpus=gpus) == profiled
    # train's own default: profiled where the run has peers, not alone
    one = {"strategies": "ddp", "device": "cpu", "model": "tiny-mistral"}
    assert TrainConfig(**one, nprocs=2).trace_steps_run == 2
    assert TrainConfig(**one, nprocs=1).trace_steps_run == 0
    assert TrainConfig(**one, nprocs=1, trace_steps=3).trace_steps_run == 3


def test_a_model_config_keeps_both_shapes(tmp_path):
    from fabricbench.studying.config import StudyConfig

    c = StudyConfig(out="s", model_config="m.json", seq_len=128, image_size=64)
    assert c.shape_args == ["--seq-len", "128", "--image-size", "64"]


def test_target_ci_zero_turns_the_precision_floor_off(tmp_path):
    """--target-ci 0 is "off" (the study's rounds then stop on the comparisons alone); it used to be dropped as
    "not given", so the study kept the 3% default and its units ran with --target-ci 0.03."""
    c = StudyConfig(out=str(tmp_path / "s"), device="cpu", nprocs=2, strategies="ddp",
                    model="tiny-mistral", target_ci=0)
    assert c.target_ci is None
    d = StudyConfig(out=str(tmp_path / "t"), device="cpu", nprocs=2, strategies="ddp", model="tiny-mistral")
    assert d.target_ci == 0.03
