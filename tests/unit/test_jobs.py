"""The job layer (fabricbench/jobs): the child runner's channel, stall and budget policy, the resume store,
secrets kept out of argv and files. Children here are tiny Python processes: fast on CPU CI.

    python3 -m pytest -q tests/unit/test_jobs.py
"""

from __future__ import annotations

import dataclasses
import json
import stat
import sys

import pytest

from fabricbench import jobs
from fabricbench.errors import UsageError
from fabricbench.fabrics import get_fabric
from fabricbench.fabrics.apply import applied
from fabricbench.fabrics.env import travelled
from fabricbench.jobs import secrets
from fabricbench.jobs.store import ResumeStore, read_repaired

SPEAKER = """
import os, signal, sys, time
from fabricbench.jobs import channel
who, mode = sys.argv[1], sys.argv[2]
ch = channel.open_channel(who)
for step in range(1, 4):
    ch.progress(step=step, steps=3)
    ch.record({"kind": "collective", "who": who, "step": step})
if mode == "stop":
    os.kill(os.getpid(), signal.SIGSTOP)
if mode == "wait":
    time.sleep(60)
"""

TWO = """
import subprocess, sys
from fabricbench import procs
a = procs.spawn([sys.executable, "-c", sys.argv[1], "rank 0", "wait"])
b = procs.spawn([sys.executable, "-c", sys.argv[1], "rank 1", sys.argv[2]])
a.wait(); b.wait()
"""


def test_records_stream_back_over_the_channel_and_a_plain_file(tmp_path):
    seen = []
    with jobs.workspace("t") as ws:
        (ws / "out.jsonl").write_text(json.dumps({"kind": "old"}) + "\n")  # there before: not read back
        code = (SPEAKER + "\nchan = os.environ['FABRICBENCH_JOB_CHANNEL']\nassert os.environ['TMPDIR'] == chan"
                "\nopen(os.path.join(chan, 'out.jsonl'), 'a')"
                ".write('{\"kind\": \"plain\"}\\n')\nprint('said')")
        out = jobs.run([sys.executable, "-c", code, "rank 0", "done"], workspace=ws, on_record=seen.append,
                       records_from=[ws / "out.jsonl"], stall_s=30)
    assert out.ok and out.returncode == 0 and out.stdout.strip() == "said"
    assert [r.get("step") for r in seen if r["kind"] == "collective"] == [1, 2, 3]
    assert [r["kind"] for r in seen].count("plain") == 1 and "old" not in [r["kind"] for r in seen]
    assert out.progress["rank 0"] == {"step": 3, "steps": 3}
    assert not ws.exists()


def test_a_stopped_process_is_named_and_everything_is_killed():
    # no wall-clock bar: the stalled verdict is the stall policy's (a stopped process never ends by itself)
    with jobs.workspace("t") as ws:
        out = jobs.run([sys.executable, "-c", TWO, SPEAKER, "stop"], workspace=ws, stall_s=3,
                       expect=["rank 0", "rank 1"])
    assert out.stalled == "rank 1", out
    assert out.message.startswith("rank 1 stopped answering: no sign of life for") and "step 3 of 3" in out.message
    assert out.returncode is None and not out.ok
    assert len(out.records) == 6  # both speakers' records were read before the kill


def test_budget_ends_a_live_job():
    with jobs.workspace("t") as ws:
        out = jobs.run([sys.executable, "-c", "import time; time.sleep(60)"], workspace=ws, budget_s=1.5,
                       grace_s=0.5)
    assert out.timed_out and out.message == "did not finish within 1.5 s" and out.returncode is None


def test_a_speaker_that_never_starts_is_named():
    with jobs.workspace("t") as ws:
        out = jobs.run([sys.executable, "-c", "import time; time.sleep(60)"], workspace=ws, stall_s=1.5,
                       expect=["rank 0"])
    assert out.stalled == "rank 0" and "it never started" in out.message


# -- a job of several processes (sweep --nprocs N's ranks) ---------------------------------------------------
RANK = """
import os, signal, sys, time
from fabricbench.jobs import channel
who, mode = sys.argv[1], sys.argv[2]
ch = channel.open_channel(who)
ch.record({"kind": "collective", "who": who})
ch.send("skip", skipped=1, planned=2)
if mode == "die":
    os.kill(os.getpid(), signal.SIGKILL)
if mode == "stop":
    os.kill(os.getpid(), signal.SIGSTOP)
if mode.startswith("fail"):
    time.sleep(float(mode[4:] or 0))
    ch.error("CollectiveTimeout", "rank 0: the peer went away")
    sys.exit(1)
time.sleep({"wait": 60, "slow": 8}.get(mode, 0))
"""


