"""Training on CPU: every strategy on 2 gloo processes, really sharded (bytes per rank), loss falling;
the OOM path; the strategy check catching a fallback.

The end-to-end matrix is data (MATRIX); each model runs its strategies once (module fixture, on the first
test that asks for it), through the same launcher as `fabricbench train --device cpu`, and the assertions
are parametrized over it. tiny-mistral (every strategy: DDP, ZeRO-1/2/3, FSDP) is in the default test
command; tiny-dinov2, the image model, runs with the other end-to-end tests (-m slow).
"""

import gc
import importlib.util
import os

import pytest

from fabricbench.results import ResultWriter
from fabricbench.training import estimate as est
from fabricbench.training import faults, launch, models, phases, verify
from fabricbench.training.strategies import STRATEGIES

NPROCS = 2
# model -> strategies run on NPROCS gloo processes
MATRIX = {
    "tiny-mistral": ["ddp", "zero1", "zero2", "zero3", "fsdp"],
    "tiny-dinov2": ["ddp", "zero3", "fsdp"],
}
SLOW_MODELS = {"tiny-dinov2"}  # left out of the default command (-m slow)
HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None  # the optional [train] extra
CASES = [pytest.param(m, s, marks=[pytest.mark.skipif(
    STRATEGIES.get(s).engine == "deepspeed" and not HAS_DEEPSPEED, reason="DeepSpeed is not installed"),
    *([pytest.mark.slow] if m in SLOW_MODELS else [])])
    for m, names in MATRIX.items() for s in names]


def _config(model, strategies, **kw):
    base = dict(strategies=strategies, model=model, device="cpu", nprocs=NPROCS, steps=5, warmup_steps=2,
                batch_size=2, seq_len=32, image_size=32, lr=1e-3, timeout_s=600, repeats=1, target_ci=None)
    base.update(kw)
    return launch.TrainConfig(**base)


