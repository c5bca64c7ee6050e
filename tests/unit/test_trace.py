"""The communication trace of `train` (fabricbench/training/trace.py): what each strategy really sends on 2
gloo ranks, against bytes computed by hand for a model built here; world size 1; the precision recorded;
and the trace arithmetic on synthetic profiler events (gloo and nccl forms, the exposed-time intervals).
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from fabricbench.results import ResultWriter
from fabricbench.training import launch, matching, timeline, trace
from fabricbench.training.spec import RankSpec
from fabricbench.training.strategies import STRATEGIES

HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None

# A Mistral built here so that every byte can be counted by hand: hidden 32, 2 layers of (q, o: 32x32;
# k, v: 32x16 with 2 KV heads of 8; MLP 3 x 32x96; two RMSNorms of 32), embeddings and an untied head of
# 160 x 32, a final norm of 32.
CONFIG = {"model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 32,
          "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "vocab_size": 160, "max_position_embeddings": 64, "tie_word_embeddings": False}
LAYER = 2 * 32 * 32 + 2 * 32 * 16 + 3 * 32 * 96 + 2 * 32  # 12352
EMBED = HEAD = 160 * 32  # 5120 each
NORM = 32
PSI = EMBED + 2 * LAYER + NORM + HEAD  # 34976
ROPE_BUFFERS = 2 * 4  # inv_freq and original_inv_freq: head_dim / 2 = 4 floats each
FP32 = 4
NPROCS = 2
CASES = [pytest.param(s, marks=pytest.mark.skipif(STRATEGIES.get(s).engine == "deepspeed" and not HAS_DEEPSPEED,
                                                  reason="DeepSpeed is not installed"))
         for s in STRATEGIES.names()]


def _config(tmp, strategies, **kw):
    path = tmp / "model.json"
    path.write_text(json.dumps(CONFIG))
    base = dict(strategies=strategies, model_config=str(path), device="cpu", nprocs=NPROCS, steps=4,
                warmup_steps=2, batch_size=2, seq_len=16, lr=1e-3, trace_steps=2, timeout_s=600, repeats=1,
                target_ci=None)
    base.update(kw)
    return launch.TrainConfig(**base)


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """Every available strategy on 2 gloo ranks, fp32 (the CPU default): one torchrun each."""
    tmp = tmp_path_factory.mktemp("trace")
    names = [s.name for s in STRATEGIES if not s.unavailable()]
    with ResultWriter(tmp / "t.jsonl") as w:
        return {r["strategy"]: r for r in launch.run(_config(tmp, names), w)}


def _sum(comm, op, dtype="float32"):
    return sum(c["bytes"] * c["calls_per_step"] for c in comm["collectives"] if c["op"] == op and c["dtype"] == dtype)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", CASES)
def test_trace_shape_and_precision(traced, strategy):
    rec = traced[strategy]
    assert rec["status"] == "ok", rec["message"]
    assert rec["params"] == PSI
    assert (rec["precision"], rec["mixed_precision"]) == ("fp32", "no")
    comm = rec["comm"]
    assert (comm["source"], comm["backend"], comm["world_size"], comm["profiled_steps"]) == ("profiler", "gloo",
                                                                                             NPROCS, 2)
    assert comm["note"] is None
    assert all(c["group_size"] == NPROCS and c["calls_per_step"] > 0 for c in comm["collectives"])
    assert comm["bytes_per_step"] == {op: round(_sum(comm, op) + _sum(comm, op, "uint8") + _sum(comm, op, "float64"))
                                      for op in comm["bytes_per_step"]}
    assert comm["total_bytes_per_step"] == sum(comm["bytes_per_step"].values())
    book = {op: k * PSI * FP32 for op, k in STRATEGIES.get(strategy).textbook_sends.items()}
    assert comm["textbook_bytes_per_step"] == sum(book.values())
    assert comm["textbook_ratio"] == pytest.approx(comm["total_bytes_per_step"] / sum(book.values()))
    tl = comm["timeline"]
    assert tl["source"] == "cpu threads"
    assert 0 < tl["exposed_s"] <= tl["comm_s"] * (1 + 1e-9) and 0 < tl["compute_s"] < tl["step_s"]
    assert tl["exposed_fraction"] == pytest.approx(tl["exposed_s"] / tl["comm_s"])
    ov = comm["overhead"]
    assert ov["timed_step_s"] == rec["step_time"]["median_s"] and ov["ratio"] == pytest.approx(
        ov["profiled_step_s"] / ov["timed_step_s"])


@pytest.mark.slow
def test_ddp_all_reduces_the_fp32_gradients(traced):
    comm = traced["ddp"]["comm"]
    assert _sum(comm, "all_reduce") == FP32 * PSI  # in buckets (DDP's first one is 1 MiB), whatever the split
    assert _sum(comm, "broadcast") == FP32 * ROPE_BUFFERS  # DDP re-broadcasts the buffers every forward
    assert set(comm["bytes_per_step"]) == {"all_reduce", "broadcast"}
    assert comm["textbook_ratio"] == pytest.approx(1 + ROPE_BUFFERS / PSI)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DEEPSPEED, reason="DeepSpeed is not installed")
@pytest.mark.parametrize("strategy", ["zero1", "zero2"])
def test_zero12_all_reduce_then_all_gather(traced, strategy):
    """DeepSpeed 0.19 ZeRO-1/2 all-reduce the gradients (not reduce-scatter) and all-gather the updated
    parameters; plus a scalar or two (the overflow flag, the gradient norm)."""
    comm = traced[strategy]["comm"]
    big = [c for c in comm["collectives"] if c["bytes"] > 64]
    assert {c["op"] for c in big} == {"all_reduce", "all_gather"}
    assert _sum(comm, "all_reduce") - sum(c["bytes"] * c["calls_per_step"] for c in comm["collectives"]
                                          if c["op"] == "all_reduce" and c["bytes"] <= 64) == FP32 * PSI
    assert _sum(comm, "all_gather") == FP32 * PSI
    assert "reduce_scatter" not in comm["bytes_per_step"]
    # the same S as the textbook, but an all-reduce moves twice a reduce-scatter's bytes per rank
    assert comm["wire_ratio"] == pytest.approx(1.5, rel=1e-3)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DEEPSPEED, reason="DeepSpeed is not installed")
def test_zero3_gathers_once_and_reduce_scatters(traced):
    comm = traced["zero3"]["comm"]
    assert _sum(comm, "all_gather") == FP32 * PSI  # once per step: kept from forward through backward
    assert _sum(comm, "reduce_scatter") == FP32 * PSI
    assert comm["textbook_ratio"] == pytest.approx(2 / 3, rel=1e-3)


@pytest.mark.slow
def test_fsdp_gathers_units_twice_and_the_root_once(traced):
    """FSDP2 through Accelerate: each decoder layer and the LM head are units gathered in forward and again
    in backward; the root's own parameters (embeddings, final norm) are not resharded after forward."""
    comm = traced["fsdp"]["comm"]
    assert _sum(comm, "all_gather") == FP32 * (2 * (2 * LAYER + HEAD) + EMBED + NORM)
    assert _sum(comm, "reduce_scatter") == FP32 * PSI  # the gradients, once
    assert set(comm["bytes_per_step"]) == {"all_gather", "reduce_scatter"}


