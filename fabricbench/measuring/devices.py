"""Which devices and ranks a sweep takes on this machine: the one place the library and every command
decide it (backend, GPUs, processes), and a SweepConfig made from friendly values.

    fabricbench sweep --engine torch           (backend nccl where a GPU is visible, else gloo)

Apart from measuring/api.py (the library's face), so that the modules api.py runs on (runner, resume)
can ask the same questions without importing it.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import fabricbench.gpus  # looked up on call: tests stand in for visible_gpu_count
from fabricbench.errors import UsageError
from fabricbench.gpus import check_visible, default_gpus
from fabricbench.measuring.config import SweepConfig, default_backend, validate as check


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
    if config.nprocs:
        return config.nprocs
    if "WORLD_SIZE" in os.environ:
        return int(os.environ["WORLD_SIZE"])
    return len(config.gpus) if config.gpus else 1
