"""Tier 2 (one GPU) of the native engine: exact results for every op x dtype x placement x size, graph
mode, the time-out path and argument errors.

    python -m pytest tests/gpu/test_native_gpu.py -q        (on a machine with a CUDA GPU)
"""

from __future__ import annotations

import importlib
import random
import statistics
import time

import pytest

from fabricbench import errors
from fabricbench.collectives import COLLECTIVES
from fabricbench.dtypes import elem_size
from fabricbench.measuring.config import SweepConfig
from fabricbench.measuring.engines.native import open_session
from fabricbench.measuring.nccl_lib import resolve_nccl_library
from fabricbench.measuring.session import Case

pytestmark = pytest.mark.gpu(1)

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
DTYPES = ("float32", "bfloat16", "float16")
SIZES = (8, 1 << 20, 1 << 30)
MATRIX = [(op, dt, size, inplace) for op in OPS for dt in DTYPES for size in SIZES for inplace in (False, True)
          if not (inplace and not COLLECTIVES.get(op).supports_inplace)]


@pytest.fixture(scope="module")
def engine():
    return importlib.import_module("fabricbench._engine")


@pytest.fixture(scope="module")
def nccl_path():
    return resolve_nccl_library(None)


@pytest.fixture(scope="module")
def comm(engine, nccl_path):
    c = engine.Communicator.single_process(nccl_path, [0], 60.0)
    yield c
    c.close()


def nccl_count(op: str, dtype: str, size: int, nranks: int) -> int:
    return COLLECTIVES.get(op).size(size, elem_size(dtype), nranks).nccl_count


@pytest.mark.parametrize("op, dtype, size, inplace", MATRIX)
def test_exact_results(comm, op, dtype, size, inplace):
    out = comm.run(op, dtype, nccl_count(op, dtype, size, comm.nranks), inplace=inplace, warmup=1, iters=3,
                   check=True, seed=random.getrandbits(32), timeout_s=60.0)
    assert out["wrong"] == 0
    assert len(out["times_us"]) == 3 and all(t > 0 for t in out["times_us"])
    assert 1 <= out["rotate"] <= 16
    assert out["rotate"] == (16 if size == 8 else 1 if size == 1 << 30 else out["rotate"])


def test_8gib_all_reduce(comm):
    count = nccl_count("all_reduce", "float32", 8 << 30, 1)
    out = comm.run("all_reduce", "float32", count, warmup=1, iters=3, check=True, seed=random.getrandbits(32),
                   timeout_s=120.0)
    assert out["wrong"] == 0 and out["rotate"] == 1


def test_unchecked_run_reports_none(comm):
    assert comm.run("all_reduce", "float32", 2, iters=2)["wrong"] is None


def test_more_iterations_than_one_chunk(comm):
    out = comm.run("all_reduce", "float32", 2, warmup=2, iters=450)
    assert len(out["times_us"]) == 450 and min(out["times_us"]) > 0


def test_graph_mode_is_faster_per_iteration_at_8_bytes(comm):
    eager = comm.run("all_reduce", "float32", 2, warmup=20, iters=200)["times_us"]
    graph = comm.run("all_reduce", "float32", 2, warmup=5, iters=20, graph=True, graph_iters=100,
                     check=True, seed=7)
    assert graph["wrong"] == 0 and len(graph["times_us"]) == 20
    assert min(graph["times_us"]) > 0
    assert statistics.median(graph["times_us"]) < statistics.median(eager)


@pytest.mark.parametrize("op", ("all_reduce", "all_gather", "reduce_scatter"))
@pytest.mark.parametrize("graph", (False, True))
@pytest.mark.parametrize("buffers, timing, alloc", [("reuse", "events", "cuda"), ("reuse", "loop", "nccl"),
                                                   ("rotate", "loop", "cuda"), ("rotate", "events", "nccl")])
