"""`fabricbench study` on CPU: plan, units, results.jsonl, resume, Ctrl-C, and the report it writes.

The end-to-end part runs two small studies once each (module fixtures) and asserts over them:
- FULL: 2 gloo ranks, fabrics default and shaped:RATE (default only without root/netns, detected),
  ddp and fsdp: every unit recorded, the shaped fabric really applied (busbw held to RATE/2), the report
  (Markdown and self-contained HTML, every figure a data: URI) built from the records; `--resume`
  measures nothing; `fabricbench report` rebuilds the same report.
- STOPPED: fsdp made to run out of memory (training/faults.py's injection point), the run interrupted with SIGINT in
  its sweep: the OOM is a result, the interrupted unit is recorded, `--resume` finishes only what is left.
"""

from __future__ import annotations

import html.parser
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fabricbench.errors import UsageError
from fabricbench.results import read_results
from fabricbench.studying import records as study_records
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.plan import build_plan
from fabricbench.studying.sweeps import covering_sizes, sweep_plan, traced_sizes
from fabricbench.studying.units import Context
from fabricbench.training import faults
from fabricbench.topology.smi import read_file

DATA = Path(__file__).parent / "data" / "topo"
MODEL = "lab-mistral"  # the CPU fabric lab model (fabricbench/training/models.py)
RATE = "1gbit"
RATE_BPS = 10**9
TRAIN = ["--steps", "4", "--warmup-steps", "1", "--max-steps", "8", "--batch-size", "2", "--seq-len", "32", "--iters", "3",
         "--warmup", "1", "--repeats", "1"]
FULL_TRAIN = TRAIN[:-1] + ["2"]  # two runs of each (strategy, fabric), interleaved
SECTIONS = ("In short", "The machine", "Bus bandwidth against size, per fabric", "Scaling inside and across NVLink islands",
            "Memory per GPU per strategy: measured against estimated", "Throughput per strategy per fabric",
            "Bandwidth against slowdown (relate)", "Advice", "Where the time went", "Reproduce")


def _netns_works() -> bool:
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        return False
    return subprocess.run(["ip", "netns", "list"], capture_output=True).returncode == 0


NETNS = _netns_works()
FABRICS = f"default,shaped:{RATE}" if NETNS else "default"


