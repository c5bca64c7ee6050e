"""A busy host is recorded and said: fabricbench/hostload.py measures the CPU other
processes used during a run, a study writes it beside each train and collective record, and the report and
the study's answer say it beside every verdict built on a run taken on a busy host.

The accounting is tested on a /proc written here (a quiet host and a busy one, exact figures); the real
/proc with a synthetic load: a busy-looping process outside the run's tree, and one inside it. This machine
may be loaded by others, so the real tests assert what the loops did, not that the rest was quiet.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fabricbench import hostload
from fabricbench.results.schema import TrainResult
from fabricbench.studying import records as study_records
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.report import answer_lines, build
from fabricbench.studying.report.common import question_summary
from roots import DATA

TICK = hostload.os.sysconf("SC_CLK_TCK")
LAB = DATA / "study" / "cpu-lab"


class FakeProc:
    """A /proc of a few processes whose CPU ticks the test moves on, and a clock it sets."""

    def __init__(self, root: Path) -> None:
        self.root, self.now = root, 0.0
        (root / "uptime").write_text("1000.00 500.00\n")

    def put(self, pid: int, ppid: int, cpu_s: float, *, start_s: float = 10.0, kernel: bool = False, name="p"):
        d = self.root / str(pid)
        d.mkdir(exist_ok=True)
        flags = 0x00200000 if kernel else 0x400000
        ticks = int(cpu_s * TICK)
        (d / "stat").write_text(f"{pid} ({name}) S {ppid} 1 1 0 -1 {flags} 0 0 0 0 {ticks} 0 0 0 20 0 1 0 "
                                f"{int(start_s * TICK)} 0 0\n")

    def steal(self, steal_s: float) -> None:
        """/proc/stat's cpu line with `steal_s` seconds of steal time (all CPUs) so far."""
        (self.root / "stat").write_text(f"cpu  1000 0 500 90000 10 0 5 {int(steal_s * TICK)} 0 0\ncpu0 1 2 3\n")

    def watch(self, root_pid: int) -> hostload.Watch:
        return hostload.watch(root=root_pid, proc=str(self.root), cpus=2, interval_s=3600, clock=lambda: self.now)


def test_a_quiet_host_is_not_flagged(tmp_path):
    fp = FakeProc(tmp_path)
    fp.put(100, 1, 5.0, name="study")  # the run: this one and its children
    fp.put(101, 100, 1.0, name="torchrun")
    fp.put(200, 1, 50.0, name="sshd")  # another process, nearly idle during the run
    fp.put(2, 0, 80.0, kernel=True, name="kthreadd")
    with fp.watch(100) as w:
        fp.now = 10.0
        fp.put(101, 100, 19.0, name="torchrun")  # the run's own 1.8 CPUs: never the host's load
        fp.put(102, 101, 4.0, start_s=1005.0, name="rank0")  # born inside the window: from 0
        fp.put(200, 1, 51.0, name="sshd")
        fp.put(2, 0, 99.0, kernel=True, name="kthreadd")  # kernel threads left out
    load = w.load
    assert load.others_cpu_s == pytest.approx(1.0) and load.others_cpus == pytest.approx(0.1)
    assert load.ours_cpu_s == pytest.approx(22.0)
    assert load.threshold_cpus == 0.5 and not load.busy and hostload.note(load) is None


def test_a_busy_host_is_flagged_naming_the_process(tmp_path):
    fp = FakeProc(tmp_path)
    fp.put(100, 1, 0.0, name="study")
    fp.put(300, 1, 0.0, name="other-job")
    with fp.watch(100) as w:
        fp.now = 10.0
        fp.put(300, 1, 9.0, name="other-job")  # 0.9 of the 2 CPUs for the whole run
        fp.put(301, 1, 2.0, start_s=1003.0, name="compile")
    load = w.load
    assert load.busy and load.others_cpus == pytest.approx(1.1)
    assert [t["name"] for t in load.top] == ["other-job", "compile"]
    said = hostload.note(load.to_dict())
    assert said.startswith("other processes used 1.10 of 2 CPUs") and "the busiest: other-job (pid 300) 0.90, compile (pid 301) 0.20" in said


LOOP = [sys.executable, "-c", "while True: pass"]


