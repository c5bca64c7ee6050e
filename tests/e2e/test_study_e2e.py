"""`fabricbench study` on CPU, end to end: units, results.jsonl, resume, Ctrl-C, and the report it writes
(the cheap parts, plan and config: test_study.py).

    python3 -m pytest -q tests/e2e/test_study_e2e.py            one small study (the default test command's)
    python3 -m pytest -q -m slow tests/e2e/test_study_e2e.py    the two below

The slow part runs two small studies once each (module fixtures) and asserts over them:
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

from fabricbench.results import read_results
from fabricbench.studying import records as study_records
from fabricbench.training import faults
from clirun import run_cli_subprocess
from studyrun import MODEL

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


def _units(out: Path) -> list[dict]:
    return list(read_results(out / "results.jsonl", kind="study_unit"))



# -- end to end: the default command's one small study --------------------------------------------------------
SMALL = ["--steps", "4", "--warmup-steps", "1", "--max-steps", "4", "--batch-size", "2", "--seq-len", "32",
         "--iters", "3", "--warmup", "1", "--repeats", "1"]


def test_one_small_study_end_to_end(tmp_path):
    """The default test command's end-to-end study (the two full ones below run with -m slow): one fabric,
    DDP on 2 gloo ranks, as a user types it: every unit recorded and measured, the report built from the
    records, and `fabricbench report` rebuilding the same report without measuring."""
    out = tmp_path / "one"
    code, stdout, err = run_cli_subprocess(["study", "--device", "cpu", "--nprocs", "2", "--fabrics", "default",
                                            "--strategies", "ddp", "--model", "tiny-mistral", *SMALL, "--out", out],
                                           timeout=600)
    assert code == 0, stdout + err
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
    code, _, err = run_cli_subprocess(["report", out], timeout=600)
    assert code == 0, err
    assert (out / "report.md").read_text() == md and (out / "results.jsonl").read_text() == results


# -- end to end (-m slow) --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def full(tmp_path_factory):
    out = tmp_path_factory.mktemp("study") / "lab"
    args = ["study", "--device", "cpu", "--nprocs", "2", "--fabrics", FABRICS, "--strategies", "ddp,fsdp",
            "--model", MODEL, *FULL_TRAIN, "--out", str(out)]
    t0 = time.monotonic()
    code, stdout, err = run_cli_subprocess(args, timeout=600)
    first = time.monotonic() - t0
    assert code == 0, stdout + err
    twin = out.parent / "twin"  # the same study again, for test_two_identical_studies_never_contradict
    code, stdout, err = run_cli_subprocess([*args[:-1], twin], timeout=600)
    assert code == 0, stdout + err
    before = (out / "results.jsonl").read_text()
    report_before = (out / "report.md").read_text()
    unit_files = {p.name: p.stat().st_mtime_ns for p in (out / "units").iterdir()}
    again = run_cli_subprocess([*args, "--resume"], timeout=600)  # (exit status, stdout, stderr)
    return {"out": out, "twin": twin, "args": args, "first_s": first, "resume": again, "before": before,
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
    """The verdicts' CPU criterion: two identical studies never contradict ("a faster" against "b faster", or
    "faster" against "equivalent"; undecided contradicts nothing); each study says its comparisons in its
    summary record and in `fabricbench report DIR --json`. Figures' intervals are not required to overlap: the
    twin runs later, on a CI machine whose load may have moved by more than two runs' spread (once 3.4%,
    against intervals of ±0.9%); the paired comparisons cancel that, and they are the answer."""
    from fabricbench.training.repeats import contradictions

    sums = []
    for out in (full["out"], full["twin"]):
        code, stdout, err = run_cli_subprocess(["report", out, "--json"], timeout=600)
        assert code == 0, err
        doc = json.loads(stdout)
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
    # (a figure the study itself flags as taken on a busy host is not held to it: under xdist the other
    # worker's test can halve one run, and saying so is the study's job)
    twin = {(f["strategy"], f["fabric"]): f for f in sums[1]["figures"]}
    for f in sums[0]["figures"]:
        other = twin[f["strategy"], f["fabric"]]
        if f.get("busy_host_runs") or other.get("busy_host_runs"):
            continue
        assert 0.5 < f["samples_per_s"] / other["samples_per_s"] < 2, (f, other)
    md = (full["out"] / "report.md").read_text()
    assert "95% CI" in md


@pytest.mark.slow
@pytest.mark.skipif(not NETNS, reason="needs root, iproute2 (ip, tc) and network namespaces")
def test_shaped_fabric_really_applied(full):
    sr = study_records.load(full["out"])
    shaped = [r for r in sr.of_kind("collective") if r["fabric"] == f"shaped:{RATE}"]
    assert shaped and all(r["shaped_rate_bps"] == RATE_BPS and r["netns"].startswith("fb-") for r in shaped)
    big = [r for r in shaped if r["op"] == "all_reduce" and r["bytes"] >= 1 << 20]
    # both directions share the namespace's loopback queue: all-reduce busbw is held to RATE/2 (docs/domain.md)
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
    code, _, err = full["resume"]
    assert code == 0, err
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
    code, _, err = run_cli_subprocess(["report", out], timeout=600)
    assert code == 0, err
    assert (out / "report.md").read_text() == md_before
    assert (out / "results.jsonl").read_text() == results_before  # measuring nothing, writing no record


@pytest.mark.slow
def test_resume_refuses_other_settings(full):
    code, _, err = run_cli_subprocess([*[a if a != "4" else "5" for a in full["args"]], "--resume"], timeout=600)
    assert code == 2 and "other settings (steps: 4 -> 5)" in err
    code, _, err = run_cli_subprocess(full["args"], timeout=600)
    assert code == 2 and "already holds a study" in err


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
    resumed = run_cli_subprocess(["study", "--out", out, "--resume"], env=env, timeout=600)
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
    code, _, err = stopped["resumed"]
    assert code == 0, err
    out = stopped["out"]
    units = _units(out)
    # ddp (ok) and fsdp (oom: a measured outcome) are not run again; the sweep and what follows are
    assert [u["name"] for u in units].count("train ddp @ default") == 1
    assert [u["name"] for u in units].count("train fsdp @ default") == 1
    sr = study_records.load(out)
    assert sr.status("sweep @ default") == "ok" and sr.status("relate") is not None
    assert len(sr.of_kind("train")) == 2 and (out / "report.html").exists()
