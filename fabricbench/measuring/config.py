"""SweepConfig: everything a sweep needs, validated once, up front.

    fabricbench sweep --gpus 0,2 --ops all_reduce --sizes 1M-1G:x2 --dtype bfloat16 --iters 50

The click layer (fabricbench/cli/sweep.py) only maps flags onto these fields; library users build the
dataclass directly and pass it to fabricbench.sweep(config) (compare and scaling take it as the template
of their child sweeps). The type checks itself when built (__post_init__ -> validate), so no path can run
an unchecked config; the message says what to do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import ClassVar

import fabricbench.gpus  # looked up on call: tests stand in for visible_gpu_count
from fabricbench import dtypes
from fabricbench.collectives import COLLECTIVES
from fabricbench.declare import check, declare, shared
from fabricbench.errors import NcclError, UsageError
from fabricbench.jobs.configs import argv_field
from fabricbench.jobs.heartbeat import MIN_STALL_S, STALL_TIMEOUT
from fabricbench.jobs.liveness import DEAD_AFTER_S
from fabricbench.measuring.engines import ENGINES
from fabricbench.measuring.nccl_lib import resolve_nccl_library
from fabricbench.gpus import parse_gpus
from fabricbench.sizes import SizeSweep, format_size, parse_size

PROCS_PER_CORE = 4  # local ranks per CPU core beyond which a sweep only measures the scheduler
MAX_ITERS = 10_000_000  # iterations per size: more would run for days at a microsecond each
BUFFERS = ("rotate", "reuse")  # SweepConfig.buffers
TIMINGS = ("events", "loop")  # SweepConfig.timing
ALLOCS = ("cuda", "nccl")  # SweepConfig.alloc


@dataclass(frozen=True, kw_only=True)
class SweepConfig:
    PROGRAM: ClassVar[tuple[str, ...]] = ("fabricbench", "sweep")  # the child it makes (jobs/configs.py)
    gpus: tuple[int, ...] | None = field(default=None, metadata=declare(  # CUDA device ordinals driven by one
        "--gpus", "GPU list", "GPU list: 0-7, 0,2,5, 0-3,6 (rank order).", default_by="all visible"))  # process
    ops: tuple[str, ...] = field(default=("all_reduce", "all_gather", "reduce_scatter"), metadata=declare(
        "--ops", "op list", "Comma list of collectives (see --list-ops)."))  # keys of COLLECTIVES
    sizes: SizeSweep = field(default_factory=lambda: SizeSweep.parse("8-8G:x4"), metadata=declare(  # S per
        "--sizes", "size list", "8-8G, 1M-1G:x2 (factor) or a list 64K,1M (a bare G is GiB, 2^30 B; GB is "
        "10^9 B)."))  # measurement
    dtype: str = field(default="float32", metadata=declare(  # key of fabricbench.dtypes.DTYPES
        "--dtype", "text", "float32, bfloat16, float16, float64, int32, int8, uint8."))
    iters: int = field(default=20, metadata=declare(  # timed iterations per size (graph mode: timed replays)
        "--iters", "count", "Timed iterations per size (graph mode: replays).", lo=1, hi=MAX_ITERS))
    warmup: int = field(default=5, metadata=declare(  # untimed iterations per size, after the communicator's
        "--warmup", "count", "Untimed iterations per size.", lo=0, hi=MAX_ITERS))  # own warm-up
    adaptive: float | None = field(default=None, metadata=declare(  # iterate until the median's 95% CI
        "--adaptive", "fraction", "Iterate until the median's 95% CI half-width is within this fraction "
        "(e.g. 0.02).", lo_open=True, hi_open=True, default_by="off"))  # half-width <= this fraction of it
    max_iters: int = field(default=1000, metadata=declare(  # cap on iterations in the adaptive mode
        "--max-iters", "count", "Cap on iterations in the adaptive mode.", lo=1, hi=MAX_ITERS))
    inplace: str = field(default="out-of-place", metadata={**argv_field(choice=True), **declare(  # the buffers timed
        "--out-of-place", "flag choice", "Which buffer placements to time: out-of-place, in-place or both.",
        choices=("inplace", "out-of-place", "both"),
        each=("In-place only.", "Out-of-place only.", "Out-of-place and in-place."))})
    graph: bool = field(default=False, metadata=declare(  # time CUDA-graph replays of graph_iters iterations
        "--graph", "flag", "Time CUDA-graph replays (small-message latency)."))
    graph_iters: int = field(default=100, metadata=declare(  # iterations captured in one graph
        "--graph-iters", "count", "Iterations captured in one graph.", lo=1, hi=MAX_ITERS))
    check: bool = field(default=False, metadata=declare(  # verify results on exactly known inputs
        "--check", "flag", "Verify results on exactly known inputs; wrong fails the run."))
    engine: str = field(default="native", metadata=declare(  # key of ENGINES: "native" (compiled, NCCL) or
        "--engine", "choice", "native (compiled, NCCL) or torch (torch.distributed).",
        choices=("native", "torch")))  # "torch" (torch.distributed)
    backend: str | None = field(default=None, metadata=declare(  # torch engine: "nccl" or "gloo"
        "--backend", "choice", "torch engine: nccl or gloo.", choices=("nccl", "gloo"),
        default_by="nccl with GPUs, else gloo"))
    nprocs: int | None = field(default=None, metadata=declare(  # start this many local ranks (one process per
        "--nprocs", "count", "Start N local ranks, one process each.", lo=1, hi=4096, concept="ranks",
        default_by="one process drives every GPU"))  # rank); None = one process
    # keyed=False: a time limit changes no figure, so a unit resumed with more time keeps its key (job_key)
    timeout_s: float = field(default=300.0, metadata={**argv_field(flag="--timeout", keyed=False), **declare(
        "--timeout", "seconds", "Seconds before a hung step is aborted.", unit="s",
        concept="step_timeout_s")})  # a set-up or collective that takes longer is aborted
    stall_timeout_s: float | None = field(default=None, metadata={**argv_field(flag="--stall-timeout", keyed=False),
        **shared(STALL_TIMEOUT, default_by=f"--timeout + {DEAD_AFTER_S:g} for --nprocs ranks, {MIN_STALL_S:g} under "
                 "torchrun/srun")})
    # a rank whose pulse (--nprocs ranks, jobs/channel.py) or store heartbeat (torchrun/srun ranks,
    # jobs/heartbeat.py) stops this long (SIGSTOP, a dead node) ends the run naming it
    nccl_lib: str | None = field(default=None, metadata=declare(  # path of libnccl.so.2
        "--nccl-lib", "input file", "libnccl.so.2 to load.",
        default_by="$FABRICBENCH_NCCL_LIBRARY, torch's, the system's"))
    # name of the fabric (environment) this runs under; recorded in every result; a child gets it by name
    fabric: str = field(default="default", metadata={**argv_field(skip=True, fabric=True), **declare(
        "--fabric", "fabric", "Fabric to measure under: default, p2p-off, net, shaped:RATE or "
        "name:VAR=VAL[,VAR=VAL] (see `fabricbench fabrics`); applied to a fresh child process.")})
    seed: int | None = field(default=None, metadata=declare(  # seed for --check inputs; None = fresh each run
        "--seed", "count", "Seed of the --check inputs.", lo=0, hi=2**63 - 1, default_by="fresh"))
    # Buffer use per iteration: "rotate" cycles through buffer sets that together span ~2x the L2 (no
    # iteration reads a cache the last one warmed); "reuse" runs every iteration on one set (nccl-tests'
    # footprint when it cannot shift, e.g. -b S -e S: a warm L2 below ~L2/2).
    buffers: str = field(default="rotate", metadata=declare(
        "--buffers", "choice", "rotate: cycle buffer sets spanning ~2x the L2 (cold cache); reuse: every "
        "iteration on one set (warm L2 below ~L2/2; nccl-tests' footprint at -b S -e S).", choices=BUFFERS))
    # How time is read: "events" = a CUDA event per iteration behind a blocking kernel (device time, no
    # launch cost); "loop" = a host clock around the whole loop of launches up to the last completion,
    # divided by the count (nccl-tests' method; launch-bound where the host is slower than the GPU).
    timing: str = field(default="events", metadata=declare(
        "--timing", "choice", "events: a CUDA event per iteration behind a blocking kernel (device time); "
        "loop: host clock around the whole loop / count, as nccl-tests (launch cost included).", choices=TIMINGS))
    # Where buffers come from (native engine): "cuda" = cudaMalloc, what PyTorch's caching allocator hands
    # NCCL; "nccl" = ncclMemAlloc (NCCL's cuMem allocator, NCCL >= 2.19), what nccl-tests allocates with.
    alloc: str = field(default="cuda", metadata=declare(
        "--alloc", "choice", "Native engine buffers from cuda (cudaMalloc, as PyTorch) or nccl (ncclMemAlloc, "
        "as nccl-tests).", choices=ALLOCS))

    # Idle seconds before each timed call, every rank idle (a barrier, then a sleep): what a link with a
    # token bucket (shaped:RATE) banks between a training step's collectives and a back-to-back sweep never
    # sees. relate reads such records as the link credit a call realises, never as prices (relating/credit.py).
    gap_s: float = field(default=0.0, metadata={**argv_field(flag="--gap"), **declare(
        "--gap", "seconds", "Idle seconds before each timed call, every rank idle: the link credit a shaped "
        "link's token bucket gives a call after compute (relate reads it; not a price). Torch engine.",
        unit="s", lo=0.0, hi=60.0, default_by="0: back to back")})

    def __post_init__(self) -> None:
        self._friendly()
        validate(self)  # whole: a SweepConfig is immutable, so built is checked

    def _friendly(self) -> None:
        """Friendly values as the fields' own, so the CLI and Python build it alike: sizes as text ("1M-1G"),
        a size or a list of them; gpus as text ("0-3") or a sequence; ops as a comma text or a list; a
        dtype's other names (bf16)."""
        def put(name: str, value) -> None:
            object.__setattr__(self, name, value)

        sizes = self.sizes
        if isinstance(sizes, str):
            put("sizes", SizeSweep.parse(sizes))
        elif isinstance(sizes, int):
            put("sizes", SizeSweep(explicit=(sizes,), spec=format_size(sizes)))
        elif isinstance(sizes, (list, tuple)):
            vals = tuple(parse_size(x) if isinstance(x, str) else int(x) for x in sizes)
            put("sizes", SizeSweep(explicit=vals, spec=",".join(format_size(v) for v in vals)))
        if isinstance(self.gpus, str):
            put("gpus", parse_gpus(self.gpus))
        elif self.gpus is not None:
            gpus = tuple(int(g) for g in self.gpus)
            if len(set(gpus)) != len(gpus) or not gpus:
                raise UsageError(f"gpus={list(self.gpus)}: name each GPU once and at least one")
            put("gpus", gpus)
        ops = [o for o in self.ops.split(",") if o.strip()] if isinstance(self.ops, str) else self.ops
        put("ops", tuple(COLLECTIVES.get(o.strip()).name for o in ops))
        put("dtype", dtypes.resolve(self.dtype))

    def validate(self) -> "SweepConfig":
        """The whole check again (as TrainConfig and StudyConfig have it); returns self."""
        validate(self)
        return self

    def modes(self) -> tuple[bool, ...]:
        """The in-place settings to run, out-of-place first (nccl-tests' column order)."""
        return {"out-of-place": (False,), "inplace": (True,), "both": (False, True)}[self.inplace]