def test_a_busy_loop_outside_the_run_is_the_hosts_load():
    # the run: a process that sleeps 3 s beside a busy-looping child of its own
    run = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time\n"
                            f"p = subprocess.Popen({LOOP!r}); print(p.pid, flush=True); time.sleep(3); p.kill()"],
                           stdout=subprocess.PIPE, text=True)
    other = subprocess.Popen(LOOP)  # the synthetic load: outside the run's tree
    try:
        with hostload.watch(root=run.pid, interval_s=0.25, cpus=2) as w:  # the threshold of 2 CPUs: 0.5
            child = int(run.stdout.readline())
            run.wait(timeout=60)
    finally:
        other.kill()
        other.wait()
        run.stdout.close()
    load = w.load
    theirs, ours = w.cpu_s(other.pid), w.cpu_s(child)
    # each loop got some CPU (how much depends on what else this host runs: a few ticks at least)
    assert theirs is not None and not theirs[1] and theirs[0] >= 0.05, (theirs, load)
    assert ours is not None and ours[1] and ours[0] >= 0.05, (ours, load)  # the run's own loop is not load
    assert load.others_cpu_s >= theirs[0] and load.ours_cpu_s >= ours[0]
    assert all(t["pid"] != child for t in load.top)
    # a busy loop takes a whole CPU on a quiet host and shares one on a loaded host: busy either way
    assert load.busy and load.others_cpus >= 0.5
    assert load.readings >= 5


def _lab_copy(tmp_path: Path, busy: bool) -> Path:
    out = tmp_path / "study"
    shutil.copytree(LAB, out)
    lines = (out / "results.jsonl").read_text().splitlines()
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if rec.get("kind") == "train" and rec.get("strategy") == "ddp" and rec.get("fabric") == "default":
            rec["host_load"] = {"window_s": 30.0, "cpus": 2, "others_cpu_s": 39.0 if busy else 0.6,
                                "ours_cpu_s": 50.0, "others_cpus": 1.3 if busy else 0.02, "threshold_cpus": 0.5,
                                "busy": busy, "readings": 30, "top": [{"pid": 7, "name": "gcc", "cpus": 1.2}]}
            lines[i] = json.dumps(rec)
    (out / "results.jsonl").write_text("\n".join(lines) + "\n")
    return out


def test_the_report_and_the_answer_say_a_busy_host_beside_its_verdicts(tmp_path):
    out = _lab_copy(tmp_path, busy=True)
    short = build(out).markdown().split("## In short\n", 1)[1].split("\n## ", 1)[0]
    beside = [ln for ln in short.splitlines() if ln.startswith("- **undecided**") and "(run on a busy host:" in ln]
    assert len(beside) == 3  # ddp against fsdp on default, and default against the two shaped fabrics for ddp
    assert all("train ddp @ default" in ln for ln in beside)
    assert "**busy host** during train ddp @ default: other processes used 1.30 of 2 CPUs" in short
    report = build(out).markdown()
    advice = report.split("## Advice", 1)[1].split("\n## ", 1)[0]
    assert "(run on a busy host: train ddp @ default)" in advice  # the verdict column names the run too
    table = report.split("comparisons: throughput of a over b", 1)[1].split("\n## ", 1)[0]
    assert table.count("undecided (busy host)") == 3, table
    answer = "\n".join(answer_lines(out, width=200))
    assert "busy host during train ddp @ default" in answer  # then the load itself
    assert answer.count("(run on a busy host: train ddp @ default)") == 3


def test_a_quiet_host_says_nothing(tmp_path):
    out = _lab_copy(tmp_path, busy=False)
    assert "busy host" not in build(out).markdown() and "busy host" not in "\n".join(answer_lines(out))
    sr = study_records.load(out)
    stored = StudyConfig.from_dict(sr.plan["study"]["config"])
    summ = question_summary(sr.typed(TrainResult), stored.labelled())
    assert summ["busy_host"] == [] and all(cm["busy_host"] == [] for cm in summ["comparisons"])


def test_the_record_field_is_checked_by_the_reader():
    from fabricbench.results.records import check_record
    good = hostload.Load(window_s=2.0, cpus=2, others_cpu_s=2.0, ours_cpu_s=1.0, others_cpus=1.0,
                         threshold_cpus=0.5, busy=True, readings=3).to_dict()
    rec = {"schema": "fabricbench/1", "kind": "train", "strategy": "ddp", "status": "ok", hostload.FIELD: good}
    assert check_record(rec) is None and hostload.of(rec) == good
    assert "host_load.busy" in check_record({**rec, hostload.FIELD: {**good, "busy": "yes"}})
    assert hostload.of(TrainResult.from_record(rec)) == good  # an unnamed field: kept in `extra`