def test_buffer_and_timing_modes_are_exact(comm, op, graph, buffers, timing, alloc):
    count = nccl_count(op, "float32", 1 << 20, 1)
    out = comm.run(op, "float32", count, warmup=2, iters=10, graph=graph, graph_iters=20, check=True,
                   seed=random.getrandbits(32), timeout_s=60.0, buffers=buffers, timing=timing, alloc=alloc)
    assert out["wrong"] == 0
    assert out["rotate"] == (1 if buffers == "reuse" else 16)  # 1 MiB sets: 16 span less than 2x L2
    # events: one time per timed iteration (replay); loop: one host-timed figure for the whole loop
    assert len(out["times_us"]) == (10 if timing == "events" else 1) and min(out["times_us"]) > 0


@pytest.mark.parametrize("graph", (False, True))
def test_loops_give_one_time_each_on_the_same_buffers(comm, graph):
    out = comm.run("all_gather", "float32", 1 << 18, warmup=2, iters=10, graph=graph, graph_iters=10, check=True,
                   seed=random.getrandbits(32), timing="loop", buffers="reuse", alloc="nccl", loops=4)
    assert out["wrong"] == 0 and len(out["times_us"]) == 4 and min(out["times_us"]) > 0
    with pytest.raises(ValueError, match="loops >= 1"):
        comm.run("all_reduce", "float32", 16, timing="loop", loops=0)


def test_reuse_keeps_a_small_copy_in_l2(comm):
    """4 MiB out-of-place (8 MiB read + written) fits the L2: reused it runs faster than rotated through
    sets spanning ~2x the L2, in graph mode where launch cost is out of the way."""
    count = (4 << 20) // 4
    t = {b: statistics.median(comm.run("all_reduce", "float32", count, warmup=5, iters=20, graph=True,
                                       graph_iters=50, buffers=b)["times_us"]) for b in ("rotate", "reuse")}
    assert t["reuse"] < t["rotate"], t


def test_loop_timing_includes_launch_cost_at_8_bytes(comm):
    """nccl-tests' method at 8 B measures the host's launch rate: above the device time that events read."""
    events = statistics.median(comm.run("all_reduce", "float32", 2, warmup=20, iters=200)["times_us"])
    [loop] = comm.run("all_reduce", "float32", 2, warmup=20, iters=200, timing="loop")["times_us"]
    assert loop > 0 and events > 0
    [graph_loop] = comm.run("all_reduce", "float32", 2, warmup=5, iters=20, graph=True, graph_iters=100,
                            timing="loop")["times_us"]
    assert graph_loop < loop  # replays of a captured graph skip the per-call launch


@pytest.mark.parametrize("kwargs, message", [
    ({"buffers": "same"}, "buffers 'same': choose rotate or reuse"),
    ({"timing": "host"}, "timing 'host': choose events or loop"),
    ({"alloc": "vmm"}, "alloc 'vmm': choose cuda or nccl"),
])
def test_mode_argument_errors(comm, kwargs, message):
    with pytest.raises(ValueError, match=message):
        comm.run("all_reduce", "float32", 16, **kwargs)


def test_session_records_the_modes(engine):
    session = open_session(SweepConfig(gpus=(0,), timeout_s=60.0, timing="loop", alloc="nccl"), None)
    try:
        assert "nccl-tests" in session.info["timing_rule"]
        sizing = COLLECTIVES.get("all_reduce").size(1 << 20, 4, 1)
        case = Case(op="all_reduce", dtype="float32", requested_bytes=1 << 20, bytes=sizing.bytes,
                    count=sizing.count, nccl_count=sizing.nccl_count, send_bytes=sizing.send_bytes,
                    recv_bytes=sizing.recv_bytes, inplace=False, graph=False, check=True, warmup=1, iters=8,
                    seed=random.getrandbits(32), buffers="reuse", timing="loop", alloc="nccl")
        timing = session.measure(case)
        assert timing.wrong == 0 and len(timing.times_us) == 1
        assert timing.extra == {"buffers": "reuse", "rotate": 1, "timing": "loop", "alloc": "nccl"}
    finally:
        session.close()


