"""How long a study's units will take (fabricbench/studying/durations.py, hoststore.py): the sources in order (the
study's own records, this host's store, a first guess), the load scaling, the store's reading and writing,
and, marked slow, the bar: a CPU study's dry-run estimate against the wall of the same study run after it.

    python3 -m pytest -q -p no:xdist tests/unit/test_durations.py
    python3 -m pytest -q -p no:xdist -m slow tests/unit/test_durations.py::test_the_dry_run_estimate_is_within_2x_of_the_wall
"""

from __future__ import annotations

import json
import os
import re
import time
from types import SimpleNamespace

import pytest

from fabricbench.hostload import Load
from fabricbench.studying import durations as dur
from fabricbench.studying import hoststore
from fabricbench.studying import records as study_records
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.plan import build_plan
from clirun import run_cli_subprocess

MODEL = "tiny-mistral"


def _config(tmp_path, **kw) -> StudyConfig:
    base = dict(out=str(tmp_path / "s"), device="cpu", nprocs=2, fabrics="default", strategies="ddp", model=MODEL,
                steps=4, warmup_steps=1, target_ci=0, repeats=1, trace_rounds=0)  # no trace phase: see its own test
    return StudyConfig(**{**base, **kw})


def _load(others: float, cpus: int = 2) -> Load:
    return Load(window_s=0.5, cpus=cpus, others_cpu_s=others * 0.5, ours_cpu_s=0.0, others_cpus=others,
                threshold_cpus=0.5, busy=others >= 0.5, readings=2)


def _train_unit(c):
    return next(u for u in build_plan(c) if u.kind == "train")


def test_a_first_guess_is_wide_and_a_measured_figure_narrow(tmp_path):
    c = _config(tmp_path)
    units = build_plan(c)
    first = dur.estimate(c, units, store={}, load=_load(0.0))
    t = first.units[_train_unit(c).name]
    assert t.source == "first guess" and t.hi_s / t.lo_s >= 5  # it has not seen this host: at least 5x wide
    store = {dur._key("train_fixed", "cpu", "ddp"): [{"s": 6.0, "others": 0.0, "cpus": 2, "need": 2}],
             dur._train_key(c, "ddp") + "/step": [{"s": 0.5, "others": 0.0, "cpus": 2, "need": 2}]}
    t = dur.estimate(c, units, store=store, load=_load(0.0)).units[_train_unit(c).name]
    assert t.source == "this host" and t.s == pytest.approx(6.0 + 4 * 0.5)  # fixed + --steps x step
    assert t.lo_s == pytest.approx((6.0 + 4 * 0.5) * 0.8) and t.hi_s == pytest.approx((6.0 + 4 * 0.5) * 1.25)


def test_this_studys_records_come_before_the_hosts_store(tmp_path):
    c = _config(tmp_path)
    units = build_plan(c)
    name = _train_unit(c).name
    done = SimpleNamespace(units={name: {"status": "ok", "duration_s": 20.0, "details": {}}},
                           of_kind=lambda kind: [])
    store = {dur._key("train_fixed", "cpu"): [{"s": 1.0, "others": 0.0, "cpus": 2, "need": 2}]}
    got = dur.estimate(c, units, done=done, store=store, load=_load(0.0)).units[name]
    assert (got.source, got.s) == ("this study", 20.0)
    # a train unit not yet run: from the study's recorded runs (fixed 12 s, step 1 s, 6 steps)
    rec = {"kind": "train", "strategy": "ddp", "step_times_s": [1.0] * 6, "phases": {"total": 18.0}}
    done = SimpleNamespace(units={}, of_kind=lambda kind: [rec] if kind == "train" else [])
    got = dur.estimate(c, units, done=done, store=store, load=_load(0.0)).units[name]
    assert got.source == "this study" and got.s == pytest.approx(12.0 + 6 * 1.0)