@pytest.mark.slow
def test_world_size_one_says_no_collective_ran(tmp_path):
    with ResultWriter(tmp_path / "one.jsonl") as w:
        (rec,) = launch.run(_config(tmp_path, ["ddp"], nprocs=1, precision="bf16"), w)
    assert rec["status"] == "ok", rec["message"]
    assert (rec["precision"], rec["mixed_precision"]) == ("bf16", "bf16")
    comm = rec["comm"]
    assert (comm["source"], comm["collectives"], comm["total_bytes_per_step"]) == ("none", [], 0)
    assert comm["note"].startswith("world size 1: no collective ran between ranks")
    assert comm["textbook_ratio"] is None and comm["wire_ratio"] is None


# --- the arithmetic, on synthetic profiler events -------------------------------------------------------

MAIN, GLOO_T = 1, 7


def _ev(name, ts, dur, tid=MAIN, cat="cpu_op", **args):
    return {"ph": "X", "name": name, "ts": ts, "dur": dur, "tid": tid, "cat": cat, "args": args}


def _steps(*windows):
    return [_ev(trace.STEP_MARK, a, b - a, cat="user_annotation") for a, b in windows]


def test_calls_gloo_forms():
    events = _steps((0, 1000), (1000, 2000)) + [
        # a tensor-list all-reduce: no dtype on the op; gloo's event (same shape, later) names it
        _ev("c10d::allreduce_", 10, 5, **{"Input Dims": [[[300]], [], []], "Input type": ["TensorList", "", ""]}),
        _ev("gloo:all_reduce", 20, 50, tid=GLOO_T, **{"Input Dims": [[300]], "Input type": ["c10::BFloat16"]}),
        # all-gather into a tensor: S = the output (arg 0)
        _ev("c10d::_allgather_base_", 100, 5, **{"Input Dims": [[64], [32], []], "Input type": ["float", "float", ""]}),
        # reduce-scatter: S = the input (arg 1), even though gloo runs it as an all-reduce
        _ev("c10d::_reduce_scatter_base_", 200, 5, **{"Input Dims": [[32], [64]], "Input type": ["float", "float"]}),
        _ev("gloo:all_reduce", 210, 50, tid=GLOO_T, **{"Input Dims": [[64]], "Input type": ["float"]}),
        # list all-gather: S = the per-rank input x group size
        _ev("c10d::allgather_", 1100, 5, **{"Input Dims": [[], [[10]], []], "Input type": ["", "TensorList", ""]}),
        _ev("gloo:all_gather", 1110, 5, tid=GLOO_T, **{"Input Dims": [[10]], "Input type": ["double"]}),
        # a functional op that dispatches to a c10d op: counted once (the outer one)
        _ev("_c10d_functional::all_reduce", 1200, 50, **{"Input Dims": [[8]], "Input type": ["float"]}),
        _ev("c10d::allreduce_", 1210, 5, **{"Input Dims": [[[8]]], "Input type": ["TensorList"]}),
        # a functional all-gather names its group size (arg 1): S = input x that size
        _ev("_c10d_functional::all_gather_into_tensor", 1400, 5, **{"Input Dims": [[6], [], []],
            "Input type": ["float", "Scalar", "String"], "Concrete Inputs": ["", "4", "0"]}),
        # outside every step window: not counted
        _ev("c10d::allreduce_", 5000, 5, **{"Input Dims": [[[999]]], "Input type": ["TensorList"]}),
        _ev("c10d::barrier", 1300, 5),
    ]
    found, problems = matching.calls(events, world_size=2)
    assert problems == []
    assert found == [matching.Call("all_reduce", 600, "bfloat16", 2), matching.Call("all_gather", 256, "float32", 2),
                     matching.Call("reduce_scatter", 256, "float32", 2), matching.Call("all_gather", 160, "float64", 2),
                     matching.Call("all_reduce", 32, "float32", 2), matching.Call("all_gather", 96, "float32", 4)]
    rows = trace.per_step(found + found[:1], steps=2)
    assert rows[0] == {"op": "all_gather", "bytes": 256, "dtype": "float32", "group_size": 2, "calls_per_step": 0.5}
    assert {"op": "all_reduce", "bytes": 600, "dtype": "bfloat16", "group_size": 2, "calls_per_step": 1.0} in rows


