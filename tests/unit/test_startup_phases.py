"""A train run's phases (training/phases.py), the ranks' typed spec (training/spec.py) and the fault that
only a test arms (training/faults.py): the parts that need no processes. The end-to-end
run that writes phases into a record is in tests/e2e/test_train_cpu.py."""

from __future__ import annotations

import dataclasses
import json

import pytest

from fabricbench.training import faults, phases
from fabricbench.training.config import TrainConfig
from fabricbench.training.spec import RankSpec


def _rank(start: float, **ends: float) -> dict:
    return {"phases": {"start": start, **ends}}


def test_phases_end_when_the_last_rank_ends_them_and_add_up_to_the_total():
    stamps = dict(imports=3.0, init=3.5, build=4.0, wrap=4.5, first_step=5.0, warmup=6.0, timed=8.0, trace=9.0,
                  end=9.1)
    slow = {k: v + 0.25 for k, v in stamps.items()}
    got = phases.join([_rank(1.0, **stamps), _rank(1.2, **slow)], begun=0.0, spawned=0.5, gone=9.6, joined=9.7)
    assert got["prepare"] == 0.5 and got["launch"] == pytest.approx(0.7)  # the later rank's start
    assert got["imports"] == pytest.approx(3.25 - 1.2) and got["timed"] == pytest.approx(2.0)
    assert got["teardown"] == pytest.approx(9.6 - 9.25) and got["join"] == pytest.approx(0.1)
    assert sum(v for k, v in got.items() if k != "total") == pytest.approx(got["total"]) == pytest.approx(9.7)
    assert phases.startup_s(got) == pytest.approx(got["build"] + got["wrap"] + 0.5 + 0.7 + got["imports"]
                                                  + got["init"])


def test_phases_stop_where_a_rank_stopped_and_say_nothing_without_stamps():
    got = phases.join([_rank(1.0, imports=2.0, init=3.0), _rank(1.0, imports=2.5)], begun=0.0, spawned=0.5,
                      gone=5.0, joined=5.0)
    assert "imports" in got and "init" not in got and "timed" not in got  # rank 1 never finished init
    assert phases.join([{"rank": 0}], begun=0.0, spawned=0.0, gone=1.0) is None  # an old worker
    assert phases.lines(None) == ["phases: not recorded (a rank stamped nothing)"]


def _config(**kw) -> TrainConfig:
    base = dict(strategies=["ddp"], model="tiny-mistral", device="cpu", nprocs=2, steps=8)
    return TrainConfig(**{**base, **kw})


def test_the_rank_spec_takes_every_value_from_the_config_and_refuses_another_version(tmp_path):
    c = _config(warmup_steps=2, trace_steps=0, target_ci=None)
    spec = RankSpec.of(c, "ddp", run_dir=tmp_path, fabric="default", fault=None, local_devices=None)
    assert (spec.steps, spec.warmup_steps, spec.trace_steps, spec.max_steps) == (8, 2, 0, c.step_cap)
    assert spec.backend == c.run_backend and spec.precision == c.run_precision
    spec.write(tmp_path / "spec.json")
    assert RankSpec.read(tmp_path / "spec.json") == spec
    doc = dataclasses.asdict(spec)
    for broken in ({k: v for k, v in doc.items() if k != "seed"}, {**doc, "extra": 1}):
        (tmp_path / "bad.json").write_text(json.dumps(broken))
        with pytest.raises(ValueError, match="one version"):
            RankSpec.read(tmp_path / "bad.json")


def test_the_shipped_step_has_no_fault_point_and_an_armed_one_raises_oom():
    import torch

    from fabricbench.training import worker

    def step(i: int) -> tuple[float, float]:
        return 0.1, 1.0

    spec = RankSpec.of(_config(), "ddp", run_dir="/nowhere", fabric="default", fault=None, local_devices=None)
    args = dict(acc=None, model=None, optimizer=None, feed=iter(()), device=None, engine=("accelerate", None),
                out={}, hb=None, ch=None)
    assert worker._stepper(spec, **args).__qualname__.endswith("one_step")  # nothing wraps it
    armed = dataclasses.replace(spec, fault=faults.armed("oom", "ddp", env={faults.INJECT_ENV: "oom:ddp"}))
    with pytest.raises(torch.cuda.OutOfMemoryError, match="injected"):
        worker._stepper(armed, **args)(0)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        faults.wrap(step, "x")(3)