def test_a_profiled_round_adds_its_trace_phase_and_a_later_round_does_not(tmp_path):
    """The first --trace-rounds rounds profile steps; later rounds time them alone. A recorded run's trace phase
    is not its fixed cost: it is counted apart (train_trace) and added only to the rounds that profile."""
    c = _config(tmp_path, repeats=2, trace_rounds=1)
    first, second = [u for u in build_plan(c) if u.kind == "train"]
    step = {dur._train_key(c, "ddp") + "/step": [{"s": 0.5, "others": 0.0, "cpus": 2, "need": 2}]}
    store = {dur._key("train_fixed", "cpu", "ddp"): [{"s": 6.0, "others": 0.0, "cpus": 2, "need": 2}],
             dur._key("train_trace", "cpu", "ddp"): [{"s": 1.5, "others": 0.0, "cpus": 2, "need": 2}], **step}
    est = dur.estimate(c, [first, second], store=store, load=_load(0.0))
    assert est.units[first.name].s == pytest.approx(6.0 + 1.5 + 4 * 0.5)
    assert est.units[second.name].s == pytest.approx(6.0 + 4 * 0.5)
    # from this study's own profiled run: its wall 12 s, 6 steps of 1 s, its trace phase 2 s -> fixed 4 s
    rec = {"kind": "train", "strategy": "ddp", "step_times_s": [1.0] * 6, "phases": {"total": 12.0, "trace": 2.0},
           "comm": {"collectives": []}}
    done = SimpleNamespace(units={}, of_kind=lambda kind: [rec] if kind == "train" else [])
    est = dur.estimate(c, [first, second], done=done, store={}, load=_load(0.0))
    assert est.units[first.name].s == pytest.approx(4.0 + 2.0 + 6 * 1.0)
    assert est.units[second.name].s == pytest.approx(4.0 + 6 * 1.0)
    # what a study learns for the host: the fixed cost without the trace, the trace phase apart
    learnt = dict(dur._samples(c, [{"status": "ok", "duration_s": 12.0, "unit_kind": "train", "name": first.name,
                                    "strategy": "ddp", "fabric": "default"}],
                               [{**rec, "study": {"unit": first.name}}]))
    assert learnt[dur._key("train_fixed", "cpu")]["s"] == pytest.approx(4.0)
    assert learnt[dur._key("train_trace", "cpu")]["s"] == pytest.approx(2.0)


def test_a_figure_measured_on_a_quiet_host_grows_with_the_load_now(tmp_path):
    c = _config(tmp_path)
    units = build_plan(c)
    store = {dur._key("machine", "cpu"): [{"s": 4.0, "others": 0.0, "cpus": 2, "need": 1}],
             dur._key("sweep", "cpu"): [{"s": 1.0, "others": 2.0, "cpus": 2, "need": 2}]}  # measured at 2x
    quiet = dur.estimate(c, units, store=store, load=_load(0.0))
    busy = dur.estimate(c, units, store=store, load=_load(3.0))
    assert quiet.units["machine"].s == pytest.approx(4.0)
    assert busy.units["machine"].s == pytest.approx(4.0 * (1 + 3.0) / 2)  # 1 CPU wanted, 3 taken, of 2
    sweep = dur._sweep_model(c, "default")
    assert quiet.units["sweep @ default"].s == pytest.approx(sweep * 0.5)  # the sample's own load taken out
    assert busy.total.s > quiet.total.s and busy.load_cpus == 3.0


def test_rounds_past_the_minimum_count_half_in_the_middle_and_wholly_at_the_top(tmp_path):
    c = _config(tmp_path, repeats=None, max_repeats=4)  # 3 rounds, then a 4th only while a question is open
    units = build_plan(c)
    est = dur.estimate(c, units, store={}, load=_load(0.0))
    assert est.optional == {"train ddp @ default #4"}
    d = est.units["train ddp @ default #4"]
    without = dur.estimate(c, [u for u in units if u.name not in est.optional], store={}, load=_load(0.0)).total
    assert est.total.s == pytest.approx(without.s + d.s / 2)
    assert (est.total.lo_s, est.total.hi_s) == (pytest.approx(without.lo_s), pytest.approx(without.hi_s + d.hi_s))


def test_with_a_target_ci_the_step_count_spans_steps_to_the_cap(tmp_path):
    c = _config(tmp_path, target_ci=0.03, max_steps=20)
    u = _train_unit(c)
    store = {dur._key("train_fixed", "cpu"): [{"s": 0.0, "others": 0.0, "cpus": 2, "need": 2}],
             dur._train_key(c, "ddp") + "/step": [{"s": 1.0, "others": 0.0, "cpus": 2, "need": 2}]}
    t = dur.estimate(c, [u], store=store, load=_load(0.0)).units[u.name]
    assert (t.lo_s, t.s, t.hi_s) == (pytest.approx(4 * 0.8), pytest.approx(12.0), pytest.approx(20 * 1.25))
    store[dur._train_key(c, "ddp") + "/steps"] = [{"s": 0.25, "others": 0, "cpus": 2, "need": 0}] * 2
    t = dur.estimate(c, [u], store=store, load=_load(0.0)).units[u.name]
    assert t.s == pytest.approx(8.0)  # this host's runs went a quarter of the way to the cap