class _Runs(dict):
    """(model, strategy) -> its record; a model's strategies run together on the first lookup of any, once per
    test run: xdist may hand this file's tests to both workers, so the first to ask trains, under a lock in
    the workers' shared temporary folder, and the other reads what it wrote (the pattern pytest-xdist's
    docs give for a session fixture that must run once)."""

    def __init__(self, tmp_path_factory):
        super().__init__()
        self.tmp = tmp_path_factory
        base = tmp_path_factory.getbasetemp()  # a worker's own under xdist: its parent is this run's, shared
        self.shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base

    def __missing__(self, key):
        import fcntl
        import json

        model = key[0]
        if (model, None) in self:  # ran: that strategy wrote no record
            raise KeyError(key)
        self[(model, None)] = None
        done = self.shared / f"train-cpu-{model}.jsonl"
        with open(self.shared / f"train-cpu-{model}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker waits here while this one trains
            if not done.exists():
                path = self.tmp.mktemp("train") / f"{model}.jsonl"
                with ResultWriter(path) as w:
                    launch.run(_config(model, MATRIX[model]), w)
                os.replace(path, done)  # whole, or not there
        for line in done.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("kind") == "train":
                self[(model, rec["strategy"])] = rec
        return self[key]


@pytest.fixture(scope="session")  # kept across modules: a worker that leaves this file and comes back to it
def runs(tmp_path_factory):  # would otherwise train every strategy again (a module fixture is torn down)
    return _Runs(tmp_path_factory)


@pytest.mark.parametrize("model, strategy", CASES)
def test_strategy_ran_as_asked_and_trained(runs, model, strategy):
    rec = runs[(model, strategy)]
    s = STRATEGIES.get(strategy)
    assert rec["status"] == "ok", rec["message"]
    assert rec["kind"] == "train" and rec["schema"].startswith("fabricbench/")
    assert (rec["engine"], rec["zero_stage"], rec["world_size"], rec["nranks"]) == (s.engine, s.zero_stage,
                                                                                     NPROCS, NPROCS)
    assert rec["last_loss"] < rec["first_loss"] and rec["loss_decreased"] is True
    assert rec["step_time"]["timed_steps"] == 3 and rec["throughput"]["samples_per_s"] > 0
    assert rec["global_batch"] == 2 * NPROCS
    assert set(rec["versions"]) == {"torch", "accelerate", "transformers", "deepspeed"}
    ph = rec["phases"]  # training/phases.py: every phase reached, adding up to the run's wall time
    assert set(ph) == {*phases.PHASES, "total"} and ph["timed"] > 0 and ph["imports"] > 0
    assert sum(v for k, v in ph.items() if k != "total") == pytest.approx(ph["total"], abs=0.01)
    # the timed phase holds the 3 timed steps (and the rank file's writes): spans end at the slowest rank's
    # stamp while step_times_s takes each step's slowest rank, so the two differ by a little
    assert ph["timed"] >= 0.6 * sum(rec["step_times_s"][2:])


@pytest.mark.parametrize("model, strategy", CASES)
def test_bytes_held_per_rank(runs, model, strategy):
    """Count what each rank holds against Ψ and the framework recipe's bytes."""
    rec = runs[(model, strategy)]
    psi = rec["params"]
    expect = est.model_states(psi=psi, num_gpus=NPROCS, recipe=rec["estimate"]["recipe"])[strategy]
    s = STRATEGIES.get(strategy)
    for h in rec["holdings"]:
        for kind, whole in (("params", psi), ("grads", psi), ("optimizer", 2 * psi)):
            frac = h[f"{kind}_numel"] / whole
            if kind in s.shards:
                assert 0.45 < frac <= 0.55, (kind, frac)
        if "params" not in s.shards:
            assert h["params_numel"] == psi  # every element, on every rank
        # m and v of this rank's elements, fp32
        assert h["optimizer_bytes"] == pytest.approx(expect["optimizer_bytes"], rel=0.02)
        assert h["params_bytes"] == pytest.approx(expect["params_bytes"], rel=0.02)
        assert h["master_bytes"] == pytest.approx(expect["master_bytes"], rel=0.02)
    # the ranks' shares add up to the whole model, plus padding: FSDP2 pads dim 0 to a multiple of n
    # (tiny-dinov2's (1, 17, 64) position embeddings become two rows), DeepSpeed pads its flat partitions
    if "params" in s.shards:
        assert psi <= sum(h["params_numel"] for h in rec["holdings"]) <= 1.03 * psi


@pytest.mark.skipif(not HAS_DEEPSPEED, reason="DeepSpeed is not installed")
def test_sharding_order_along_the_dial(runs):
    held = {s: runs[("tiny-mistral", s)]["holdings"][0] for s in MATRIX["tiny-mistral"]}
    total = {s: h["params_bytes"] + h["grads_bytes"] + h["optimizer_bytes"] + h["master_bytes"]
             for s, h in held.items()}
    assert total["ddp"] > total["zero1"] >= total["zero2"] > total["zero3"]
    assert total["fsdp"] < total["ddp"] / 1.9


def test_a_fallback_to_ddp_is_an_error(runs):
    """The ranks of the DDP run, presented as if fsdp or zero2 had been asked for."""
    ddp = runs[("tiny-mistral", "ddp")]
    ranks = [{"rank": i, "status": "ok", "engine": "ddp", "zero_stage": None, "wrapper": "DistributedDataParallel",
              "world_size": NPROCS, "holdings": h, "step_times_s": [0.1] * 5, "losses": [2.0, 1.0, 1, 1, 1]}
             for i, h in enumerate(ddp["holdings"])]
    for asked in ("fsdp", "zero2"):
        out = launch.join_ranks(_config("tiny-mistral", [asked]), asked, ranks, rc=0, log="", psi=ddp["params"])
        assert out["status"] == "error"
        assert f"asked for {asked}" in out["message"] and "what ran is ddp" in out["message"]
        assert "not sharded" in out["message"]


def test_check_catches_wrong_stage_world_and_bytes():
    psi = 1000
    whole = verify.Holdings(params_bytes=4000, grads_bytes=4000, optimizer_bytes=8000, master_bytes=0,
                            params_numel=psi, grads_numel=psi, optimizer_numel=2 * psi)
    half = verify.Holdings(params_bytes=1000, grads_bytes=1000, optimizer_bytes=4000, master_bytes=2000,
                           params_numel=psi // 2, grads_numel=psi // 2, optimizer_numel=psi)
    z3 = STRATEGIES.get("zero3")
    assert verify.check(z3, engine=("deepspeed", 3), world_size=2, expected_world=2, psi=psi,
                        held=[half, half]) == []
    stage = verify.check(z3, engine=("deepspeed", 2), world_size=2, expected_world=2, psi=psi, held=[half, half])
    assert stage == ["asked for zero3 but DeepSpeed runs ZeRO stage 2"]
    one = verify.check(z3, engine=("deepspeed", 3), world_size=1, expected_world=2, psi=psi, held=[whole])
    assert "asked for 2 processes but the world size is 1" in one
    assert any(p.startswith("params not sharded: rank 0 holds 1000 elements = 1.000") for p in one)
    # ddp alone may be unwrapped, and only in one process
    ddp = STRATEGIES.get("ddp")
    assert verify.check(ddp, engine=("none", None), world_size=1, expected_world=1, psi=psi, held=[whole]) == []
    assert verify.check(ddp, engine=("none", None), world_size=2, expected_world=2, psi=psi,
                        held=[whole, whole]) == ["asked for ddp (ddp) but what ran is none"]


def test_engine_of_a_real_ddp_module(tmp_path):
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        wrapped = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 4))
        assert verify.engine_of(wrapped) == ("ddp", None)
        assert verify.engine_of(torch.nn.Linear(4, 4)) == ("none", None)
        opt = torch.optim.AdamW(wrapped.parameters())
        wrapped(torch.randn(3, 4)).sum().backward()
        opt.step()
        h = verify.holdings(wrapped, opt)
        assert (h.params_numel, h.grads_numel, h.optimizer_numel) == (20, 20, 40)
        assert (h.params_bytes, h.optimizer_bytes) == (80, 160)
    finally:
        # the DDP module's Reducer holds the group: released after destroy_process_group, at the test's end,
        # its ProcessGroupGloo destructor once waited forever on its threads (1 fast run in 8); let it go first
        wrapped = opt = h = None
        gc.collect()
        dist.destroy_process_group()