@pytest.mark.parametrize("kwargs, message", [
    ({"op": "all_reducee", "dtype": "float32"}, "unknown op 'all_reducee'; choose from all_reduce"),
    ({"op": "all_reduce", "dtype": "float8"}, "unknown dtype 'float8'; choose from float32"),
    ({"op": "all_to_all", "dtype": "float32", "inplace": True}, "all_to_all has no in-place form"),
])
def test_argument_errors(comm, kwargs, message):
    with pytest.raises(ValueError, match=message):
        comm.run(count=16, **kwargs)


def test_missing_peer_times_out_and_aborts(engine, nccl_path):
    uid = engine.unique_id(nccl_path)
    assert isinstance(uid, bytes) and len(uid) == 128
    start = time.monotonic()
    with pytest.raises(errors.CollectiveTimeout, match=r"rank 0 of 2 .* did not finish within 3 s; communicator aborted"):
        engine.Communicator.per_rank(nccl_path, 0, 0, 2, uid, 3.0)
    assert 3.0 <= time.monotonic() - start < 10.0


def test_aborted_communicator_refuses_work(engine, nccl_path):
    c = engine.Communicator.single_process(nccl_path, [0], 60.0)
    c.abort()
    with pytest.raises(errors.FabricbenchError, match="aborted"):
        c.run("all_reduce", "float32", 2)


def test_bad_device_list(engine, nccl_path):
    with pytest.raises(ValueError, match="is not visible"):
        engine.Communicator.single_process(nccl_path, [999], 10.0)


def test_session_layer(engine):
    session = open_session(SweepConfig(gpus=(0,), timeout_s=60.0), None)
    try:
        assert session.nranks == 1
        assert session.info["nccl_version"].count(".") == 2 and session.info["gpu_names"]
        assert session.info["timing_rule"] == "slowest GPU per iteration"
        sizing = COLLECTIVES.get("all_gather").size(1 << 20, 2, 1)
        case = Case(op="all_gather", dtype="bfloat16", requested_bytes=1 << 20, bytes=sizing.bytes,
                    count=sizing.count, nccl_count=sizing.nccl_count, send_bytes=sizing.send_bytes,
                    recv_bytes=sizing.recv_bytes, inplace=False, graph=False, check=True, warmup=1, iters=4,
                    seed=random.getrandbits(32))
        timing = session.measure(case)
        assert timing.wrong == 0 and len(timing.times_us) == 4 and timing.extra["rotate"] >= 1
        assert 0 < session.free_bytes() <= engine.devices([0])[0]["total_bytes"]
    finally:
        session.close()


def test_copies(engine):
    peer = engine.copy_peer(0, 0, 64 << 20, 2, 5, False)
    assert len(peer["times_us"]) == 5 and min(peer["times_us"]) > 0 and peer["peer_access"] is False
    for direction in ("h2d", "d2h", "bidir"):
        host = engine.copy_host(0, 64 << 20, 2, 5, direction)
        assert len(host["times_us"]) == 5 and min(host["times_us"]) > 0
    with pytest.raises(ValueError, match="direction must be"):
        engine.copy_host(0, 1024, 0, 1, "sideways")


def test_devices_report(engine):
    (d,) = engine.devices([0])
    assert d["uuid"].startswith("GPU-") and d["cc"].count(".") == 1 and d["l2_bytes"] > 0
    assert 0 < d["free_bytes"] <= d["total_bytes"]


CTRL_C = """
import os, signal, sys, threading, time
import fabricbench._engine as e
from fabricbench.measuring.nccl_lib import resolve_nccl_library
path = resolve_nccl_library(None)
uid = e.unique_id(path)
threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
start = time.monotonic()
try:
    e.Communicator.per_rank(path, 0, 0, 2, uid, 60.0)
except KeyboardInterrupt:
    print(f"interrupted after {time.monotonic() - start:.1f} s")
    sys.exit(0)
sys.exit(1)
"""


def test_ctrl_c_interrupts_a_wait():
    import subprocess
    import sys

    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", CTRL_C], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "interrupted after" in done.stdout
    assert time.monotonic() - start < 30