def _ranks(*modes: str) -> dict[str, list[str]]:
    return {f"rank {r}": [sys.executable, "-c", RANK, f"rank {r}", m] for r, m in enumerate(modes)}


def _run_ranks(*modes: str, stall_s: float = 60) -> tuple[jobs.Outcome, list]:
    said = []
    with jobs.workspace("t") as ws:
        out = jobs.run(_ranks(*modes), workspace=ws, stall_s=stall_s, capture=False,
                       on_message=lambda who, m: said.append((who, m["m"], m.get("skipped"))))
    return out, said


@pytest.mark.slow  # 8 s: a stall limit that a busy laptop's slow start (several seconds) cannot trip
def test_several_processes_end_well_and_an_early_finisher_is_not_called_silent():
    out, said = _run_ranks("ok", "slow", stall_s=5)  # rank 0 exits 8 s before rank 1: not a stall
    assert out.ok and out.returncodes == {"rank 0": 0, "rank 1": 0} and out.failed is None
    assert sorted(r["who"] for r in out.records) == ["rank 0", "rank 1"]
    assert sorted(said) == [("rank 0", "skip", 1), ("rank 1", "skip", 1)]


def test_a_process_that_dies_is_named_and_the_others_are_killed():
    out, _ = _run_ranks("wait", "die")
    assert out.failed == "rank 1" and out.message == "rank 1 died (killed by SIGKILL) before it finished"
    # rank 0 (60 s of sleep) ended by a signal: killed when its peer died, not waited for
    assert out.returncode == -9 and out.returncodes["rank 0"] < 0 and not out.ok


def test_a_stopped_process_of_several_is_named_by_the_stall_timeout():
    out, _ = _run_ranks("wait", "stop", stall_s=3)  # nobody fails: the stall policy ends the job
    assert out.stalled == out.failed == "rank 1" and out.returncode is None
    assert out.message.startswith("rank 1 stopped answering: no sign of life for")
    assert out.returncodes == {"rank 0": -9, "rank 1": -9}  # both killed, the stopped one too


def test_a_process_that_says_why_it_failed_is_named_with_its_reason():
    out, _ = _run_ranks("fail", "wait")
    assert out.failed == "rank 0" and out.returncode == 1 and out.message is None
    assert out.returncodes["rank 1"] < 0  # its 60 s of sleep ended by a signal: killed, not waited for
    assert out.errors == {"rank 0": {"kind": "CollectiveTimeout", "message": "rank 0: the peer went away"}}


def test_a_stopped_process_is_blamed_for_the_error_its_peer_reports():
    out, _ = _run_ranks("fail5", "stop")  # rank 0 fails 5 s after rank 1 stopped (a peer's timeout)
    assert out.stalled == out.failed == "rank 1" and out.returncode is None
    assert out.message.startswith("rank 1 stopped answering: no sign of life for") and "after 1 record(s)" in out.message
    # blamed when rank 0 reported its error, not by the stall policy (60 s of silence, _run_ranks' default)
    assert int(out.message.split("no sign of life for ")[1].split()[0]) < 60, out.message


def test_the_sweep_launcher_turns_the_outcome_into_the_cause_s_error():
    from fabricbench.errors import CollectiveTimeout, FabricbenchError
    from fabricbench.measuring.launch import run_error

    told = {"rank 0": {"kind": "CollectiveTimeout", "message": "rank 0: all_reduce did not finish"}}
    assert run_error(jobs.Outcome(returncode=0, returncodes={"rank 0": 0})) is None
    e = run_error(jobs.Outcome(returncode=None, stalled="rank 1", failed="rank 1", errors=told,
                               message="rank 1 stopped answering: no sign of life for 7 s (...)"))
    assert isinstance(e, CollectiveTimeout) and str(e) == ("rank 1 stopped answering: no sign of life for 7 s "
                                                           "(...); rank 0 then reported: rank 0: all_reduce did "
                                                           "not finish; every rank was killed")
    e = run_error(jobs.Outcome(returncode=-9, failed="rank 1", message="rank 1 died (killed by SIGKILL) before "
                               "it finished"))
    assert type(e) is FabricbenchError and str(e).startswith("rank 1 died (killed by SIGKILL)")
    e = run_error(jobs.Outcome(returncode=1, failed="rank 0", errors=told))
    assert isinstance(e, CollectiveTimeout) and str(e) == "rank 0: all_reduce did not finish"
    e = run_error(jobs.Outcome(returncode=1, failed="rank 1", errors={"rank 1": {"kind": "OSError", "message": "x"}}))
    assert type(e) is FabricbenchError and str(e) == "rank 1: x"
    assert isinstance(run_error(jobs.Outcome(returncode=1, failed="rank 0", errors={
        "rank 0": {"kind": "KeyboardInterrupt", "message": "interrupted"}})), KeyboardInterrupt)