def test_calls_nccl_form_takes_group_size_from_record_param_comms():
    events = _steps((0, 100)) + [
        _ev("c10d::allreduce_", 10, 20, **{"Input Dims": [[[1024]]], "Input type": ["TensorList"]}),
        _ev("record_param_comms", 12, 5, **{"Collective name": "allreduce", "dtype": "BFloat16", "Group size": 4,
                                             "In msg nelems": 1024, "Out msg nelems": 1024}),
        _ev("c10d::allgather_", 40, 20, **{"Input Dims": [[], [[100]]], "Input type": ["", "TensorList"]}),
        _ev("record_param_comms", 45, 5, **{"Collective name": "allgather", "dtype": "Float", "Group size": 8}),
    ]
    found, problems = matching.calls(events, world_size=8)
    assert problems == []
    assert found == [matching.Call("all_reduce", 2048, "bfloat16", 4), matching.Call("all_gather", 3200, "float32", 8)]


def test_calls_without_a_dtype_are_reported_not_guessed():
    events = _steps((0, 100)) + [_ev("c10d::allreduce_", 10, 5, **{"Input Dims": [[[4]]], "Input type": ["TensorList"]})]
    found, problems = matching.calls(events, world_size=2)
    assert found == [] and len(problems) == 1 and problems[0].startswith("c10d::allreduce_: no dtype")


