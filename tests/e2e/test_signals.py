"""The signal policy (fabricbench/procs.py): SIGHUP ends a run as SIGTERM does, with its own exit status and
one line; a SIGHUP ignored at start (nohup) stays ignored; the line claims only what the command kept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from fabricbench import procs


@pytest.fixture
def handlers():
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    yield
    for s, h in old.items():
        signal.signal(s, h)


@pytest.mark.parametrize("sig,cls,status,word", [(signal.SIGTERM, procs.Terminated, 143, "Terminated"),
                                                 (signal.SIGHUP, procs.HungUp, 129, "Hung up")])
def test_sigterm_and_sighup_become_an_interrupt_with_their_status(handlers, sig, cls, status, word):
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    procs.install()
    with pytest.raises(cls) as e:
        os.kill(os.getpid(), sig)
        signal.sigtimedwait([], 0.5)  # let the handler run in the main thread
    assert isinstance(e.value, KeyboardInterrupt) and procs.exit_status(e.value) == status
    said = procs.message(e.value)
    assert said.startswith(f"{word} ({signal.Signals(sig).name})") and "written" not in said.split(";")[-1][:12]


def test_the_generic_line_claims_no_results_written():
    said = procs.message(KeyboardInterrupt())
    assert said.startswith("Interrupted (Ctrl-C)") and "results measured so far were written" not in said
    e = procs.Terminated()
    e.kept = "3 records written to r.jsonl"
    assert procs.message(e) == "Terminated (SIGTERM); children ended; 3 records written to r.jsonl."


def test_a_sighup_ignored_at_start_stays_ignored(handlers):
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup leaves it
    procs.install()
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    with procs.terminated_as_interrupt():
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN


def test_terminated_as_interrupt_restores_both_handlers(handlers):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    with procs.terminated_as_interrupt():
        assert signal.getsignal(signal.SIGHUP) is not signal.SIG_DFL
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_command_hung_up_exits_129_with_one_line_and_its_temp_folder_gone(tmp_path):
    """The CLI's entry, in a real process: a temp folder made, SIGHUP to itself, the line and status."""
    # SIGHUP at its default, as in a terminal: under nohup this process would start with SIG_IGN, which
    # the CLI keeps (test_a_sighup_ignored_at_start_stays_ignored)
    script = textwrap.dedent("""
        import os, signal, sys, time
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        from fabricbench import procs
        from fabricbench.cli import main
        import fabricbench.cli as cli_mod
        import click

        @click.command()
        def hang():
            with procs.temp_dir("hup") as tmp:
                print(tmp, flush=True)
                os.kill(os.getpid(), signal.SIGHUP)
                time.sleep(30)

        here = type(sys)("hang_command")
        here.hang = hang
        sys.modules["hang_command"] = here
        cli_mod.COMMANDS["hang"] = ("hang_command:hang", "a command that hangs up on itself")
        main(["hang"])
    """)
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 129 and len(lines) == 1 and lines[0].startswith("Hung up (SIGHUP)"), r.stderr
    made = r.stdout.strip()
    assert made and not os.path.exists(made)


def test_train_interrupted_mid_run_writes_the_runs_finished_steps(tmp_path, monkeypatch):
    """The running run's steps (from its ranks' files) are written as an 'interrupted' record, after the
    records of the runs before it, and the line says so."""
    from fabricbench.results import ResultWriter
    from fabricbench.training import join, launch
    from fabricbench.training.launch import TrainConfig

    config = TrainConfig(strategies=["ddp", "fsdp"], model="tiny-mistral", device="cpu", nprocs=2, steps=10,
                         warmup_steps=1, repeats=1)
    ranks = [{"rank": r, "status": "running", "step_times_s": [0.5, 0.2, 0.3 + r], "losses": [3.0, 2.5, 2.1]}
             for r in (0, 1)]

    def fake(config, name, resolved, psi, **kw):
        body = launch._base_body(config, name, resolved, psi)
        if name == "ddp":
            return {**body, "status": "ok", "step_times_s": [0.1] * 10, "steps_completed": 10}
        e = procs.HungUp()
        e.partial = {**body, **join.interrupted(config, ranks, by=procs.said_by(e))}
        raise e

    monkeypatch.setattr(launch, "run_strategy", fake)
    out = tmp_path / "t.jsonl"
    with pytest.raises(procs.HungUp) as e, ResultWriter(out) as writer:
        launch.run(config, writer, quiet=True)
    import json
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(r["strategy"], r["status"]) for r in recs] == [("ddp", "ok"), ("fsdp", "interrupted")]
    cut = recs[1]
    assert cut["steps_completed"] == 3 and cut["step_times_s"] == [0.5, 0.2, 1.3]  # the slowest rank per step
    assert "stopped by SIGHUP after 3 of 10 steps" in cut["message"]
    said = procs.message(e.value)
    assert said.startswith("Hung up (SIGHUP)") and "fsdp's run stopped after 3 of 10 steps" in said
    assert str(out) in said and "1 run(s) before it" in said
