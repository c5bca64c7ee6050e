"""The library face of the measurement core.

    import fabricbench
    r = fabricbench.measure("all_reduce", "1G", gpus=[0, 1], dtype="bfloat16")
    print(r.time_us, r.algbw_gbps, r.busbw_gbps)
    rows = fabricbench.sweep(ops=["all_gather", "reduce_scatter"], sizes="1M-1G:x2", out="ag.jsonl")
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

from fabricbench.measuring.config import SweepConfig
from fabricbench.results.schema import CollectiveResult
from fabricbench.sizes import SizeSweep, format_size, parse_size


def make_config(**fields: Any) -> SweepConfig:
    """A SweepConfig from friendly values: sizes and gpus as strings or sequences, ops as a list."""
    from fabricbench import dtypes
    from fabricbench.collectives import COLLECTIVES
    from fabricbench.errors import UsageError
    from fabricbench.gpus import parse_gpus

    sizes = fields.get("sizes")
    if isinstance(sizes, str):
        fields["sizes"] = SizeSweep.parse(sizes)
    elif isinstance(sizes, (int,)):
        fields["sizes"] = SizeSweep(explicit=(sizes,), spec=format_size(sizes))
    elif isinstance(sizes, Iterable) and not isinstance(sizes, SizeSweep):
        vals = tuple(parse_size(s) if isinstance(s, str) else int(s) for s in sizes)
        fields["sizes"] = SizeSweep(explicit=vals, spec=",".join(format_size(v) for v in vals))
    gpus = fields.get("gpus")
    if isinstance(gpus, str):
        fields["gpus"] = parse_gpus(gpus)
    elif gpus is not None:
        fields["gpus"] = tuple(int(g) for g in gpus)
        if len(set(fields["gpus"])) != len(fields["gpus"]) or not fields["gpus"]:
            raise UsageError(f"gpus={list(gpus)}: name each GPU once and at least one")
    ops = fields.get("ops")
    if isinstance(ops, str):
        ops = [o for o in ops.split(",") if o.strip()]
    if ops is not None:
        fields["ops"] = tuple(COLLECTIVES.get(o.strip()).name for o in ops)
    if "dtype" in fields:
        fields["dtype"] = dtypes.resolve(fields["dtype"])
    known = {f.name for f in dataclasses.fields(SweepConfig)}
    unknown = set(fields) - known
    if unknown:
        raise UsageError(f"unknown option(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}")
    config = SweepConfig(**fields)
    validate(config)
    return config


def validate(config: SweepConfig) -> None:
    """Everything that can be checked before a GPU is touched; the message says what to do."""
    from fabricbench.errors import UsageError
    from fabricbench.measuring.engines import ENGINES

    ENGINES.get(config.engine)
    if config.iters <= 0:
        raise UsageError(f"--iters {config.iters}: need at least 1 timed iteration")
    if config.warmup < 0:
        raise UsageError(f"--warmup {config.warmup}: cannot be negative")
    if config.graph_iters <= 0:
        raise UsageError(f"--graph-iters {config.graph_iters}: need at least 1")
    if config.nprocs is not None and config.nprocs <= 0:
        raise UsageError(f"--nprocs {config.nprocs}: need at least 1 process")
    if config.timeout_s <= 0:
        raise UsageError(f"--timeout {config.timeout_s:g}: must be positive (seconds)")
    if config.adaptive is not None and not 0 < config.adaptive < 1:
        raise UsageError(f"--adaptive {config.adaptive:g}: a fraction between 0 and 1, e.g. 0.02")
    if config.inplace not in ("out-of-place", "inplace", "both"):
        raise UsageError(f"inplace={config.inplace!r}: choose out-of-place, inplace or both")
    if not config.ops:
        raise UsageError("--ops is empty; name at least one op, e.g. all_reduce")
    if config.backend is not None and config.engine != "torch":
        raise UsageError(f"--backend {config.backend} applies to --engine torch only")
    if config.nccl_lib:
        _check_nccl_lib(config.nccl_lib)
    if config.nprocs and config.gpus and config.nprocs != len(config.gpus):
        raise UsageError(f"--nprocs {config.nprocs} but --gpus names {len(config.gpus)} GPUs; "
                         f"one process drives one GPU, so give as many of each")


def _check_nccl_lib(path: str) -> None:
    """A given --nccl-lib must exist and, where the engine is built, really be NCCL (dlopen + version)."""
    import importlib
    import importlib.util

    from fabricbench.errors import NcclError, UsageError
    from fabricbench.measuring.nccl_lib import resolve_nccl_library

    resolved = resolve_nccl_library(path)
    if importlib.util.find_spec("fabricbench._engine") is None:
        return
    try:
        importlib.import_module("fabricbench._engine").load_nccl(resolved)
    except NcclError as e:
        raise UsageError(f"--nccl-lib: {e}") from None


def sweep(*, out: str | None = None, **fields: Any) -> list[CollectiveResult]:
    """Run a sweep (fields as SweepConfig, friendly types allowed) and return its results."""
    from fabricbench.measuring.runner import run_sweep
    from fabricbench.results.writer import ResultWriter

    config = make_config(**fields)
    with ResultWriter(out) as writer:
        return run_sweep(config, writer=writer)


def measure(op: str, size: int | str, **fields: Any) -> CollectiveResult:
    """Time one collective at one size (out-of-place unless inplace=True) and return its result."""
    inplace = fields.pop("inplace", False)
    fields["inplace"] = "inplace" if inplace is True else ("out-of-place" if inplace is False else inplace)
    results = [r for r in sweep(ops=[op], sizes=[size], **fields) if r.status != "waived"]
    from fabricbench.errors import UsageError

    if not results:
        raise UsageError(f"{op} at {size} does not run on this many ranks (waived)")
    return results[0]


def to_dataframe(results: Iterable[CollectiveResult | dict[str, Any]]):
    """A pandas DataFrame of results (records or dataclasses), one row each."""
    import pandas as pd

    return pd.DataFrame([r.to_dict() if isinstance(r, CollectiveResult) else r for r in results])