def cores() -> int:
    """CPU cores this process may run on (the affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def check_local_ranks(nprocs: int) -> None:
    """UsageError when `nprocs` local ranks would crowd this machine's cores (sweep, train and study
    --nprocs share this one rule): beyond PROCS_PER_CORE a rank each, a run measures the scheduler."""
    limit = PROCS_PER_CORE * cores()
    if nprocs > limit:
        raise UsageError(f"--nprocs {nprocs}: more local ranks than {PROCS_PER_CORE} per CPU core "
                         f"({PROCS_PER_CORE} x {cores()} cores = {limit}); use at most {limit}, or one "
                         f"rank per GPU")


def default_backend(visible: int | None = None) -> str:
    """The torch engine's backend when none is named: nccl where a GPU is visible, else gloo."""
    return "nccl" if (fabricbench.gpus.visible_gpu_count() if visible is None else visible) else "gloo"


def times_calls_alone(config: "SweepConfig") -> bool:
    """Whether this sweep can time each call alone, as --gap needs: the torch engine's per-call events,
    no adaptive loop (the native engine and a timed loop run calls back to back)."""
    return config.engine == "torch" and config.timing == "events" and config.adaptive is None


def validate(config: SweepConfig) -> None:
    """Everything that can be checked before a GPU is touched; the message says what to do."""
    check(config)  # every declared field inside its declared range (declare.py), as the CLI checks it
    ENGINES.get(config.engine)
    if not isinstance(config.sizes, SizeSweep):
        raise UsageError(f"sizes={config.sizes!r}: give a SizeSweep, a size text such as '1M-1G', a size or a "
                         f"list of sizes")
    if not config.ops:
        raise UsageError("--ops is empty; name at least one op, e.g. all_reduce")
    for op in config.ops:
        COLLECTIVES.get(op)
    dtypes.elem_size(dtypes.resolve(config.dtype))
    if config.nprocs is not None:
        if config.nprocs <= 0:
            raise UsageError(f"--nprocs {config.nprocs}: need at least 1 process")
        check_local_ranks(config.nprocs)
    if config.adaptive is not None:
        if config.max_iters < config.iters:
            raise UsageError(f"--max-iters {config.max_iters} is below --iters {config.iters}: the adaptive mode "
                             f"takes --iters first, then more up to --max-iters; raise --max-iters")
    if config.alloc == "nccl" and config.engine != "native":
        raise UsageError("--alloc nccl is for --engine native (the torch engine allocates through PyTorch)")
    if config.timing == "loop" and config.adaptive is not None:
        raise UsageError("--adaptive needs --timing events: a timed loop gives one figure, not one per iteration")
    if config.gap_s and not times_calls_alone(config):
        raise UsageError(f"--gap {config.gap_s:g} times each call alone after an idle gap: it needs --engine torch "
                         f"with --timing events and no --adaptive (the native engine and a timed loop run calls "
                         f"back to back)")
    if config.backend is not None:
        if config.engine != "torch":
            raise UsageError(f"--backend {config.backend} applies to --engine torch only")
    if config.gpus is not None:
        if not config.gpus or len(set(config.gpus)) != len(config.gpus) or min(config.gpus) < 0:
            raise UsageError(f"gpus={list(config.gpus)}: name each GPU once, at least one, no negative ordinal")
    if config.nccl_lib:
        _check_nccl_lib(config.nccl_lib)
    gloo_lab = config.engine == "torch" and config.backend == "gloo"  # ranks share GPUs, round robin
    if config.nprocs and config.gpus and config.nprocs > len(config.gpus) and not gloo_lab:
        raise UsageError(f"--nprocs {config.nprocs} but --gpus names {len(config.gpus)} GPUs: NCCL refuses two "
                         f"ranks on one GPU (\"Duplicate GPU detected\"); name one GPU per rank, or run several "
                         f"ranks per GPU with --engine torch --backend gloo")
    if config.nprocs and config.gpus and config.nprocs < len(config.gpus):
        raise UsageError(f"--nprocs {config.nprocs} but --gpus names {len(config.gpus)} GPUs; "
                         f"one process drives one GPU, so give as many of each")


def _check_nccl_lib(path: str) -> None:
    """A given --nccl-lib must exist and, where the engine is built, really be NCCL (dlopen + version)."""
    import importlib
    import importlib.util

    resolved = resolve_nccl_library(path)
    if importlib.util.find_spec("fabricbench._engine") is None:
        return
    try:
        importlib.import_module("fabricbench._engine").load_nccl(resolved)
    except NcclError as e:
        raise UsageError(f"--nccl-lib: {e}") from None