def test_timeline_exposed_is_comm_outside_compute():
    # step 0..100 us: compute 0-40 and 60-80 on the step's thread; comm 30-70 on gloo's thread
    # -> comm 40, of which 30-40 and 60-70 overlap compute: exposed 20; compute 60
    events = _steps((0, 100)) + [_ev("aten::mm", 0, 40), _ev("aten::add", 60, 20), _ev("aten::mul", 10, 5),
                                 _ev("aten::mm", 10, 50, tid=GLOO_T),  # another thread's op is not the step's compute
                                 _ev("gloo:all_reduce", 30, 40, tid=GLOO_T, cat="user_annotation")]
    tl = trace.timeline(events, device_type="cpu")
    # pytest.approx compares flat mappings only (pytest 9 refuses a list inside a dict): the gaps apart
    assert tl.pop("idle_gaps_s") == pytest.approx([60e-6])  # 30 us head + 30 us tail
    assert tl == pytest.approx({"comm_s": 40e-6, "exposed_s": 20e-6, "compute_s": 60e-6, "step_s": 100e-6,
                                "source": "cpu threads", "window_s": 0.0,  # one collective: no window
                                "idle_gap_steps": 1})
    gpu = _steps((0, 100)) + [_ev("sm90_gemm", 0, 50, tid=0, cat="kernel"),
                              _ev("ncclDevKernel_AllReduce_Sum_bf16", 40, 30, tid=0, cat="kernel")]
    tl = trace.timeline(gpu, device_type="cuda")
    assert tl.pop("idle_gaps_s") == pytest.approx([70e-6])
    assert tl == pytest.approx(
        {"comm_s": 30e-6, "exposed_s": 20e-6, "compute_s": 50e-6, "step_s": 100e-6, "source": "cuda kernels",
         "busy_s": 70e-6, "window_s": 0.0, "idle_gap_steps": 1})  # any kernel 0-70 us of the 100 us step: the GPU-busy fraction 0.7


def test_idle_gaps_wrap_the_step_and_separate_busy_stretches():
    # step 0..100: busy 10-20, 20-30 (one stretch once merged by the caller) and 50-60: head 10 + tail 40
    assert timeline.idle_gaps([(10, 30), (50, 60)], 0, 100) == [50, 20]
    assert timeline.idle_gaps([], 0, 100) == []
    events = _steps((0, 100), (100, 200)) + [
        _ev("gloo:all_gather", 10, 10, tid=GLOO_T, cat="user_annotation"),
        _ev("gloo:all_gather", 50, 10, tid=GLOO_T, cat="user_annotation"),
        _ev("gloo:all_gather", 130, 20, tid=GLOO_T, cat="user_annotation")]
    tl = trace.timeline(events, device_type="cpu")
    assert tl["idle_gaps_s"] == pytest.approx([50e-6, 30e-6, 80e-6]) and tl["idle_gap_steps"] == 2


def _rank(collectives, times=(0.2, 0.3), timeline=None):
    return {"collectives": collectives, "problems": [], "profiled_steps": len(times),
            "profiled_step_times_s": list(times), "timeline": timeline, "group_sizes": [2]}


