"""Facts about where a result was measured: host, time, allow-listed environment, library versions.

Only NCCL_*, GLOO_*, CUDA_VISIBLE_DEVICES and a few named variables are ever recorded — never the whole
environment, which can hold credentials. A fabric's own variables (`x:SOME_TOKEN=...`) are shown by
name everywhere, but their values only when the name is NCCL_*, GLOO_* or CUDA_* (public_env); any
other value is written as "***" (fabricbench/masking.py).
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import socket
import sys
from importlib import metadata

from fabricbench.errors import UsageError
from fabricbench.fabrics import get_fabric
from fabricbench.masking import MASK, PUBLIC_PREFIXES, public_env, public_value  # noqa: F401 (their old home)

ENV_PREFIXES = ("NCCL_", "GLOO_")
ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
             "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "FABRICBENCH_NCCL_LIBRARY",
             "GLOO_SOCKET_IFNAME", "OMP_NUM_THREADS", "FABRICBENCH_FABRIC_APPLIED")
# Set by fabricbench itself to capture NCCL's log (a temporary path): noise, not a setting of the run.
ENV_EXCLUDED = ("NCCL_DEBUG_FILE", "NCCL_VERSION")  # NCCL_VERSION: a container image's label, not the NCCL loaded (records name that: version and path)


def allowed_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    return {k: v for k, v in sorted(env.items())
            if (k.startswith(ENV_PREFIXES) or k in ENV_NAMES) and k not in ENV_EXCLUDED}


def nccl_choice(environ: dict[str, str] | None = None) -> tuple[str | None, str | None]:
    """(algorithm, protocol) NCCL was told to use (NCCL_ALGO, NCCL_PROTO), or None where it chooses."""
    env = os.environ if environ is None else environ
    return env.get("NCCL_ALGO") or None, env.get("NCCL_PROTO") or None


def fabric_label(spec: str) -> str:
    """What a record or a screen calls the fabric a spec names: its name ('x:SOME_TOKEN=abc' -> 'x',
    'shaped:1000mbit' -> 'shaped:1gbit'), so that a value given in a custom spec is never written."""
    try:
        return get_fabric(spec).name
    except UsageError:  # not a valid spec (the run will say so): never echo what follows a ':'
        return spec.partition(":")[0] if "=" in spec else spec


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