def _busy(others_cpus: float) -> dict:
    return hostload.Load(window_s=10.0, cpus=2, others_cpu_s=others_cpus * 10, ours_cpu_s=15.0,
                         others_cpus=others_cpus, threshold_cpus=0.5, busy=others_cpus >= 0.5, readings=10,
                         top=[{"pid": 9, "name": "make", "cpus": others_cpus}]).to_dict()


def test_train_says_a_busy_host_beside_the_verdict_it_moved():
    from fabricbench.training import format as train_format, repeats

    busy_round = 2
    recs = [{"kind": "train", "strategy": st, "fabric": "default", "status": "ok", "global_batch": 8, "repeat": r,
             "step_time": {"median_s": step * k},
             hostload.FIELD: _busy(1.4 if (st, r) == ("fsdp", busy_round) else 0.01)}
            for r, k in ((1, 1.0), (2, 1.01), (3, 0.99)) for st, step in (("ddp", 0.100), ("fsdp", 0.130))]
    unit = f"fsdp @ default round {busy_round}"  # a run outside a study: its strategy, fabric and round
    lines = repeats.answer_lines(recs, repeats=3, width=200)
    assert f"(run on a busy host: {unit})" in lines[1], lines
    assert lines[2] == (f"  busy host during {unit}: other processes used 1.40 of 2 CPUs on "
                        "average (busy from 0.50); the busiest: make (pid 9) 1.40")
    assert train_format.cells(recs[3])[8] == "busy host" and train_format.cells(recs[1])[8] == ""
    figs = {f.strategy: repeats.figure_text(f) for f in repeats.figures(recs)}
    assert figs["fsdp"].endswith("(3 run(s), run-to-run); 1 of them on a busy host") and "busy" not in figs["ddp"]
    quiet = [{**r, hostload.FIELD: _busy(0.01)} for r in recs]
    assert not any("busy" in x for x in repeats.answer_lines(quiet, repeats=3, width=200))
    assert repeats.summary(recs)["busy_host"][0]["unit"] == unit


def test_a_lap_is_the_load_of_its_own_recent_window(tmp_path):
    fp = FakeProc(tmp_path)
    fp.put(100, 1, 0.0, name="sweep")
    fp.put(300, 1, 0.0, name="other-job")
    with fp.watch(100) as w:
        fp.now = 10.0
        fp.put(100, 1, 5.0, name="sweep")  # the first 10 s: only ours
        quiet = w.lap(min_s=5.0)
        fp.now = 20.0
        fp.put(300, 1, 8.0, name="other-job")  # the next 10 s: another job takes 0.8 CPU
        busy = w.lap(min_s=5.0)
    assert not quiet.busy and quiet.others_cpus == 0 and quiet.ours_cpu_s == pytest.approx(5.0)
    assert busy.busy and busy.window_s == 10.0 and busy.others_cpus == pytest.approx(0.8)
    assert w.load.others_cpus == pytest.approx(0.4) and w.lap() is None  # the whole run; no lap once ended


def test_steal_time_counts_toward_a_busy_host_and_is_said(tmp_path):
    """A VM whose hypervisor gives its CPUs to another guest: no process of ours or theirs shows the load,
    /proc/stat's steal does. 0.6 of 2 CPUs withheld over 10 s is busy (threshold 0.5) and said; a lap
    reads its own window's steal; /proc without a stat file records no steal figure at all."""
    fp = FakeProc(tmp_path)
    fp.put(100, 1, 0.0, name="train")
    fp.steal(40.0)  # before the run: not its load
    with fp.watch(100) as w:
        fp.now = 5.0
        quiet = w.lap(min_s=5.0)
        fp.now = 10.0
        fp.steal(46.0)
        stolen = w.lap(min_s=5.0)
    load = w.load
    assert quiet.steal_cpus == 0 and not quiet.busy
    assert stolen.steal_cpus == pytest.approx(1.2) and stolen.busy
    assert load.others_cpus == 0 and load.steal_cpus == pytest.approx(0.6) and load.busy
    d = load.to_dict()
    assert d["steal_cpus"] == pytest.approx(0.6)
    assert "the hypervisor withheld 0.60 (steal time)" in hostload.note(d)
    assert "the hypervisor withheld 0.60" in hostload.records_note([{"host_load": d}])
    (tmp_path / "bare").mkdir()
    bare = FakeProc(tmp_path / "bare")  # no /proc/stat
    bare.put(100, 1, 0.0, name="train")
    with bare.watch(100) as w2:
        bare.now = 10.0
    assert w2.load.steal_cpus is None and "steal_cpus" not in w2.load.to_dict()


