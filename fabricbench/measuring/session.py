"""The contract between the sweep runner and an engine: a Session times one Case at a time.

    fabricbench sweep --engine native --gpus 0-7      (one process drives all GPUs)
    torchrun --nproc-per-node 8 -m fabricbench sweep  (one rank per process; each opens its own Session)

An engine module (fabricbench/measuring/engines/<name>.py) provides `open_session(config, dist)`; the runner
(fabricbench/measuring/runner.py) turns each Timing into a Result with the shared statistics and the
bandwidth formulas of fabricbench/collectives. Engines never compute bandwidth themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from fabricbench.errors import CollectiveTimeout


@dataclass(frozen=True, kw_only=True)
class Case:
    """One measurement: an op at one size, dtype and placement mode, fully resolved."""

    op: str  # key in fabricbench.collectives.COLLECTIVES
    dtype: str  # key in fabricbench.dtypes.DTYPES
    requested_bytes: int  # the size the sweep asked for
    bytes: int  # S after rounding (Collective.size)
    count: int  # S / element size
    nccl_count: int  # count argument of the NCCL call
    send_bytes: int  # per-rank send buffer
    recv_bytes: int  # per-rank receive buffer
    inplace: bool
    graph: bool  # capture `graph_iters` iterations in a CUDA graph, time replays
    check: bool  # verify the result against exactly known values
    warmup: int  # untimed iterations first
    iters: int  # timed iterations (or replays in graph mode); the adaptive mode may ask for more
    graph_iters: int = 100  # iterations per graph replay
    seed: int = 0  # seed of the --check inputs (fresh each run)
    buffers: str = "rotate"  # "rotate" (sets spanning ~2x L2, cycled) or "reuse" (one set): SweepConfig.buffers
    timing: str = "events"  # "events" (one time per iteration) or "loop" (one host-timed loop): SweepConfig.timing
    alloc: str = "cuda"  # "cuda" (cudaMalloc) or "nccl" (ncclMemAlloc): SweepConfig.alloc
    loops: int = 1  # timing "loop": timed loops of `iters` on the same buffers, one time each (native engine)
    gap_s: float = 0.0  # idle seconds before each timed call, every rank idle (SweepConfig.gap_s; torch engine)


@dataclass(kw_only=True)
class Timing:
    """What an engine returns for one Case on this process."""

    times_us: list[float]  # one per timed iteration: the slowest GPU of this process for that iteration
    #                        (timing "loop": one per timed loop, its host time / iterations)
    wrong: int | None = None  # elements that differ from the exact result; None when not checked
    extra: dict[str, Any] = field(default_factory=dict)  # engine notes (e.g. "rotate": 4 buffer sets)


@dataclass(frozen=True, kw_only=True)
class DistContext:
    """This process's place in a multi-process run (torchrun, srun, or `--nprocs N`)."""

    rank: int
    world_size: int
    local_rank: int
    store: Any  # a torch.distributed Store shared by all ranks (ids, barriers, gathering timings)
    timeout_s: float | None = None  # --timeout: a barrier that waits longer raises CollectiveTimeout

    def gpu(self, gpus: Sequence[int]) -> int:
        """The GPU this rank drives: its local rank's entry of `gpus` (--gpus, else every visible GPU),
        wrapping round. Slurm's --gpus-per-task shows each task its own GPU alone (CUDA_VISIBLE_DEVICES=1
        for the node's second task, so its one GPU is index 0) while SLURM_LOCALID still counts the
        node's tasks (1): the local rank itself would name a GPU the task cannot see."""
        return gpus[self.local_rank % len(gpus)]

    def barrier(self, key: str, poll_s: float = 0.0005) -> None:
        """All ranks arrive before any leaves. Uses the store, so it works before any communicator exists;
        `key` must be new for every barrier (callers number them). A rank that never arrives (stopped,
        dead) ends the wait after timeout_s: store.add has no time-out of its own."""
        import time

        self.store.add(f"{key}/arrived", 1)
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        while (arrived := int(self.store.add(f"{key}/arrived", 0))) < self.world_size:
            if deadline is not None and time.monotonic() > deadline:
                raise CollectiveTimeout(f"barrier {key}: {arrived} of {self.world_size} ranks arrived within "
                                        f"--timeout {self.timeout_s:g} s; a rank is stopped, dead or hung")
            time.sleep(poll_s)


class Session(Protocol):
    """A communicator over the chosen GPUs (or gloo ranks), ready to time Cases."""

    nranks: int  # ranks in the communicator (all processes together)
    info: dict[str, Any]  # facts for every record: nccl_version, nccl_library, driver/runtime, gpu_names

    def measure(self, case: Case) -> Timing: ...

    def free_bytes(self) -> int | None:
        """Smallest free device memory over this process's GPUs (for CPU ranks: this rank's share of the
        host's MemAvailable), or None where it does not apply."""
        ...

    def host_ranks(self) -> int | None:
        """For CPU ranks, how many share this host's memory; None for GPU ranks."""
        ...

    def close(self) -> None: ...


OpenSession = Callable[..., Session]  # open_session(config: SweepConfig, dist: DistContext | None)