def test_the_fault_injection_point_is_inert_unless_armed_and_refuses_a_mistyped_arm():
    assert faults.armed("oom", "ddp", env={}) is None  # a normal run
    assert faults.armed("oom", "ddp", env={faults.INJECT_ENV: "oom:fsdp"}) is None  # another strategy's
    assert "injected out of memory" in faults.armed("oom", "fsdp", env={faults.INJECT_ENV: "oom:ddp, oom:fsdp"})
    for bad in ("fsdp", "oom", "oom:", "crash:fsdp", ""):
        with pytest.raises(ValueError, match="KIND:STRATEGY"):
            faults.armed("oom", "ddp", env={faults.INJECT_ENV: bad})


@pytest.mark.slow
def test_oom_is_a_result_and_all_goes_on(tmp_path):
    cfg = _config("tiny-mistral", ["ddp", "fsdp"], extra_env={faults.INJECT_ENV: "oom:ddp"})
    with ResultWriter(tmp_path / "oom.jsonl") as w:
        recs = launch.run(cfg, w)
    assert [r["status"] for r in recs] == ["oom", "ok"]
    assert "injected out of memory" in recs[0]["message"]
    psi = recs[0]["params"]
    assert recs[0]["estimate"]["total_bytes"] == 16 * psi  # the estimate beside it
    assert recs[0]["estimate"]["recipe"] == "framework-fp32"  # CPU trains in fp32 unless --precision says
    from fabricbench.results import read_results

    assert [r["status"] for r in read_results(tmp_path / "oom.jsonl", kind="train")] == ["oom", "ok"]


