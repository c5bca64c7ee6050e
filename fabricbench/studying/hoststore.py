"""This host's store of measured durations: what earlier studies on this host took, for the next estimate.

    fabricbench study --device cpu --nprocs 2 --fabrics default --model tiny-mistral --out lab/ --dry-run
                                             (a figure whose source is "this host" was read from here)

One JSON file per host in fabricbench's cache folder (`~/.cache/fabricbench/durations/<host>.json`), as a
home folder may be shared by a cluster's nodes. It is written atomically after each study (a study ending
beside another may drop the other's samples: they are only estimates), and read only when its schema is
this one and it parses; anything else reads as empty and is replaced by the next study. A sample is one
measured figure with the load it was measured under, so that durations.py can scale it to the load now.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

from fabricbench.jobs.bytecode import cache_root
from fabricbench.outputs import write_atomic

SCHEMA = 2  # the store's layout (2: a run's fixed cost without its profiled steps, train_trace apart); a
# store of another is ignored and replaced by the next study
KEEP = 8  # samples per key: the host's recent behaviour, not its history

Samples = dict[str, list[dict[str, float]]]  # {key: [sample]}, key e.g. "train_fixed/cpu/ddp"


def store_path(env: dict[str, str] | None = None) -> Path:
    return cache_root(dict(os.environ) if env is None else env) / "durations" / f"{socket.gethostname()}.json"


def read_store(path: Path | None = None) -> Samples:
    """{key: [sample]} from the store; {} where it is absent, unreadable or of another schema."""
    try:
        doc = json.loads((path or store_path()).read_text())
    except (OSError, ValueError):
        return {}
    samples = doc.get("samples") if isinstance(doc, dict) and doc.get("schema") == SCHEMA else None
    if not isinstance(samples, dict):
        return {}
    return {k: [x for x in v if _readable(x)] for k, v in samples.items() if isinstance(k, str) and isinstance(v, list)}


def _readable(x: Any) -> bool:
    return isinstance(x, dict) and all(isinstance(x.get(k), (int, float)) for k in ("s", "others", "cpus", "need"))


def sample(s: float, load: dict[str, Any] | None, need: float) -> dict[str, float]:
    """One measured figure with the load it was measured under (a record's host_load; None: unknown, 0)
    and the CPUs the run wanted."""
    load = load or {}
    others = float(load.get("others_cpus") or 0) + float(load.get("steal_cpus") or 0)
    return {"s": round(float(s), 4), "others": round(others, 3), "cpus": int(load.get("cpus") or os.cpu_count() or 1),
            "need": need}


def add(new: Samples, path: Path | None = None) -> None:
    """Append `new` to the store, keeping the last KEEP samples of each key. An unwritable cache is not the
    study's failure: the next estimate is a first guess again."""
    path = path or store_path()
    store = read_store(path)
    for key, xs in new.items():
        store[key] = (store.get(key, []) + xs)[-KEEP:]
    try:
        write_atomic(path, json.dumps({"schema": SCHEMA, "host": socket.gethostname(), "samples": store}, indent=0),
                     what="duration store")
    except Exception:  # noqa: BLE001 - a read-only home or a full disk: the estimate falls back to its first guess
        pass