def test_join_totals_ratios_and_world_one():
    rows = [{"op": "all_reduce", "bytes": 400, "dtype": "float32", "group_size": 2, "calls_per_step": 2.0},
            {"op": "all_gather", "bytes": 100, "dtype": "float32", "group_size": 2, "calls_per_step": 1.0}]
    tl = {"comm_s": 0.1, "exposed_s": 0.05, "compute_s": 0.2, "step_s": 0.3, "source": "cpu threads"}
    comm = trace.join([_rank(rows, timeline=tl), _rank(rows, (0.25, 0.1), timeline=tl)], backend="gloo",
                      world_size=2, sends={"reduce_scatter": 1, "all_gather": 1}, psi=100, precision="fp32",
                      timed_step_s=0.2)
    assert comm["bytes_per_step"] == {"all_reduce": 800, "all_gather": 100} and comm["total_bytes_per_step"] == 900
    assert (comm["textbook_bytes_per_step"], comm["textbook_ratio"]) == (800, 900 / 800)
    assert comm["textbook_by_op"] == {"reduce_scatter": 400, "all_gather": 400}
    # wire bytes per rank at n = 2: all-reduce 800 x 1 + all-gather 100 x 0.5 against 400 x 0.5 + 400 x 0.5
    assert comm["wire_ratio"] == pytest.approx(850 / 400)
    assert comm["overhead"] == pytest.approx({"profiled_step_s": 0.275, "timed_step_s": 0.2, "ratio": 1.375})
    assert comm["timeline"]["exposed_fraction"] == pytest.approx(0.5)
    one = trace.join([_rank([dict(rows[0], group_size=1)])], backend="nccl", world_size=1, sends={"all_reduce": 1},
                     psi=100, precision="bf16", timed_step_s=0.2)
    assert (one["source"], one["collectives"], one["textbook_ratio"]) == ("none", [], None)
    assert one["note"] == ("world size 1: no collective ran between ranks (2 call(s) per step on a group of one "
                           "rank, which move nothing)")
    failed = trace.join([{"error": "ValueError: bad"}], backend="gloo", world_size=2, sends={}, psi=1,
                        precision="fp32", timed_step_s=1.0)
    assert failed["timeline"] is None and failed["note"] == "trace failed: ValueError: bad"


def test_precision_is_checked_and_defaults_by_device(tmp_path):
    with pytest.raises(ValueError, match="--precision fp8: choose bf16, fp16 or fp32"):
        _config(tmp_path, ["ddp"], precision="fp8")
    with pytest.raises(ValueError, match="--trace-steps -1"):
        _config(tmp_path, ["ddp"], trace_steps=-1)
    assert _config(tmp_path, ["ddp"]).run_precision == "fp32"
    assert launch.TrainConfig(strategies=["ddp"], model="tiny-mistral", gpus=(0,)).run_precision == "bf16"
    with pytest.raises(ValueError, match="DeepSpeed's CPU accelerator has no fp16 \\(zero1, zero3\\)"):
        _config(tmp_path, ["ddp", "zero1", "zero3"], precision="fp16")


def test_rank_file_says_running_after_every_step(tmp_path):
    """The worker rewrites its rank file whole after every step ("running", the steps so far), then once with
    the final status: what the launcher keeps of a rank that dies. One process, no torchrun."""
    config = launch.TrainConfig(strategies=["ddp"], model="tiny-mistral", device="cpu", nprocs=1, steps=3,
                                warmup_steps=1, batch_size=1, seq_len=8, lr=1e-3, trace_steps=1, target_ci=None)
    RankSpec.of(config, "ddp", run_dir=tmp_path, fabric="default", fault=None,
                local_devices=None).write(tmp_path / "spec.json")
    code = ("import json, sys\nfrom pathlib import Path\nfrom fabricbench.training import worker\n"
            "from fabricbench.training.spec import RankSpec\n"
            "seen = []\nreal = worker._write_atomic\n"
            "def spy(path, doc):\n    real(path, doc)\n    seen.append(json.loads(Path(path).read_text()))\n"
            "worker._write_atomic = spy\n"
            f"rc = worker.run(RankSpec.read({str(tmp_path / 'spec.json')!r}), Path({str(tmp_path)!r}) / 'rank-0.json')\n"
            "print(json.dumps([rc, [(d['status'], len(d.get('step_times_s', []))) for d in seen]]))\n")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    rc, seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert rc == 0
    assert seen == [["running", 1], ["running", 2], ["running", 3], ["ok", 3]]
    final = json.loads((tmp_path / "rank-0.json").read_text())
    assert final["comm"]["profiled_steps"] == 1 and not list(tmp_path.glob("*.tmp"))