def test_the_store_is_learnt_atomically_and_never_trusted_unreadable(tmp_path):
    c = _config(tmp_path)
    path = tmp_path / "cache" / "vm.json"
    plan = {"kind": "plan", "study": {"attempt": "a1", "process_age_s": 0.8}}
    units = {"machine": {"name": "machine", "unit_kind": "machine", "status": "ok", "duration_s": 3.0, "attempt": "a1",
                         "details": {"host_load": {"others_cpus": 1.0, "cpus": 2}}},
             "summary": {"name": "summary", "unit_kind": "summary", "status": "error", "duration_s": 9.0,
                         "attempt": "a1"},
             "estimate": {"name": "estimate", "unit_kind": "estimate", "status": "ok", "duration_s": 9.0,
                          "attempt": "an earlier one"}}
    got = study_records.StudyRecords(out_dir=tmp_path, plans=[plan], units=units)
    for _ in range(hoststore.KEEP + 2):
        dur.learn(c, got, report_s=2.0, path=path)
    store = hoststore.read_store(path)
    assert [x["s"] for x in store["machine/cpu"]] == [3.0] * hoststore.KEEP and store["machine/cpu"][0]["others"] == 1.0
    assert store["report/cpu"][0]["s"] == 2.0 and store["start/cpu"][0]["s"] == 0.8
    assert "summary/cpu" not in store and "estimate/cpu" not in store  # a failed unit, another attempt's
    assert not [p for p in path.parent.iterdir() if p.name != path.name]  # no temporary file left
    for text in ("{not json", json.dumps({"schema": hoststore.SCHEMA + 1, "samples": store}),
                 json.dumps({"schema": hoststore.SCHEMA, "samples": {"machine/cpu": [{"s": "3"}]}})):
        path.write_text(text)
        assert hoststore.read_store(path).get("machine/cpu", []) == []
    dur.learn(c, got, path=path)  # an unreadable store is replaced, not added to
    assert len(hoststore.read_store(path)["machine/cpu"]) == 1


def test_the_store_lives_in_fabricbenchs_cache_one_file_per_host():
    path = hoststore.store_path({"XDG_CACHE_HOME": "/x/cache"})
    assert path.parent == hoststore.Path("/x/cache/fabricbench/durations") and path.suffix == ".json"


def test_an_estimate_reads_in_one_unit_with_its_interval():
    assert dur.Duration(192.0, 126.0, 288.0).text() == "~3.2 min (2.1–4.8)"
    assert dur.Duration(40.0, 25.0, 90.0).text() == "~40 s (25–90)"
    assert dur.Duration(3.1, 2.5, 3.9).text() == "~3.1 s (2.5–3.9)"


def test_the_dry_run_says_the_total_its_interval_and_sources(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "200"}
    code, out, err = run_cli_subprocess(["study", "--device", "cpu", "--nprocs", "2", "--fabrics", "default",
                                         "--strategies", "ddp", "--model", MODEL, "--out", tmp_path / "s", "--dry-run"],
                                        env=env, timeout=600)
    assert code == 0, err
    m = re.search(r"estimate: ~(\d+\.?\d*) (s|min) \((\d+\.?\d*)–(\d+\.?\d*)\) in all", out)
    assert m and float(m[3]) < float(m[1]) < float(m[4]), out
    assert "from a first guess" in out and "other processes use" in out


def _wall_and_estimate(tmp_path, env, args):
    code, out, err = run_cli_subprocess(["study", *args, "--out", tmp_path / "s", "--dry-run", "--json"], env=env,
                                        timeout=600)
    assert code == 0, err
    est = json.loads(out)["estimate"]
    t0 = time.monotonic()
    code, _, err = run_cli_subprocess(["study", *args, "--out", tmp_path / "s", "--quiet"], env=env, timeout=600)
    wall = time.monotonic() - t0
    assert code == 0, err
    return est, wall


@pytest.mark.slow
def test_the_dry_run_estimate_is_within_2x_of_the_wall(tmp_path):
    """The bar: on the CPU lab, the dry run's figure within 2x of the wall of the same study run right after
    it, and the wall inside the stated interval (or within a quarter of it); first from the first guess (a
    fresh cache), then from what that run taught the host's store."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    args = ["--device", "cpu", "--nprocs", "2", "--fabrics", "default", "--strategies", "ddp", "--model", MODEL,
            "--steps", "4", "--warmup-steps", "1", "--target-ci", "0", "--repeats", "1"]
    for source, out in (("first guess", "a"), ("this host", "b")):
        est, wall = _wall_and_estimate(tmp_path / out, env, args)
        print(f"{source}: estimate {est['s']} s ({est['lo_s']}-{est['hi_s']}), wall {wall:.1f} s, "
              f"others' load {est['load_cpus']} of {est['cpus']} CPUs")
        assert source in est["source"]
        assert wall / 2 <= est["s"] <= wall * 2, (source, est, wall)
        assert est["lo_s"] / 1.25 <= wall <= est["hi_s"] * 1.25, (source, est, wall)