# -- the resume store ----------------------------------------------------------------------------------------
def test_a_torn_last_line_is_cut_off_with_a_warning_and_measured_again(tmp_path):
    path = tmp_path / "r.jsonl"
    a, b = _rec(1), _rec(2)
    path.write_text(json.dumps(a) + "\n" + json.dumps(b)[:30])
    said = []
    store = ResumeStore.open(path, key=lambda r: r.get("extra", {}).get("k"), warn=said.append)
    assert store.done_ok(1) and not store.done_ok(2) and store.keys() == [1]
    assert len(said) == 1 and "cut short" in said[0]
    assert path.read_text() == json.dumps(a) + "\n"  # repaired: every line parses
    with open(path, "a") as fh:  # the next record lands on a line of its own
        fh.write(json.dumps(b) + "\n")
    assert [json.loads(ln)["extra"]["k"] for ln in path.read_text().splitlines()] == [1, 2]


def _rec(k: int) -> dict:
    return {"schema": "fabricbench/1", "kind": "note", "run_id": "r", "status": "ok", "extra": {"k": k}}


def test_a_whole_last_record_without_newline_is_kept(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(_rec(1)))
    assert ResumeStore.open(path, key=lambda r: r["extra"]["k"]).done_ok(1)
    assert path.read_text().endswith("}\n")
    assert read_repaired(tmp_path / "none.jsonl") == []


def test_failed_records_are_not_done():
    store = ResumeStore.of([{"k": 1, "status": "error"}, {"k": 2, "status": "ok"}, {"k": 2, "status": "error"}],
                           key=lambda r: r["k"])
    assert not store.done_ok(1) and not store.done_ok(2)  # the last record of a key is the answer


# -- secrets -------------------------------------------------------------------------------------------------
def test_a_custom_fabric_travels_by_name_through_the_environment(monkeypatch):
    from fabricbench.fabrics import env as fabric_env

    # a qualify test in the same worker may have remembered a fabric named "sec" (fabrics.env._KNOWN)
    monkeypatch.setattr(fabric_env, "_KNOWN", {})
    fabric = get_fabric("sec:MY_TOKEN=hunter2,NCCL_ALGO=Ring")
    with applied(fabric, {}) as launch:
        env = launch.env
    assert env["MY_TOKEN"] == "hunter2"
    child = travelled("sec", env)
    assert child.variables == fabric.variables and child.name == "sec"
    with pytest.raises(UsageError, match="unknown fabric"):
        get_fabric("sec")  # not carried into this process


def test_private_files_and_masking(tmp_path):
    p = secrets.write_private(tmp_path / "spec.json", "x")
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    spec = "sec:MY_TOKEN=hunter2,NCCL_ALGO=Ring"
    assert secrets.mask(f"fabricbench study --fabrics default,{spec}", [spec]) == \
        "fabricbench study --fabrics default,sec:MY_TOKEN=***,NCCL_ALGO=Ring"
    assert secrets.mask("left hunter2 here", [spec]) == "left *** here"