def test_calls_carry_the_backends_interval_and_join_takes_the_shortest_over_ranks():
    """comm.calls (training/calltimes.py): per call its gloo worker event's interval, or its NCCL kernel's;
    the join's dur_min_s is the shortest over the ranks (the last rank to arrive waits for no one)."""
    gloo = _steps((0, 1000), (1000, 2000)) + [
        _ev("c10d::_allgather_base_", 10, 5, **{"Input Dims": [[64], [32]], "Input type": ["float", "float"]}),
        _ev("gloo:all_gather", 30, 200, tid=GLOO_T, **{"Input Dims": [[32]], "Input type": ["float"]}),
        _ev("c10d::_reduce_scatter_base_", 100, 5, **{"Input Dims": [[32], [64]], "Input type": ["float", "float"]}),
        _ev("gloo:all_reduce", 150, 300, tid=GLOO_T + 1, **{"Input Dims": [[64]], "Input type": ["float"]}),
        _ev("c10d::_allgather_base_", 1010, 5, **{"Input Dims": [[64], [32]], "Input type": ["float", "float"]}),
        _ev("gloo:all_gather", 1020, 100, tid=GLOO_T, **{"Input Dims": [[32]], "Input type": ["float"]})]
    found, problems = matching.matched(gloo, world_size=2)
    assert problems == [] and [(m.step, m.span) for m in found] == [(0, (30, 230)), (0, (150, 450)), (1, (1020, 1120))]
    rows = trace.calltimes.rank_rows(found, trace.step_windows(gloo))
    assert rows[1] == [0, "reduce_scatter", 256, "float32", 2, pytest.approx(150e-6), pytest.approx(300e-6)]
    late = [r[:6] + [r[6] / 2] for r in rows]  # the other rank joined late: half as long each
    joined = trace.calltimes.join([rows, late])
    assert [r[-1] for r in joined["rows"]] == pytest.approx([100e-6, 150e-6, 50e-6])
    assert trace.calltimes.as_dicts(joined)[2]["dur_min_s"] == pytest.approx(50e-6)
    assert trace.calltimes.join([rows, None]) is None
    nccl = _steps((0, 100)) + [
        _ev("c10d::allreduce_", 10, 20, **{"Input Dims": [[[1024]]], "Input type": ["TensorList"]}),
        _ev("record_param_comms", 12, 5, **{"Collective name": "allreduce", "dtype": "BFloat16", "Group size": 2}),
        _ev("c10d::allgather_", 40, 20, **{"Input Dims": [[], [[100]]], "Input type": ["", "TensorList"]}),
        _ev("record_param_comms", 45, 5, **{"Collective name": "allgather", "dtype": "Float", "Group size": 2}),
        _ev("ncclDevKernel_AllGather_RING_LL", 50, 30, tid=7, cat="kernel"),
        _ev("ncclDevKernel_AllReduce_Sum_bf16", 20, 25, tid=7, cat="kernel")]
    found, _ = matching.matched(nccl, world_size=2)
    assert [m.span for m in found] == [(20, 45), (50, 80)]


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_paused_for_the_trace_and_left_as_it_was(enabled):
    """The trace's read and summary run with the cyclic collector off; after them it is as it was before,
    also when the block raised."""
    import gc

    (gc.enable if enabled else gc.disable)()
    try:
        with trace.collector_paused():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        with pytest.raises(ValueError):
            with trace.collector_paused():
                raise ValueError("a trace that cannot be read")
        assert gc.isenabled() is enabled
    finally:
        gc.enable()