def _fb(*args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "fabricbench", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _units(out: Path) -> list[dict]:
    return list(read_results(out / "results.jsonl", kind="study_unit"))


# -- cheap parts: plan, sizes, records, config -----------------------------------------------------------------
def _config(**kw):
    base = dict(out="/tmp/x", device="cpu", nprocs=2, fabrics=("default", "shaped:1gbit"), strategies=("ddp", "fsdp"),
                model=MODEL)
    base.update(kw)
    return StudyConfig(**base).validate()


def test_plan_order_trains_first_fabric_before_sweeps_then_the_rest():
    names = [u.name for u in build_plan(_config(repeats=2))]
    assert names == ["machine", "estimate", "train ddp @ default", "train fsdp @ default", "sweep @ default",
                     "sweep @ shaped:1gbit", "train ddp @ shaped:1gbit", "train fsdp @ shaped:1gbit",
                     "train ddp @ default #2", "train fsdp @ default #2", "train ddp @ shaped:1gbit #2",
                     "train fsdp @ shaped:1gbit #2", "relate", "summary"]  # rounds interleaved: A B C D A B C D


def test_scaling_unit_only_when_the_gpus_span_islands():
    nvl = read_file(str(DATA / "h200_nvl_two_quads.txt"))
    sxm = read_file(str(DATA / "h200_sxm_nvswitch.txt"))
    # a GPU config without GPUs here: build the config by hand (validate() would look for GPUs)
    cfg = StudyConfig(out="/tmp/x", device="cuda", gpus=tuple(range(8)), fabrics=("default", "p2p-off"),
                      strategies=("ddp",), model=MODEL, iters=5, warmup=1)
    assert "scaling @ default" in [u.name for u in build_plan(cfg, nvl)]
    assert "scaling @ default" not in [u.name for u in build_plan(cfg, sxm)]
    cfg.gpus = (0, 1, 2, 3)  # one quad: no island boundary inside the study's GPUs
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


def test_cli_bad_input_is_one_line(tmp_path):
    r = _fb("study", "--device", "cpu", "--model", "nope", "--out", str(tmp_path / "s"))
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and r.stderr.startswith("Error: unknown model")
    r = _fb("report", str(tmp_path / "none"))
    assert r.returncode == 2 and ": no such folder" in r.stderr


def test_cli_exit_1_names_the_failed_units(tmp_path, monkeypatch, capsys):
    """The study goes on past a failed unit and writes its report; the exit status still says it failed
    (oom and waived are results, not failures)."""
    import fabricbench.studying.api as api
    from fabricbench.cli import main
    from fabricbench.studying.runner import UnitRun

    cfg = _config()
    plan = build_plan(cfg)
    runs = [UnitRun(unit=u, status=s) for u, s in zip(plan, ["ok", "oom", "error", "waived", "timeout"])]

    def fake(config, **kw):
        return api.StudyResult(out_dir=tmp_path, config=cfg, plan=plan, units=runs,
                               results_path=tmp_path / "results.jsonl", report_md=tmp_path / "report.md",
                               report_html=tmp_path / "report.html")

    monkeypatch.setattr(api, "study", fake)
    with pytest.raises(SystemExit) as e:
        main(["study", "--device", "cpu", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 1 and len(err) == 1 and err[0].startswith("Error: ")
    failed = [r.unit.name for r in runs if r.status in ("error", "timeout")]
    assert f"{len(failed)} unit(s) failed" in err[0] and all(n in err[0] for n in failed)
    assert all(r.unit.name not in err[0] for r in runs if r.status in ("ok", "oom", "waived"))
    runs[2].status = runs[4].status = "ok"
    main(["study", "--device", "cpu", "--out", str(tmp_path)])  # no failed unit: exit 0 (returns)


def test_dry_run_lists_units_and_measures_nothing(tmp_path):
    out = tmp_path / "s"
    r = _fb("study", "--device", "cpu", "--nprocs", "2", "--fabrics", "default,shaped:1gbit", "--strategies",
            "ddp,fsdp", "--model", MODEL, "--out", str(out), "--dry-run")
    assert r.returncode == 0, r.stderr
    # 2 sweeps and 2 x 2 trains in each of up to 5 rounds (--max-repeats; past 3 only while the CI is wide)
    assert r.stdout.count(" @ ") == 22 and "estimate: ~" in r.stdout and "sweep @ shaped:1gbit" in r.stdout
    assert not (out / "results.jsonl").exists()


# -- end to end: the default command's one small study --------------------------------------------------------
SMALL = ["--steps", "4", "--warmup-steps", "1", "--max-steps", "4", "--batch-size", "2", "--seq-len", "32",
         "--iters", "3", "--warmup", "1", "--repeats", "1"]


def test_one_small_study_end_to_end(tmp_path):
    """The default test command's end-to-end study (the two full ones below run with -m slow): one fabric,
    DDP on 2 gloo ranks, as a user types it: every unit recorded and measured, the report built from the
    records, and `fabricbench report` rebuilding the same report without measuring."""
    out = tmp_path / "one"
    r = _fb("study", "--device", "cpu", "--nprocs", "2", "--fabrics", "default", "--strategies", "ddp",
            "--model", "tiny-mistral", *SMALL, "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    sr = study_records.load(out)
    assert set(sr.units) == {"machine", "estimate", "relate", "summary", "sweep @ default", "train ddp @ default"}
    for name, u in sr.units.items():
        if name != "relate":  # relate needs two fabrics to compare; its status is its own business
            assert u["status"] == "ok", (name, u["message"])
    (train,) = sr.of_kind("train")
    assert train["strategy"] == "ddp" and train["step_time"]["timed_steps"] >= 3
    assert train["throughput"]["samples_per_s"] > 0 and train["nranks"] == 2
    colls = sr.of_kind("collective")
    assert colls and all(c["status"] == "ok" and c["fabric"] == "default" and c["busbw_gbps"] > 0 for c in colls)
    assert {c["op"] for c in colls} >= {"all_reduce"}
    md = (out / "report.md").read_text()
    assert md.count("\n## ") >= 5 and "## Reproduce" in md and "fabricbench study --device cpu --nprocs 2" in md
    results = (out / "results.jsonl").read_text()
    again = _fb("report", str(out))
    assert again.returncode == 0, again.stderr
    assert (out / "report.md").read_text() == md and (out / "results.jsonl").read_text() == results


# -- end to end (-m slow) --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def full(tmp_path_factory):
    out = tmp_path_factory.mktemp("study") / "lab"
    args = ["study", "--device", "cpu", "--nprocs", "2", "--fabrics", FABRICS, "--strategies", "ddp,fsdp",
            "--model", MODEL, *FULL_TRAIN, "--out", str(out)]
    t0 = time.monotonic()
    r = _fb(*args)
    first = time.monotonic() - t0
    assert r.returncode == 0, r.stdout + r.stderr
    twin = out.parent / "twin"  # the same study again, for test_two_identical_studies_never_contradict
    rt = _fb(*args[:-1], str(twin))
    assert rt.returncode == 0, rt.stdout + rt.stderr
    before = (out / "results.jsonl").read_text()
    report_before = (out / "report.md").read_text()
    unit_files = {p.name: p.stat().st_mtime_ns for p in (out / "units").iterdir()}
    again = _fb(*args, "--resume")
    return {"out": out, "twin": twin, "args": args, "first_s": first, "run": r, "resume": again, "before": before,
            "report_before": report_before, "unit_files": unit_files}


@pytest.mark.slow
def test_every_unit_recorded_and_measured(full):
    out = full["out"]
    sr = study_records.load(out)
    fabrics = FABRICS.split(",")
    expect = {"machine", "estimate", "relate", "summary"} | {f"sweep @ {f}" for f in fabrics} | \
        {f"train {s} @ {f}{r}" for s in ("ddp", "fsdp") for f in fabrics for r in ("", " #2")}
    assert set(sr.units) == expect
    for name, u in sr.units.items():
        if name != "relate":  # relate needs the traces; its status is its own business
            assert u["status"] == "ok", (name, u["message"])
        assert u["duration_s"] > 0 and u["commands"] and u["attempt"]
    trains = sr.of_kind("train")
    assert sorted((r["strategy"], r["fabric"]) for r in trains) == \
        sorted((s, f) for s in ("ddp", "fsdp") for f in fabrics for _ in range(2))
    assert all(r["step_time"]["timed_steps"] >= 3 and "ci95_rel" in r["step_time"] for r in trains)
    # interleaved: the second round starts after every (fabric, strategy) had its first run
    names = [u for u in sr.units if u.startswith("train")]
    assert names.index("train ddp @ default #2") > max(names.index(f"train {s} @ {f}") for s in ("ddp", "fsdp")
                                                       for f in fabrics)
    assert all(r["throughput"]["samples_per_s"] > 0 and r["nranks"] == 2 for r in trains)
    colls = sr.of_kind("collective")
    assert {r["fabric"] for r in colls} == set(fabrics) and all(r["status"] == "ok" for r in colls)
    assert sr.of_kind("machine")[0]["nprocs"] == 2 and sr.of_kind("estimate")[0]["num_gpus"] == 2


@pytest.mark.slow
def test_two_identical_studies_never_contradict(full):
    """Issue 27's CPU criterion: two identical studies never contradict ("a faster" against "b faster", or
    "faster" against "equivalent"; undecided contradicts nothing); each study says its comparisons in its
    summary record and in `fabricbench report DIR --json`. Figures' intervals are not required to overlap: the
    twin runs later, on a CI machine whose load may have moved by more than two runs' spread (once 3.4%,
    against intervals of ±0.9%); the paired comparisons cancel that, and they are the answer."""
    from fabricbench.training.repeats import contradictions

    sums = []
    for out in (full["out"], full["twin"]):
        r = _fb("report", str(out), "--json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        (rec,) = study_records.load(out).of_kind("summary")
        assert rec["rankings"] == doc["rankings"] and rec["comparisons"] == doc["comparisons"]
        n_fab = len(FABRICS.split(","))
        assert len(doc["comparisons"]) == n_fab + 2 * (n_fab - 1)  # ddp/fsdp per fabric, each fabric per strategy
        for c in doc["comparisons"]:
            assert {"a", "b", "fabric", "metric", "ratio", "ci95", "verdict", "rounds", "paired", "method"} <= set(c)
            assert c["verdict"] in ("faster", "equivalent", "undecided") and c["paired"] and c["rounds"] == 2
            assert c["ratio"] >= 1 and c["ci95"][0] <= c["ratio"] <= c["ci95"][1]
        assert set(doc["rankings"]) == set(FABRICS.split(","))
        assert sorted(s for g in doc["rankings"]["default"] for s in g) == ["ddp", "fsdp"]
        for sl in doc["slowdowns"]:
            lo, hi = sl["ci95"]
            assert lo <= sl["value"] <= hi and sl["reference"] == "default"
        for f in doc["figures"]:
            assert f["runs"] == 2 and f["interval"] == "run-to-run" and f["ci95"][0] <= f["samples_per_s"] <= f["ci95"][1]
        sums.append(doc)
    assert contradictions(sums[0], sums[1]) == [], (sums[0]["headline"], sums[1]["headline"])
    # the same measurement, all the same: a twin's figure within a factor of 2 (a unit or a batch gone astray)
    twin = {(f["strategy"], f["fabric"]): f["samples_per_s"] for f in sums[1]["figures"]}
    for f in sums[0]["figures"]:
        assert 0.5 < f["samples_per_s"] / twin[f["strategy"], f["fabric"]] < 2, (f, twin)
    md = (full["out"] / "report.md").read_text()
    assert "95% CI" in md


@pytest.mark.slow
@pytest.mark.skipif(not NETNS, reason="needs root, iproute2 (ip, tc) and network namespaces")
def test_shaped_fabric_really_applied(full):
    sr = study_records.load(full["out"])
    shaped = [r for r in sr.of_kind("collective") if r["fabric"] == f"shaped:{RATE}"]
    assert shaped and all(r["shaped_rate_bps"] == RATE_BPS and r["netns"].startswith("fb-") for r in shaped)
    big = [r for r in shaped if r["op"] == "all_reduce" and r["bytes"] >= 1 << 20]
    # both directions share the namespace's loopback queue: all-reduce busbw is held to RATE/2 (DOMAIN.md)
    assert big and all(r["busbw_gbps"] <= 1.15 * RATE_BPS / 8 / 2 / 1e9 for r in big)
    u = sr.units[f"train ddp @ shaped:{RATE}"]
    assert u["fabric_facts"]["shaped_rate_bps"] == RATE_BPS and u["fabric_facts"]["netns"]


class _Html(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.imgs, self.external, self.h2 = [], [], []
        self._in_h2 = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a.get("src") or "")
        for key in ("src", "href"):
            v = a.get(key) or ""
            if v and not v.startswith(("data:", "#")):
                self.external.append((tag, v))
        self._in_h2 = tag == "h2"

    def handle_data(self, data):
        if self._in_h2:
            self.h2.append(data.strip())
            self._in_h2 = False


@pytest.mark.slow
def test_report_is_self_contained_and_built_from_the_records(full):
    out = full["out"]
    text = (out / "report.html").read_text()
    p = _Html()
    p.feed(text)
    p.close()
    assert p.external == []  # opens with no network
    assert len(p.imgs) >= 3 and all(s.startswith("data:image/png;base64,") for s in p.imgs)
    assert p.h2 == list(SECTIONS)
    md = (out / "report.md").read_text()
    for title in SECTIONS:
        assert f"## {title}" in md
    assert len(list((out / "report_figures").glob("*.png"))) == len(p.imgs)
    # the numbers under the figures are the records' own (4 significant digits, Document's format)
    # (a strategy's figure is the median over its runs: training/repeats.py)
    from fabricbench.training.repeats import figures as run_figures

    sr = study_records.load(out)
    ddp = next(f for f in run_figures(sr.of_kind("train")) if f.strategy == "ddp" and f.fabric == "default")
    assert ddp.runs == 2 and f"| ddp | default | ok | {ddp.samples_per_s:.4g} |" in md
    assert "fabricbench study --device cpu --nprocs 2" in md and f"--fabrics {FABRICS}" in md


@pytest.mark.slow
def test_resume_measures_nothing(full):
    again = full["resume"]
    assert again.returncode == 0, again.stderr
    out = full["out"]
    after = (out / "results.jsonl").read_text()
    assert after.startswith(full["before"])
    added = [json.loads(l) for l in after[len(full["before"]):].splitlines() if l.strip()]
    # relate reruns only if it was not ok; nothing else may run
    units_rerun = [r["name"] for r in added if r["kind"] == "study_unit"]
    assert units_rerun in ([], ["relate"])
    assert not [r for r in added if r["kind"] in ("train", "collective")]
    assert added[0]["kind"] == "plan" and added[0]["study"]["resume"] is True
    for p in (out / "units").iterdir():
        if not p.name.startswith("relate"):
            assert p.stat().st_mtime_ns == full["unit_files"][p.name], p.name


@pytest.mark.slow
def test_report_command_rebuilds_the_same_report(full):
    out = full["out"]
    md_before = (out / "report.md").read_text()
    results_before = (out / "results.jsonl").read_text()
    r = _fb("report", str(out))
    assert r.returncode == 0, r.stderr
    assert (out / "report.md").read_text() == md_before
    assert (out / "results.jsonl").read_text() == results_before  # measuring nothing, writing no record


@pytest.mark.slow
def test_resume_refuses_other_settings(full):
    r = _fb(*[a if a != "4" else "5" for a in full["args"]], "--resume")
    assert r.returncode == 2 and "other settings (steps: 4 -> 5)" in r.stderr
    r = _fb(*full["args"])
    assert r.returncode == 2 and "already holds a study" in r.stderr


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """fsdp out of memory (injected), then SIGINT while the sweep runs, then --resume."""
    out = tmp_path_factory.mktemp("study") / "stopped"
    args = ["study", "--device", "cpu", "--nprocs", "2", "--fabrics", "default", "--strategies", "ddp,fsdp",
            "--model", MODEL, *TRAIN, "--out", str(out)]
    env = {**os.environ, faults.INJECT_ENV: "oom:fsdp"}
    p = subprocess.Popen([sys.executable, "-m", "fabricbench", *args], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 400
    results = out / "results.jsonl"
    while time.monotonic() < deadline and p.poll() is None:  # wait for the sweep unit to start
        if results.exists() and "train fsdp @ default" in [u["name"] for u in _units(out)]:
            time.sleep(1.0)
            break
        time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    units_after_stop = _units(out)
    resumed = _fb("study", "--out", str(out), "--resume", env=env)
    return {"out": out, "rc": p.returncode, "err": err, "units_after_stop": units_after_stop, "resumed": resumed}


@pytest.mark.slow
def test_oom_is_a_result_and_the_study_goes_on(stopped):
    first = {u["name"]: u for u in stopped["units_after_stop"]}
    assert first["train fsdp @ default"]["status"] == "oom", first["train fsdp @ default"]["message"]
    assert first["train ddp @ default"]["status"] == "ok"
    assert "sweep @ default" in first  # the unit after the OOM ran (and was interrupted)


@pytest.mark.slow
def test_interrupted_run_resumes(stopped):
    assert stopped["rc"] == 130 and "--resume" in stopped["err"]
    first = {u["name"]: u for u in stopped["units_after_stop"]}
    assert first["sweep @ default"]["status"] == "interrupted"
    r = stopped["resumed"]
    assert r.returncode == 0, r.stderr
    out = stopped["out"]
    units = _units(out)
    # ddp (ok) and fsdp (oom: a measured outcome) are not run again; the sweep and what follows are
    assert [u["name"] for u in units].count("train ddp @ default") == 1
    assert [u["name"] for u in units].count("train fsdp @ default") == 1
    sr = study_records.load(out)
    assert sr.status("sweep @ default") == "ok" and sr.status("relate") is not None
    assert len(sr.of_kind("train")) == 2 and (out / "report.html").exists()


def test_library_dry_run_returns_the_plan(tmp_path):
    import fabricbench

    res = fabricbench.study(fabricbench.StudyConfig(out=str(tmp_path / "s"), device="cpu", nprocs=2, fabrics="default",
                                                    strategies=["ddp"], model=MODEL, steps=4, warmup_steps=1),
                            dry_run=True)
    assert [u.name for u in res.plan] == ["machine", "estimate", "train ddp @ default", "sweep @ default",
                                          "train ddp @ default #2", "train ddp @ default #3", "train ddp @ default #4",
                                          "train ddp @ default #5", "relate", "summary"]
    assert res.units == [] and res.estimate_s == pytest.approx(sum(u.estimate_s for u in res.plan))
    assert not (tmp_path / "s").exists()


def test_study_and_report_surfaces_are_frozen():
    from fabricbench.cli.report import report
    from fabricbench.cli.study import study

    assert sorted(o for p in study.params for o in p.opts) == sorted([
        "--out", "--gpus", "--device", "--nprocs", "--fabrics", "--strategies", "--model", "--model-config",
        "--steps", "--warmup-steps", "--batch-size", "--seq-len", "--image-size", "--precision", "--sizes",
        "--iters", "--warmup", "--train-timeout", "--sweep-timeout", "--resume", "--dry-run", "--json", "--quiet",
        "--max-steps", "--target-ci", "--repeats", "--max-repeats", "--repeat-budget", "--margin", "--stall-timeout",
        "--nnodes", "--node-rank", "--master-addr", "--master-port", "--join-timeout"])  # across nodes (issue 28)
    assert [p.name for p in report.params] == ["out_dir", "as_json"]


@pytest.mark.parametrize("model, kept, dropped", [("lab-mistral", "--seq-len", "--image-size"),
                                                  ("tiny-dinov2", "--image-size", "--seq-len")])
def test_commands_pass_only_the_shape_the_model_reads(tmp_path, model, kept, dropped):
    from fabricbench.studying.config import StudyConfig
    from fabricbench.studying.report import study_command
    from fabricbench.studying.units import Context, Unit, UNIT_KINDS

    c = StudyConfig(out=str(tmp_path / "s"), device="cpu", nprocs=2, fabrics=("default",), strategies=("ddp",),
                    model=model, steps=4, warmup_steps=1).validate()
    cmd = study_command(c)
    assert kept in cmd and dropped not in cmd
    ctx = Context(config=c, out_dir=tmp_path / "s")
    for kind, unit in (("estimate", Unit(kind="estimate", name="estimate")),
                       ("train", Unit(kind="train", name="train ddp @ default", strategy="ddp", fabric="default"))):
        (argv,), _ = UNIT_KINDS.get(kind).commands(unit, ctx)
        assert kept in argv and dropped not in argv, (kind, argv)


def test_a_model_config_keeps_both_shapes(tmp_path):
    from fabricbench.studying.config import StudyConfig

    c = StudyConfig(out="s", model_config="m.json", seq_len=128, image_size=64)
    assert c.shape_args == ["--seq-len", "128", "--image-size", "64"]


def test_target_ci_zero_turns_the_precision_floor_off(tmp_path):
    """--target-ci 0 is "off" (the study's rounds then stop on the comparisons alone); it used to be dropped as
    "not given", so the study kept the 3% default and its units ran with --target-ci 0.03."""
    from fabricbench.studying.api import resolve_config

    c = resolve_config(StudyConfig(out=str(tmp_path / "s"), device="cpu", nprocs=2, strategies="ddp",
                                   model="tiny-mistral", target_ci=0))
    assert c.target_ci is None
    d = resolve_config(StudyConfig(out=str(tmp_path / "t"), device="cpu", nprocs=2, strategies="ddp",
                                   model="tiny-mistral"))
    assert d.target_ci == 0.03