# -- typed jobs ----------------------------------------------------------------------------------------------
def test_argv_and_key_come_from_the_config_type():
    from fabricbench.jobs.configs import ARGV, job_key, to_argv
    from fabricbench.measuring.config import SweepConfig
    from fabricbench.measuring.p2p_run import P2PConfig
    from fabricbench.training.config import TrainConfig
    from fabricbench.qualifying.units import RunSettings, SweepUnit

    job = SweepConfig(ops="all_reduce", sizes="1M", dtype="bfloat16", iters=5, warmup=1, engine="native",
                      timeout_s=12.5, gpus=(0, 2))
    assert to_argv(job)[:12] == ["--gpus", "0,2", "--ops", "all_reduce", "--sizes", "1M", "--dtype", "bfloat16",
                                 "--iters", "5", "--warmup", "1"]
    assert to_argv(job)[to_argv(job).index("--timeout") + 1] == "12.5"
    gloo = SweepUnit(fabric="default", ops=("all_reduce",), sizes=(1024,), dtype="float32", gpus=(0, 4),
                     check=False, run=RunSettings(engine="torch", backend="gloo", nprocs=4))
    assert "--gpus" not in to_argv(gloo.config) and gloo.key == job_key(gloo.config)  # gloo ranks drive no GPU
    key = job_key(job)
    assert key == job_key(SweepConfig(**{**job.__dict__})) and key != gloo.key and key.startswith("sweep-")
    # what is measured changes the key; a time limit does not (a resumed run with more time finds what it
    # measured before), nor where records go (SweepDelivery: no field of the config)
    assert job_key(dataclasses.replace(job, iters=6)) != key
    assert job_key(dataclasses.replace(job, timeout_s=99.0, stall_timeout_s=30.0)) == key
    unkeyed = {f.name for f in dataclasses.fields(SweepConfig) if not (f.metadata.get(ARGV) or {}).get("keyed", True)}
    assert unkeyed == {"timeout_s", "stall_timeout_s"}  # a new field is keyed unless it only bounds the time
    copy = P2PConfig(gpus="0-3", no_host=True)
    assert to_argv(copy) == ["--gpus", "0-3", "--size", str(256 << 20), "--iters", "20", "--warmup", "5", "--no-host"]
    assert job_key(copy) == job_key(P2PConfig(gpus="0-3", size="256M", no_host=True))  # the size as read
    assert job_key(copy).startswith("p2p-") and job_key(dataclasses.replace(copy, iters=21)) != job_key(copy)
    t = TrainConfig(strategies="ddp", model="tiny-mistral", device="cpu", nprocs=2, timeout_s=20.0)
    assert to_argv(t)[:2] == ["--strategies", "ddp"] and to_argv(t)[-2:] == ["--timeout", "20"]
    assert "--gpus" not in to_argv(t)  # none named: the child decides, as train does
    assert job_key(t).startswith("train-") and job_key(dataclasses.replace(t, steps=9)) != job_key(t)
    assert job_key(dataclasses.replace(t, timeout_s=99.0, stall_timeout_s=30.0, time_budget_s=60.0)) == job_key(t)
    unkeyed = {f.name for f in dataclasses.fields(TrainConfig) if not (f.metadata.get(ARGV) or {}).get("keyed", True)}
    assert unkeyed == {"timeout_s", "stall_timeout_s", "time_budget_s", "budget_s"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.iters = 3


def test_a_key_is_never_derived_from_a_masked_value():
    """Keys are written into records and file names: a custom fabric enters them as it is shown, so no
    key is a hash of a credential (a short one could be found by trying values). NCCL_* values are shown,
    so they still tell two fabrics apart."""
    from fabricbench.jobs.configs import job_key
    from fabricbench.measuring.config import SweepConfig
    from fabricbench.training.config import TrainConfig

    def key(**fabric: str) -> str:
        return job_key(SweepConfig(ops="all_reduce", sizes="1K", iters=2, warmup=0, engine="native", **fabric))

    assert key(fabric="sec:MY_TOKEN=hunter2") == key(fabric="sec:MY_TOKEN=x")
    assert key(fabric="x:NCCL_ALGO=Ring") != key(fabric="x:NCCL_ALGO=Tree")
    assert key(fabric="sec:MY_TOKEN=hunter2") != key()
    t = dict(strategies="ddp", model="tiny-mistral", device="cpu")
    assert job_key(TrainConfig(**t, fabric="sec:MY_TOKEN=a")) == job_key(TrainConfig(**t, fabric="sec:MY_TOKEN=b"))


def _every_field_set() -> list:
    """One job of each kind with every field given (a bool true), so that each field yields its argument
    (P2PConfig refuses both of its bools true: once with each)."""
    from fabricbench.jobs import configs as c
    from fabricbench.measuring.p2p_run import P2PConfig
    from fabricbench.studying.machine import MachineJob
    from fabricbench.training.batch import BatchJob

    return [  # SweepConfig's fields: tests/e2e/test_fabric_apply.py
        P2PConfig(gpus="0-1", size="1M", iters=2, warmup=1, no_host=True),
        P2PConfig(gpus="0-1", size="1M", iters=2, warmup=1, no_peer=True),
        c.ScalingJob(gpus=(0, 1), ops="all_reduce", sizes="1M", fabric="sec", iters=2, warmup=1, out="s.jsonl",
                     as_json=True),
        c.EstimateJob(model="tiny-mistral", model_config="m.json", num_gpus=2, batch_size=2, seq_len=16,
                      image_size=32, as_json=True),
        c.RelateJob(files=("a.jsonl", "b.jsonl"), reference="default", as_json=True),
        c.ReportJob(out_dir="run", as_json=True),
        MachineJob(device="cpu", gpus=(0,), nprocs=2),
        BatchJob(model="tiny-mistral", model_config="m.json", gpu=1, seq_len=16, image_size=32, precision="bf16"),
    ]


@pytest.mark.parametrize("job", _every_field_set(), ids=lambda j: type(j).__name__)
def test_every_job_kind_s_arguments_are_its_child_s_options(job):
    """A job kind's field that its child program does not accept fails here, before any child runs."""
    import importlib

    import click

    from fabricbench.cli import cli
    from fabricbench.jobs.configs import ARGV, child_command, to_argv

    assert child_command(job)[:2] == [sys.executable, "-m"]
    fields = dataclasses.fields(job)
    positional = [f for f in fields if (f.metadata.get(ARGV) or {}).get("positional")]
    argv = to_argv(job)
    n_pos = sum(len(getattr(job, f.name)) if isinstance(getattr(job, f.name), tuple) else 1 for f in positional)
    flags = [a for a in argv[n_pos:] if a.startswith("--")]
    unset = [f for f in fields if getattr(job, f.name) is False]  # a bool left false gives no flag
    assert len(flags) == len(fields) - len(positional) - len(unset)  # every other field gave its option
    program = job.PROGRAM
    if program[0] == "fabricbench":
        command = cli.get_command(click.Context(cli), program[1])
        options = {o for p in command.params if isinstance(p, click.Option) for o in p.opts}
        assert len(positional) == len([p for p in command.params if isinstance(p, click.Argument)])
    else:
        options = {o for a in importlib.import_module(program[0]).parser()._actions for o in a.option_strings}
    assert set(flags) <= options, set(flags) - options


def _library_configs() -> list:
    from fabricbench.measuring.config import SweepConfig
    from fabricbench.measuring.p2p_run import P2PConfig
    from fabricbench.training.config import TrainConfig

    return [SweepConfig, P2PConfig, TrainConfig]


@pytest.mark.parametrize("kind", _library_configs(), ids=lambda k: k.__name__)
def test_every_library_config_field_is_its_child_s_option(kind):
    """A library config that is also a child's command line (study's, qualify's and the lab's children): a
    field it would write that the child command does not take fails here, before any child runs."""
    import click

    from fabricbench.cli import cli
    from fabricbench.jobs.configs import ARGV

    command = cli.get_command(click.Context(cli), kind.PROGRAM[1])
    options = {o for p in command.params if isinstance(p, click.Option) for o in p.opts}
    written = [f for f in dataclasses.fields(kind) if not (f.metadata.get(ARGV) or {}).get("skip")]
    flags = {(f.metadata.get(ARGV) or {}).get("flag") or "--" + f.name.replace("_", "-") for f in written
             if not (f.metadata.get(ARGV) or {}).get("choice")}  # a choice's flags: test_fabric_apply.py
    assert flags <= options, flags - options


def test_a_job_names_a_custom_fabric_by_name_and_carries_its_values_in_the_environment():
    """Whatever a caller hands a job (a whole custom spec, or a name this process knows), its argv shows
    the name only and its environment() carries the values: qualify's train check and the relate lab rely
    on it. Built-in and family fabrics travel as they are."""
    from fabricbench.fabrics.env import remember
    from fabricbench.jobs.configs import SweepDelivery, child_command, environment, sweep_command, to_argv
    from fabricbench.measuring.config import SweepConfig
    from fabricbench.training.config import TrainConfig

    whole = TrainConfig(strategies="ddp", model="tiny-mistral", fabric="tok:MY_TOKEN=s3cr3t,NCCL_ALGO=Ring")
    argv = to_argv(whole)
    assert argv[argv.index("--fabric") + 1] == "tok" and "s3cr3t" not in " ".join(child_command(whole))
    assert travelled("tok", environment(whole.fabric, {})).env == (("MY_TOKEN", "s3cr3t"), ("NCCL_ALGO", "Ring"))
    remember(get_fabric("named:MY_TOKEN=abc"))
    sweep = SweepConfig(ops="all_reduce", sizes="1K", iters=1, warmup=0, engine="torch")
    by_name = SweepDelivery(fabric="named", out="o.jsonl")
    assert sweep_command(sweep, by_name)[-5:] == ["--fabric", "named", "--out", "o.jsonl", "--quiet"]
    assert travelled("named", by_name.environment({"PATH": "/bin"})).env == (("MY_TOKEN", "abc"),)
    shaped = SweepDelivery(fabric="shaped:1gbit", out="o.jsonl")
    assert sweep_command(sweep, shaped)[-5:-3] == ["--fabric", "shaped:1gbit"] and shaped.environment({}) == {}
