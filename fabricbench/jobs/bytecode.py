"""Compiled bytecode for the jobs' Python children (ranks, sweeps), where each would compile torch from source.

Container images often set PYTHONDONTWRITEBYTECODE=1 and ship site-packages without __pycache__ folders
(the GPU machine this project is measured on does both). Python then compiles every module it imports
from source, in every process, every time: `import torch, torch.distributed, accelerate, torch._dynamo`
took 7.6-8.2 s that way on this project's 2-core VM against 2.8 s from bytecode, and a rank imports that
and more before it trains. So where torch has no bytecode beside its sources and writing it is off, the
children fabricbench starts (jobs.run) keep theirs in fabricbench's cache instead (PYTHONPYCACHEPREFIX,
Python's own mechanism for a bytecode folder apart from the sources): the first run compiles and writes
it, every later run reads it.
The sources stay untouched, as PYTHONDONTWRITEBYTECODE asks; Python checks each file against its source
(mtime and size), so an upgraded package is recompiled, never read stale. Nothing of a run's state is
shared: bytecode is a pure function of the source.

A user's own PYTHONPYCACHEPREFIX is kept as it is. Where torch's bytecode lies beside its sources (a pip
install's default), nothing changes: a prefix would make Python ignore that bytecode and compile again.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

PROBE = "torch"  # the largest import of a rank or a sweep: where it has bytecode, the environment writes or ships it


def cache_root(env: dict[str, str]) -> Path:
    """fabricbench's cache folder: $XDG_CACHE_HOME/fabricbench, else ~/.cache/fabricbench."""
    base = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache")
    # absolute: Python resolves a relative prefix against each child's own working folder
    return Path(os.path.abspath(base)) / "fabricbench"


def cache_dir(env: dict[str, str]) -> Path:
    """fabricbench's bytecode folder: pycache in its cache folder (cache_root)."""
    return cache_root(env) / "pycache"


def _has_bytecode(module: str) -> bool | None:
    """Whether `module`'s source has its compiled file beside it (None: not installed, or no source)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    try:
        return os.path.exists(importlib.util.cache_from_source(spec.origin))
    except NotImplementedError:  # no bytecode at all in this interpreter (sys.implementation.cache_tag None)
        return None


def for_children(env: dict[str, str]) -> dict[str, str]:
    """The variables to change in a child's environment `env` (removed ones map to ""): a bytecode prefix
    in fabricbench's cache where writing is off and torch has none beside its sources; else nothing."""
    if not env.get("PYTHONDONTWRITEBYTECODE") or env.get("PYTHONPYCACHEPREFIX"):
        return {}
    if _has_bytecode(PROBE) is not False:
        return {}
    return {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(cache_dir(env))}


def apply(env: dict[str, str]) -> dict[str, str]:
    """`env` with for_children(env) applied (a removed variable is gone, not empty: Python reads "" as unset
    only for some variables) -> the same dict."""
    for key, value in for_children(env).items():
        if value:
            env[key] = value
        else:
            env.pop(key, None)
    return env