def test_the_real_proc_stat_gives_a_steal_figure():
    """On Linux the cpu line of /proc/stat has a steal field (since 2.6.11): a watch records it."""
    if not Path("/proc/stat").is_file():
        pytest.skip("no /proc/stat on this machine: steal time is Linux's")
    with hostload.watch() as w:
        time.sleep(0.05)
    assert w.load.steal_cpus is not None and w.load.steal_cpus >= 0


def test_sweep_and_compare_say_which_measurements_ran_on_a_busy_host(monkeypatch):
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from fabricbench.measuring import sweep_run
    from fabricbench.measuring.api import make_config
    from fabricbench.measuring.compare_run import CompareResult
    from fabricbench.measuring.format import render_compare_table
    from fabricbench.reporting import table as tables
    from fabricbench.reporting.analysis import comparison
    from fabricbench.results.schema import CollectiveResult

    recs = [{"kind": "collective", "op": "all_reduce", "dtype": "float32", "inplace": False, "bytes": 1 << s,
             "nranks": 2, "busbw_gbps": 1.0, hostload.FIELD: _busy(load)} for s, load in ((10, 0.1), (20, 1.2))]
    said = hostload.records_note(recs)
    assert said == "busy host during 1 of 2 measurement(s): other processes used up to 1.20 of 2 CPUs (busy from 0.50)"
    assert hostload.records_note(recs[:1]) is None and hostload.records_note([{"kind": "collective"}]) is None
    runs = [SimpleNamespace(fabric=SimpleNamespace(name=n, to_dict=dict), records=r, transport=None, error=None,
                            mismatch=None, waived=None) for n, r in (("default", recs[:1]), ("p2p-off", recs[1:]))]
    assert CompareResult(run_id="r", runs=runs, table=comparison(runs)).to_dict()["busy_host"] == {
        "p2p-off": said.replace("2 measurement", "1 measurement")}
    con = Console(width=200, file=io.StringIO(), color_system=None)
    monkeypatch.setattr(tables, "console", lambda **kw: con)
    render_compare_table(comparison(runs), runs)
    lines = con.file.getvalue().splitlines()
    assert any(ln.startswith("p2p-off: transport None; busy host during 1 of 1 measurement(s)") for ln in lines)
    assert not any("busy" in ln for ln in lines if ln.startswith("default:"))
    said = []  # sweep ends its table with the same sentence
    monkeypatch.setattr(sweep_run, "run_sweep", lambda *a, **k: [CollectiveResult.from_record({**r, "status": "ok"}) for r in recs])
    sweep_run.run(make_config(engine="torch", backend="gloo", nprocs=2, sizes="1K"), out_path=None, as_json=False,
                  csv_path=None, quiet=False, echo=said.append)
    assert said[-1] == hostload.records_note(recs) + ": those figures may be low"


def test_advise_names_a_busy_run_beside_its_verdict():
    from fabricbench.advising.api import StrategyAdvice, _choose
    from fabricbench.advising.memory import MemoryFit
    from fabricbench.advising.strategy import StrategyTime

    def cand(strategy, steps, busy_round=None):
        runs = tuple(TrainResult.from_record({
            "kind": "train", "strategy": strategy, "fabric": "default", "status": "ok", "global_batch": 8,
            "step_time": {"median_s": s}, "repeat": r, hostload.FIELD: _busy(1.4 if r == busy_round else 0.0)})
            for r, s in enumerate(steps, 1))
        mem = MemoryFit(strategy=strategy, need_bytes=1, states_bytes=1, activation_bytes=0, capacity_bytes=10,
                        headroom_bytes=9, verdict="fits", source="estimate")
        return StrategyAdvice(strategy=strategy, memory=mem, time=StrategyTime(
            strategy=strategy, gpus=[0], comm_bytes_per_step=0, wire_bytes_per_rank=0.0, comm_time_s=0.0,
            step_time_s=sorted(steps)[1], volume_source="-", time_source="measured", runs=runs))

    busy_round = 2
    ranked = _choose([cand("ddp", [0.103, 0.1133, 0.0979], busy_round=busy_round),
                      cand("fsdp", [0.100, 0.1101, 0.0951])])
    assert ranked[1].note.endswith(f"; run on a busy host: ddp @ default round {busy_round}"), ranked[1].note
    ranked = _choose([cand("ddp", [0.103, 0.1133, 0.0979]), cand("fsdp", [0.100, 0.1101, 0.0951])])
    assert "busy" not in ranked[1].note
