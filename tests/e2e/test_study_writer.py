"""A study folder has one writer, its derived units follow the units they are computed from, and a unit
file that cannot be written (a link there, a read-only units/) stops the study with one line, exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fabricbench.errors import UsageError
from fabricbench.studying import lock as study_lock, plan as study_plan, runner
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.runner import UnitRun, run_units
from clirun import one_error_line, run_cli_subprocess

MODEL = "tiny-mistral"


def _config(tmp_path, **kw):
    base = dict(out=str(tmp_path / "s"), device="cpu", nprocs=2, fabrics=("default",), strategies=("ddp",),
                model=MODEL, repeats=1, batch_size=2)
    base.update(kw)
    return StudyConfig(**base)


def _fake_units(monkeypatch, statuses: dict[str, str]):
    """_run_unit replaced by one that records each unit with the status asked (ok unless named), and
    returns the names it was asked to run."""
    ran: list[str] = []

    def fake(unit, ctx, writer, attempt, crew=None):
        ran.append(unit.name)
        status = statuses.get(unit.name, "ok")
        runner._write_unit(writer, unit, attempt, status=status, started=time.monotonic(), commands=[],
                           message=None, details={}, facts={})
        return UnitRun(unit=unit, status=status)

    monkeypatch.setattr(runner, "_run_unit", fake)
    return ran


def test_resume_reruns_the_summary_and_relate_after_a_unit_they_depend_on(tmp_path, monkeypatch):
    c = _config(tmp_path, fabrics=("default", "shaped:1gbit"))
    units = study_plan.build_plan(c)
    live = [u.name for u in units if not u.waived]
    first = live[2]  # a measuring unit that failed the first time
    statuses = {first: "error"}
    ran = _fake_units(monkeypatch, statuses)
    run_units(c, units, resume=False, progress=False)
    ran.clear()
    statuses.clear()  # it passes on --resume
    run_units(c, units, resume=True, progress=False)
    derived = [u.name for u in units if u.kind in ("summary", "relate") and not u.waived]
    assert derived and ran[0] == first and set(derived) <= set(ran)
    assert not set(ran) - {first, *derived, *(u.name for u in units if u.waived)}
    ran.clear()
    run_units(c, units, resume=True, progress=False)  # nothing ran again: the stored summary stands
    assert not {u.name for u in units if not u.waived} & set(ran)


def test_a_second_study_on_a_running_folder_is_refused_naming_its_pid(tmp_path, monkeypatch):
    c = _config(tmp_path)
    _fake_units(monkeypatch, {})
    Path(c.out).mkdir()
    with study_lock.one_writer(c.out):
        for resume in (False, True):
            with pytest.raises(UsageError, match=f"a study is running there \\(pid {os.getpid()}\\)"):
                run_units(c, study_plan.build_plan(c), resume=resume, progress=False)
    assert not (Path(c.out) / "results.jsonl").exists()
    run_units(c, study_plan.build_plan(c), resume=False, progress=False)  # the lock went with its holder


@pytest.mark.slow  # two real processes, one a whole fabricbench start: ~6 s on a 2-core machine
def test_the_cli_refuses_a_resume_while_another_process_holds_the_folder(tmp_path):
    out = tmp_path / "s"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom fabricbench.studying.lock import "
                               "one_writer\nwith one_writer(sys.argv[1]):\n    print('held', flush=True)\n"
                               "    time.sleep(60)\n", str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code, _, err = run_cli_subprocess(["study", "--device", "cpu", "--nprocs", "2", "--model", MODEL, "--out",
                                           out, "--resume"])
    finally:
        holder.kill()
        holder.wait()
    assert code == 2, err
    assert f"pid {holder.pid}" in one_error_line(err)


def _first_run_unit(c):
    return next(u for u in study_plan.build_plan(c) if not u.waived)


def test_a_unit_log_that_cannot_be_written_stops_the_study_in_one_line(tmp_path):
    """A folder where the log goes fails open() for root too, as a read-only units/ does for a user."""
    c = _config(tmp_path)
    unit = _first_run_unit(c)
    (Path(c.out) / "units" / f"{unit.slug}.log").mkdir(parents=True)
    with pytest.raises(UsageError, match="cannot write there"):
        run_units(c, [unit], resume=False, progress=False)
    recs = [json.loads(x) for x in (Path(c.out) / "results.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in recs] == ["plan"]  # no unit recorded: --resume runs it


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_units_folder_stops_the_study_in_one_line(tmp_path):
    c = _config(tmp_path)
    units = Path(c.out) / "units"
    units.mkdir(parents=True)
    os.chmod(units, 0o500)
    try:
        with pytest.raises(UsageError, match="cannot write there|cannot remove"):
            run_units(c, [_first_run_unit(c)], resume=False, progress=False)
    finally:
        os.chmod(units, 0o700)


@pytest.mark.parametrize("name,target,resume", [
    ("units/{slug}.log", "victim", False), ("units/{slug}.log", "new", False), ("units", ".", False),
    ("results.jsonl", "new", False), ("results.jsonl", "victim", True), (".study.lock", "victim", False)])
def test_a_link_planted_in_the_study_folder_is_never_written_through(tmp_path, name, target, resume):
    c = _config(tmp_path)
    unit = _first_run_unit(c)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_text('{"no final newline": 1')
    link = Path(c.out) / name.format(slug=unit.slug)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside / target)
    with pytest.raises(UsageError, match="is a symbolic link"):
        run_units(c, [unit], resume=resume, progress=False)
    assert (outside / "victim").read_text() == '{"no final newline": 1' and os.listdir(outside) == ["victim"]
