"""The native engine: fabricbench's compiled core (fabricbench._engine) driving NCCL directly.

    fabricbench sweep --engine native --gpus 0,2,5 --ops all_reduce --sizes 8-8G --check

One process drives any list of GPUs through one NCCL clique, or, under torchrun / --nprocs, each
process is one rank on its own GPU. Times come from CUDA events per iteration behind a blocking kernel;
per iteration the slowest GPU counts (see csrc/timing.hpp). With --timing loop they come instead from a
host clock around the whole loop of launches (nccl-tests' method), one value per loop. --buffers says
whether iterations cycle through buffer sets spanning ~2x the L2 (rotate) or reuse one set, --alloc
whether they come from cudaMalloc or ncclMemAlloc. The extension is imported lazily, so
`import fabricbench` works without it.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
from typing import Any

from fabricbench.errors import EngineUnavailable
from fabricbench.measuring.config import SweepConfig
from fabricbench.measuring.nccl_lib import resolve_nccl_library
from fabricbench.measuring.session import Case, DistContext, Timing

NOT_BUILT = ("the native engine was not built (no CUDA toolkit at install time); install the CUDA toolkit "
             "and reinstall with `pip install -e .`, or use --engine torch")
NO_GPU = "no CUDA GPU visible to the native engine; run with --engine torch --backend gloo --nprocs 2 on CPU"
UID_KEY = "fabricbench/nccl_uid"
TIMING_RULE = "slowest GPU per iteration"
LOOP_RULE = "host clock around the loop / iterations (nccl-tests' method); slowest rank"


def _engine() -> Any:
    if importlib.util.find_spec("fabricbench._engine") is None:
        raise EngineUnavailable(NOT_BUILT)
    return importlib.import_module("fabricbench._engine")


def _cuda_version(code: int) -> str:
    """13000 -> '13.0', 12040 -> '12.4' (CUDA's encoding: 1000*major + 10*minor)."""
    return f"{code // 1000}.{(code % 1000) // 10}" if code else "none"


class NativeSession:
    def __init__(self, engine: Any, comm: Any, nccl: dict, runtime: dict, dist: DistContext | None,
                 timeout_s: float, timing: str = "events") -> None:
        self._engine = engine
        self._timeout_s = timeout_s  # per wait; a collective past it aborts the communicator
        self._comm = comm
        self._dist = dist
        self._barriers = itertools.count()
        self.nranks: int = comm.nranks
        gpus = engine.devices(list(comm.devices))
        self.info: dict[str, Any] = {
            "engine": "native",
            "nccl_version": nccl["version_str"],
            "nccl_library": nccl["path"],
            "cuda_driver": _cuda_version(runtime["driver_version"]),
            "cuda_runtime": _cuda_version(runtime["runtime_version"]),
            "gpu_names": [g["name"] for g in gpus],
            "gpu_uuids": [g["uuid"] for g in gpus],
            "devices": list(comm.devices),
            "timing_rule": TIMING_RULE if timing == "events" else LOOP_RULE,
        }

    def _barrier(self) -> None:
        assert self._dist is not None
        self._dist.barrier(f"fabricbench/native/{next(self._barriers)}")

    def measure(self, case: Case) -> Timing:
        out = self._comm.run(
            case.op, case.dtype, case.nccl_count, inplace=case.inplace, warmup=case.warmup, iters=case.iters,
            graph=case.graph, graph_iters=case.graph_iters, check=case.check, seed=case.seed,
            timeout_s=self._timeout_s, barrier=self._barrier if self._dist is not None else None,
            buffers=case.buffers, timing=case.timing, alloc=case.alloc, loops=case.loops)
        extra = {"buffers": case.buffers, "rotate": out["rotate"], "timing": case.timing, "alloc": case.alloc}
        return Timing(times_us=list(out["times_us"]), wrong=out["wrong"], extra=extra)

    def free_bytes(self) -> int | None:
        return min(g["free_bytes"] for g in self._engine.devices(list(self._comm.devices)))

    def host_ranks(self) -> int | None:
        return None  # GPU buffers: each device's own free memory decides

    def close(self) -> None:
        self._comm.close()


def open_session(config: SweepConfig, dist: DistContext | None = None) -> NativeSession:
    engine = _engine()
    runtime = engine.runtime_info()
    visible = runtime["device_count"]
    if visible == 0:
        raise EngineUnavailable(NO_GPU)
    nccl = engine.load_nccl(resolve_nccl_library(config.nccl_lib))
    if dist is None:
        gpus = list(config.gpus) if config.gpus is not None else list(range(visible))
        comm = engine.Communicator.single_process(nccl["path"], gpus, config.timeout_s)
    else:
        device = dist.gpu(list(config.gpus) if config.gpus else list(range(visible)))
        if dist.rank == 0:
            dist.store.set(UID_KEY, engine.unique_id(nccl["path"]))
        uid = bytes(dist.store.get(UID_KEY))
        comm = engine.Communicator.per_rank(nccl["path"], device, dist.rank, dist.world_size, uid, config.timeout_s)
    return NativeSession(engine, comm, nccl, runtime, dist, config.timeout_s, config.timing)
