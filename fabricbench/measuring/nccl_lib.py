"""Which libnccl.so.2 the native engine loads, decided once, in a documented order.

    fabricbench sweep --engine native --nccl-lib /opt/nccl/lib/libnccl.so.2

Order: the explicit --nccl-lib path; the environment variable FABRICBENCH_NCCL_LIBRARY; the nvidia-nccl
wheel that torch uses (found on sys.path without importing torch); the system's libnccl.so.2. The
native engine records the path it used and NCCL's version in every result. Pure Python: no CUDA needed.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

from fabricbench.errors import EngineUnavailable, UsageError

ENV_VAR = "FABRICBENCH_NCCL_LIBRARY"
SONAME = "libnccl.so.2"
# Layouts inside the `nvidia` namespace package: nvidia-nccl-cu12 and -cu13 ship nccl/lib/; newer
# CUDA 13 wheels gather libraries under cu13/lib/.
WHEEL_LAYOUTS = ("nccl/lib", "cu13/lib", "cu12/lib")
SYSTEM_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/local/cuda/lib64",
               "/usr/lib64", "/usr/local/lib", "/usr/lib")


def wheel_library() -> str | None:
    """libnccl.so.2 of an installed nvidia-nccl wheel (what torch loads), or None."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    for root in spec.submodule_search_locations or ():
        for layout in WHEEL_LAYOUTS:
            candidate = Path(root, layout, SONAME)
            if candidate.is_file():
                return str(candidate)
    return None


def system_library() -> str | None:
    """The system's libnccl.so.2: the dynamic linker's cache first, then the usual directories."""
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    for line in out.splitlines():
        if line.strip().startswith(SONAME) and "=>" in line:
            path = line.split("=>", 1)[1].strip()
            if Path(path).is_file():
                return path
    for d in SYSTEM_DIRS:
        candidate = Path(d, SONAME)
        if candidate.is_file():
            return str(candidate)
    return None


def _example() -> str:
    return wheel_library() or system_library() or f"/usr/lib/x86_64-linux-gnu/{SONAME}"


def _checked(path: str, source: str) -> str:
    if not Path(path).is_file():
        raise UsageError(f"{source} {path}: no such file; point it at {SONAME} (e.g. {_example()})")
    return path


def resolve_nccl_library(explicit: str | None) -> str:
    """The path of the NCCL library to load; UsageError for a given path that is not a file."""
    if explicit:
        return _checked(explicit, "--nccl-lib")
    env = os.environ.get(ENV_VAR)
    if env:
        return _checked(env, ENV_VAR)
    found = wheel_library() or system_library()
    if found is None:
        raise EngineUnavailable(
            f"no NCCL library found (no nvidia-nccl wheel, no system {SONAME}); `pip install nvidia-nccl-cu12` "
            f"(or -cu13), or pass --nccl-lib PATH / set {ENV_VAR}")
    return found