def test_the_study_report_says_how_much_of_its_time_was_measurement():
    from fabricbench.reporting.document import Document
    from fabricbench.results.schema import TrainResult
    from fabricbench.studying.report.time import time_section

    ph = {"prepare": 0.1, "launch": 0.1, "imports": 2.0, "init": 0.2, "build": 0.1, "wrap": 0.5, "first_step": 1.0,
          "warmup": 1.0, "timed": 3.0, "trace": 1.0, "teardown": 0.5, "join": 0.5, "total": 10.0}
    trains = [TrainResult.from_record({"kind": "train", "strategy": s, "phases": ph}) for s in ("ddp", "fsdp")]
    doc = Document("t")
    time_section(doc, [], {"train ddp": {"duration_s": 30.0}, "train fsdp": {"duration_s": 30.0}}, trains)
    md = doc.markdown()
    assert "Where the time went" in md and "6.0 s of it (10.0%) were timed training steps" in md
    assert "3.0 s per run (median)" in md  # start-up: prepare + launch + imports + init + build + wrap
    empty = Document("t")
    time_section(empty, [], {}, trains)  # no unit durations (an old study): no section, rather than a 0% share
    assert "Where the time went" not in empty.markdown()


def test_a_commands_runs_start_where_the_users_wait_began(tmp_path, monkeypatch):
    """The first run's phases begin at `since` (the CLI's process start), each later run's where the record
    before it was written: the records' totals add up to the command's wall, with nothing between them.
    launch's clock is a counter here, so "where it was written" is exact whatever the host's load."""
    import time
    from types import SimpleNamespace

    from fabricbench.results import ResultWriter
    from fabricbench.training import launch

    starts: list[float] = []
    ends: list[float] = []
    read: list[float] = []  # every reading of launch's clock, in order
    last_before: list[float | None] = []  # the latest reading as each run began

    def clock() -> float:
        read.append(1000.0 + len(read))
        return read[-1]

    monkeypatch.setattr(launch, "time", SimpleNamespace(time=clock, monotonic=time.monotonic))

    def run_strategy(config, name, resolved, psi, *, begun=None, **kw):
        starts.append(begun)
        last_before.append(read[-1] if read else None)
        ends.append(clock())
        return {"strategy": name, "model": "tiny-mistral", "task": "causal-lm", "params": psi, "batch_size": 2,
                "global_batch": 4, "seq_len": 32, "image_size": None, "tokens_per_sample": 32, "device": "cpu",
                "gpus": [], "nranks": 2, "nnodes": 1, "steps": 4, "warmup_steps": 1, "lr": 1e-4,
                "optimizer": "AdamW", "status": "ok", "step_times_s": [0.1] * 4,
                "step_time": {"median_s": 0.1, "ci95_rel": None}}

    monkeypatch.setattr(launch, "run_strategy", run_strategy)
    with ResultWriter(tmp_path / "t.jsonl") as w:
        launch.run(TrainConfig(strategies=["ddp", "fsdp"], model="tiny-mistral", device="cpu", nprocs=2, steps=4,
                               warmup_steps=1, repeats=1), w, since=123.0)
    assert starts[0] == 123.0
    # after the first run's end (its record kept), the last reading before the second run: not the command's
    # start again, and nothing between the stamp and the run
    assert ends[0] < starts[1] == last_before[1], (ends, starts, last_before)