def test_rank_crash_is_an_error_not_a_result():
    cfg = _config("tiny-mistral", ["ddp"])
    out = launch.join_ranks(cfg, "ddp", [], rc=1, log="Traceback ... boom", psi=10)
    assert out["status"] == "error" and "launcher exit 1, 0 of 2 rank(s) reported" in out["message"]


def test_an_oom_rank_is_the_outcome_when_torchrun_stopped_the_others_first():
    """Rank 0 out of memory at its first step; torchrun SIGTERMs rank 1 before it got there (it was still
    preparing): the run is an OOM result, not "rank 1 died". A stalled or timed-out run still names its rank."""
    cfg = _config("tiny-mistral", ["ddp"])
    ranks = [{"rank": 0, "status": "oom", "message": "injected out of memory", "step_times_s": []},
             {"rank": 1, "status": "running", "step_times_s": []}]
    log = "rank 1 exited with signal SIGTERM"
    assert launch.unfinished(cfg, ranks, rc=1, log=log, timed_out=False) is None
    out = launch.join_ranks(cfg, "ddp", ranks, rc=1, log=log, psi=10)
    assert out["status"] == "oom" and out["message"] == "rank 0: injected out of memory"
    stalled = launch.unfinished(cfg, ranks, rc=1, log=log, timed_out=False, stalled=1, why="rank 1 stopped answering")
    assert stalled["status"] == "error" and stalled["rank_died"] == 1


def test_flat_loss_is_flagged():
    psi = 1000
    h = dict(params_bytes=4000, grads_bytes=4000, optimizer_bytes=8000, master_bytes=0, params_numel=psi,
             grads_numel=psi, optimizer_numel=2 * psi)
    ranks = [{"rank": i, "status": "ok", "engine": "ddp", "zero_stage": None, "wrapper": "DistributedDataParallel",
              "world_size": 2, "holdings": h, "step_times_s": [0.1] * 5, "losses": [2.0, 2.1, 2.0, 2.2, 2.05]}
             for i in range(2)]
    out = launch.join_ranks(_config("tiny-mistral", ["ddp"]), "ddp", ranks, rc=0, log="", psi=psi)
    assert out["status"] == "flagged" and out["message"] == "loss did not decrease: 2.0000 -> 2.0500"


def test_models_resolve_and_freeze():
    spec = models.resolve(name="tiny-dinov2")
    assert spec.task == models.IMAGE_CLS and spec.config.num_labels == 101
    m = models.build(spec)
    assert models.freeze_unused(m) == ["dinov2.embeddings.mask_token"]
    assert models.block_class_names(m, None) == ["Dinov2Layer", "Dinov2SwiGLUFFN"] or \
        "Dinov2Layer" in models.block_class_names(m, None)
    with pytest.raises(ValueError, match="name exactly one of"):
        models.resolve(name="tiny-dinov2", config_file="x.json")


def test_missing_deepspeed_is_waived_not_launched(monkeypatch):
    import importlib.util as iu

    real = iu.find_spec
    monkeypatch.setattr(iu, "find_spec", lambda name, *a: None if name == "deepspeed" else real(name, *a))
    resolved = models.resolve(name="tiny-mistral")
    body = launch.run_strategy(_config("tiny-mistral", ["zero2"]), "zero2", resolved, 106_816)
    assert body["status"] == "waived"
    assert body["message"] == "waived: DeepSpeed is not installed (pip install 'fabricbench[train]')"
    states = est.model_states(psi=106_816, num_gpus=2, recipe="framework-fp32")
    assert body["estimate"]["total_bytes"] == states["zero2"]["total_bytes"]
