"""Test tiers: CPU (default), one GPU and several GPUs.

GPU tests carry @pytest.mark.gpu(n) and are skipped, with the detected count in the reason, when fewer
than n GPUs are present. Detection reads the NVIDIA driver's device list (no CUDA context, no torch),
never an exception caught at test time.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def detected_gpus() -> int:
    """CUDA GPUs this process may use, as the driver lists them and CUDA_VISIBLE_DEVICES narrows them."""
    if not os.path.exists("/proc/driver/nvidia") and shutil.which("nvidia-smi") is None:
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    n = sum(1 for line in out.splitlines() if line.startswith("GPU "))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        n = min(n, len([v for v in visible.split(",") if v.strip()]))
    return n


GPUS = detected_gpus()


def pytest_collection_modifyitems(config, items):
    for item in items:
        mark = item.get_closest_marker("gpu")
        if mark is None:
            continue
        need = mark.args[0] if mark.args else 1
        if GPUS < need:
            item.add_marker(pytest.mark.skip(reason=f"needs {need} GPU(s); {GPUS} detected"))