def test_where_the_time_went_adds_up_to_the_study_wall():
    """The study's wall runs from its command's start (the plan's timestamp less its process's age) to its last
    unit's record; its units by kind and the study's own process between them add up to it, per start."""
    from fabricbench.reporting.document import Document
    from fabricbench.studying.report.time import time_section, wall_rows

    plans = [{"run_id": "a1", "timestamp": "2026-01-01T00:00:10+00:00", "study": {"attempt": "a1", "process_age_s": 1.5}},
             {"run_id": "a2", "timestamp": "2026-01-01T01:00:00+00:00", "study": {"attempt": "a2", "process_age_s": 0.5}}]
    units = {  # a1: estimate 10.2-12, train 12.5-40 (ends at 40); a2 (resumed): train 3600.25-3630
        "estimate": {"attempt": "a1", "unit_kind": "estimate", "duration_s": 1.8, "timestamp": "2026-01-01T00:00:12+00:00"},
        "train ddp": {"attempt": "a1", "unit_kind": "train", "duration_s": 27.5, "timestamp": "2026-01-01T00:00:40+00:00"},
        "train fsdp": {"attempt": "a2", "unit_kind": "train", "duration_s": 29.75, "timestamp": "2026-01-01T01:00:30+00:00"},
    }
    rows, wall = wall_rows(plans, units)
    assert wall == pytest.approx((40 - 10 + 1.5) + (30 - 0 + 0.5))
    parts = dict(rows)
    assert parts["train units"] == pytest.approx(57.25) and parts["estimate units"] == pytest.approx(1.8)
    assert parts["the study's process: its start and plan (interpreter, imports, checks)"] == pytest.approx(1.5 + 0.2 + 0.5 + 0.25)
    assert sum(parts.values()) == pytest.approx(wall)  # the rows add up to the wall
    doc = Document("t")
    time_section(doc, plans, units, [])
    assert "The study took 62 s from its command's start" in doc.markdown()
    assert wall_rows([{**plans[0], "study": {"attempt": "a1"}}], units) is None  # an older study: no age


def test_one_node_ranks_are_started_with_what_torchrun_would_set(tmp_path):
    from fabricbench.training import launch

    env: dict[str, str] = {}
    cmds = launch.rank_commands(_config(nprocs=2), tmp_path / "spec.json", env)
    assert list(cmds) == ["rank 0", "rank 1"] and cmds["rank 1"][-2:] == ["--rank", "1"]
    assert (env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"], env["GROUP_RANK"], env["OMP_NUM_THREADS"]) == ("2", "2", "0", "1")
    assert int(env["MASTER_PORT"]) > 0 and env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
    mine = {"OMP_NUM_THREADS": "4"}
    launch.rank_commands(_config(nprocs=2), tmp_path / "spec.json", mine)
    assert mine["OMP_NUM_THREADS"] == "4"  # the user's, as torchrun keeps it
    one: dict[str, str] = {}
    launch.rank_commands(_config(nprocs=1), tmp_path / "spec.json", one)
    assert "OMP_NUM_THREADS" not in one  # one rank has the cores to itself, as under torchrun


def test_rank_0_of_one_node_hosts_the_store_early_and_the_group_shares_it(monkeypatch):
    from torch.distributed import TCPStore

    from fabricbench.training import launch, one_node

    port = launch._free_port()
    base = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port)}
    for other in ({"RANK": "1"}, {"LOCAL_WORLD_SIZE": "1"}, {"TORCHELASTIC_USE_AGENT_STORE": "True"}):
        for k, v in {**base, **other}.items():
            monkeypatch.setenv(k, v)
        assert one_node.early_store() is None  # another rank, several nodes, torchrun's agent
        monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    for k, v in base.items():
        monkeypatch.setenv(k, v)
    store = one_node.early_store()
    assert store is not None
    # what init_process_group's env:// rendezvous makes on rank 0, then a peer's client: one server
    group = TCPStore("127.0.0.1", port, 2, is_master=True, multi_tenant=True, wait_for_workers=False)
    peer = TCPStore("127.0.0.1", port, 2, is_master=False)
    group.set("k", "v")
    assert peer.get("k") == b"v" and store.get("k") == b"v"
