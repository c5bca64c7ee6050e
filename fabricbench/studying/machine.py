"""The study's machine unit, run as its own process: versions, GPUs and topology as one JSON document.

    python3 -m fabricbench.studying.machine --device cuda --gpus 0-3
    python3 -m fabricbench.studying.machine --device cpu --nprocs 2

The report's first section is built from this: GPU names and memory, the topology matrix and its NVLink
islands, driver, CUDA, NCCL, torch and the training libraries. Each fact that cannot be read is None.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
from dataclasses import dataclass
from typing import Any

from fabricbench.jobs.configs import Job
from fabricbench.results.context import package_version
from fabricbench.topology import snapshot


@dataclass(frozen=True, kw_only=True)
class MachineJob(Job):
    """A child `python -m fabricbench.studying.machine` (versions, GPUs, topology), as study starts one."""

    PROGRAM = ("fabricbench.studying.machine",)  # this module
    device: str = "cuda"
    gpus: tuple[int, ...] | None = None
    nprocs: int | None = None


def _try(fn, default=None):
    try:
        return fn()
    except Exception:  # a fact this machine cannot give is None, never a failed study
        return default


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def _gpus(ordinals: list[int]) -> list[dict[str, Any]]:
    import torch

    out = []
    for i in ordinals:
        p = torch.cuda.get_device_properties(i)
        out.append({"ordinal": i, "name": p.name, "memory_total_bytes": int(p.total_memory),
                    "capability": f"{p.major}.{p.minor}", "multiprocessors": p.multi_processor_count})
    return out


def _driver() -> str | None:
    def read():
        import pynvml

        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else v
        finally:
            pynvml.nvmlShutdown()

    return _try(read)


def facts(device: str, gpus: list[int], nprocs: int) -> dict[str, Any]:
    doc: dict[str, Any] = {"device": device, "gpus_requested": gpus, "nprocs": nprocs if device == "cpu" else len(gpus),
                           "cpu_model": _cpu_model(), "cpu_count": os.cpu_count(), "platform": platform.platform(),
                           "versions": {lib: package_version(lib) for lib in
                                        ("fabricbench", "torch", "accelerate", "transformers", "deepspeed")}}
    import torch

    doc["versions"]["torch_cuda"] = torch.version.cuda
    doc["netns_capable"] = bool(_try(lambda: os.geteuid() == 0) and shutil.which("ip") and shutil.which("tc"))
    if device == "cuda" and torch.cuda.is_available():
        doc["gpus"] = _try(lambda: _gpus(gpus), [])
        nccl = _try(lambda: torch.cuda.nccl.version())
        doc["versions"]["nccl_torch"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl
        doc["versions"]["cuda_driver"] = _driver()
    else:
        doc["gpus"] = []
        doc["versions"]["nccl_torch"] = None
        doc["versions"]["cuda_driver"] = None

    doc["topology"] = snapshot() if device == "cuda" else None
    return doc


def parser() -> argparse.ArgumentParser:
    """The options (jobs.configs' job kind for this child builds its argv from the same names)."""
    ap = argparse.ArgumentParser(prog="python3 -m fabricbench.studying.machine")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--gpus", default="")
    ap.add_argument("--nprocs", type=int, default=1)
    return ap


def main() -> None:
    a = parser().parse_args()
    gpus = [int(g) for g in a.gpus.split(",") if g.strip()] if a.gpus else []
    print(json.dumps(facts(a.device, gpus, a.nprocs)))


if __name__ == "__main__":
    main()
