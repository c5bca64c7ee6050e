"""Facts about where a result was measured: host, time, allow-listed environment, library versions.

Only NCCL_*, CUDA_VISIBLE_DEVICES and a few named variables are ever recorded — never the whole
environment, which can hold credentials.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import socket
import sys
from importlib import metadata

ENV_PREFIXES = ("NCCL_",)
ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
             "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "FABRICBENCH_NCCL_LIBRARY",
             "GLOO_SOCKET_IFNAME", "OMP_NUM_THREADS")


# Set by fabricbench itself to capture NCCL's log (a temporary path): noise, not a setting of the run.
ENV_EXCLUDED = ("NCCL_DEBUG_FILE",)


def allowed_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    return {k: v for k, v in sorted(env.items())
            if (k.startswith(ENV_PREFIXES) or k in ENV_NAMES) and k not in ENV_EXCLUDED}


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def host_facts() -> dict[str, object]:
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "fabricbench_version": package_version("fabricbench"),
    }
