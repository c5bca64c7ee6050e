"""SweepConfig: everything a sweep needs, validated once, up front.

    fabricbench sweep --gpus 0,2 --ops all_reduce --sizes 1M-1G:x2 --dtype bfloat16 --iters 50

The click layer (fabricbench/cli/sweep.py) only maps flags onto these fields; library users build the
dataclass directly (fabricbench.sweep(...) does it for them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fabricbench.sizes import SizeSweep


@dataclass(frozen=True, kw_only=True)
class SweepConfig:
    gpus: tuple[int, ...] | None = None  # CUDA device ordinals driven by one process; None = all visible
    ops: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter")  # keys of COLLECTIVES
    sizes: SizeSweep = field(default_factory=lambda: SizeSweep.parse("8-8G:x4"))  # S per measurement
    dtype: str = "float32"  # key of fabricbench.dtypes.DTYPES
    iters: int = 20  # timed iterations per size (graph mode: timed replays)
    warmup: int = 5  # untimed iterations per size, after the communicator's own warm-up
    adaptive: float | None = None  # iterate until the median's 95% CI half-width <= this fraction of it
    max_iters: int = 1000  # cap on iterations in the adaptive mode
    inplace: str = "out-of-place"  # "out-of-place", "inplace" or "both"
    graph: bool = False  # time CUDA-graph replays of graph_iters iterations (small-message latency)
    graph_iters: int = 100  # iterations captured in one graph
    check: bool = False  # verify results on exactly known inputs; a wrong element fails the sweep
    engine: str = "native"  # key of ENGINES: "native" (compiled, NCCL) or "torch" (torch.distributed)
    backend: str | None = None  # torch engine: "nccl" or "gloo"; None = nccl with GPUs, else gloo
    nprocs: int | None = None  # start this many local ranks (one process per rank); None = one process
    timeout_s: float = 300.0  # a communicator set-up or a collective that takes longer is aborted
    nccl_lib: str | None = None  # path of libnccl.so.2; None = FABRICBENCH_NCCL_LIBRARY, torch's, system
    fabric: str = "default"  # name of the fabric (environment) this runs under; recorded in every result
    seed: int | None = None  # seed for --check inputs; None = fresh each run

    def modes(self) -> tuple[bool, ...]:
        """The in-place settings to run, out-of-place first (nccl-tests' column order)."""
        return {"out-of-place": (False,), "inplace": (True,), "both": (False, True)}[self.inplace]
