"""The library face of the measurement core.

    import fabricbench
    r = fabricbench.measure("all_reduce", "1G", gpus=[0, 1], dtype="bfloat16")
    print(r.time_us, r.algbw_gbps, r.busbw_gbps)
    rows = fabricbench.sweep(ops=["all_gather", "reduce_scatter"], sizes="1M-1G:x2", out="ag.jsonl")
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Iterable

import fabricbench.gpus  # looked up on call: tests stand in for visible_gpu_count
from fabricbench.errors import UsageError
from fabricbench.gpus import check_visible, default_gpus
from fabricbench.measuring import runner
from fabricbench.measuring.config import SweepConfig, default_backend, validate as check
from fabricbench.measuring.resume import Resume
from fabricbench.results.schema import CollectiveResult
from fabricbench.results.status import Status
from fabricbench.results.writer import ResultWriter

if TYPE_CHECKING:  # for the annotation only: pandas is an extra, imported where it is used
    import pandas


def make_config(**fields: Any) -> SweepConfig:
    """A SweepConfig from friendly values (SweepConfig takes them itself: sizes and gpus as text or
    sequences, ops as a list); an unknown field is named with the known ones."""
    known = {f.name for f in dataclasses.fields(SweepConfig)}
    unknown = set(fields) - known
    if unknown:
        raise UsageError(f"unknown option(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}")
    return SweepConfig(**fields)  # checks itself (SweepConfig.__post_init__)


def validate(config: SweepConfig) -> None:
    """SweepConfig checks itself when built; kept for callers that re-check a config they hold."""
    check(config)


def uses_gpus(config: SweepConfig) -> bool:
    """Whether this config's ranks drive GPUs (the native engine, or torch with nccl)."""
    return config.engine == "native" or (config.engine == "torch" and config.backend == "nccl")


def resolve_devices(config: SweepConfig, gpus_text: str | None = None, *,
                    visible: int | None = None) -> tuple[SweepConfig, list[str]]:
    """The defaults a sweep takes from this machine, decided here for the library and the command alike.

    - backend (torch engine): nccl when a GPU is visible, else gloo;
    - gpus (engines that drive GPUs): all visible ones, checked against the visible count;
    - nprocs (torch over several GPUs): one process per GPU, unless launched by torchrun (WORLD_SIZE).
    Returns the completed config and the warnings for options the chosen mode ignores.
    """
    import os

    warnings: list[str] = []
    if config.engine == "torch" and config.backend is None:
        visible = fabricbench.gpus.visible_gpu_count() if visible is None else visible
        config = dataclasses.replace(config, backend=default_backend(visible))
    lab = config.engine == "torch" and config.backend == "gloo" and config.gpus is not None
    if lab:  # gloo with --gpus: CUDA tensors, ranks sharing GPUs (the lab); with no GPU it is CPU ranks, said
        visible = fabricbench.gpus.visible_gpu_count() if visible is None else visible
        lab = visible > 0
    if not uses_gpus(config) and not lab:
        if config.gpus is not None:
            warnings.append(f"--gpus is ignored by --backend {config.backend} (CPU ranks)")
        if config.graph:
            warnings.append("--graph is ignored on CPU ranks (no CUDA graphs)")
        return config, warnings
    visible = fabricbench.gpus.visible_gpu_count() if visible is None else visible
    if visible == 0:
        raise UsageError(f"no CUDA GPU is visible for engine {config.engine}"
                         f"{', backend nccl' if config.engine == 'torch' else ''}", hint=fabricbench.gpus.CPU_RANKS,
                         hint_text="on CPU, run with")
    if config.gpus is not None:
        gpus = config.gpus
        check_visible(gpus, visible, gpus_text)
    else:
        gpus = default_gpus(None, visible=visible)  # all visible: decided in fabricbench/gpus.py only
    if config.engine == "torch" and len(gpus) > 1 and not config.nprocs and "WORLD_SIZE" not in os.environ:
        config = dataclasses.replace(config, nprocs=len(gpus))  # torch drives one GPU per process
    return dataclasses.replace(config, gpus=gpus), warnings


def nranks(config: SweepConfig) -> int:
    """Ranks the sweep will have: --nprocs, torchrun's WORLD_SIZE, else one per GPU of this process."""
    import os

    if config.nprocs:
        return config.nprocs
    if "WORLD_SIZE" in os.environ:
        return int(os.environ["WORLD_SIZE"])
    return len(config.gpus) if config.gpus else 1


def sweep(*, out: str | None = None, resume: bool = False, **fields: Any) -> list[CollectiveResult]:
    """Run a sweep (fields as SweepConfig, friendly types allowed) and return its results.

    resume=True: what `out` already holds as ok (same item, ranks, GPUs, engine, fabric and settings; see
    fabricbench/measuring/resume.py) is not measured again; those results are returned from the file, in
    plan order with the new ones, and not written twice."""
    import warnings

    if resume and out is None:
        raise UsageError("resume=True skips what `out` already holds; pass out=<the earlier run's file>")
    config, notes = resolve_devices(make_config(**fields))
    for note in notes:
        warnings.warn(note, stacklevel=2)
    prior = Resume.from_file(out) if resume else None
    with ResultWriter(out) as writer:
        return runner.run_sweep(config, writer=writer, resume=prior)


def measure(op: str, size: int | str, **fields: Any) -> CollectiveResult:
    """Time one collective at one size (out-of-place unless inplace=True) and return its result."""
    inplace = fields.pop("inplace", False)
    fields["inplace"] = "inplace" if inplace is True else ("out-of-place" if inplace is False else inplace)
    results = [r for r in sweep(ops=[op], sizes=[size], **fields) if r.status != Status.WAIVED]

    if not results:
        raise UsageError(f"{op} at {size} does not run on this many ranks (waived)")
    return results[0]


def to_dataframe(results: Iterable[CollectiveResult | dict[str, Any]]) -> pandas.DataFrame:
    """A pandas DataFrame of results (records or dataclasses), one row each."""
    try:
        import pandas as pd
    except ImportError:
        raise UsageError('to_dataframe needs pandas: pip install "fabricbench[pandas]"') from None
    return pd.DataFrame([r.to_dict() if isinstance(r, CollectiveResult) else r for r in results])
