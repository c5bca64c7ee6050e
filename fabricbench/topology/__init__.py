"""GPU topology: links per pair, NVLink islands, placement advice; the snapshot a results file starts with
where this machine has GPUs to describe (a CPU sweep's file has none; across nodes, one per node).

    fabricbench topo [--gpus 0-7] [--json] [--topo-file saved-topo-m.txt]

The sweep calls two functions from here, both cheap and never raising (None when NVML and nvidia-smi
cannot answer): `islands_warning(gpus)` and `snapshot()`. Nothing heavy is imported at module import.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from fabricbench.declare import Declared
from fabricbench.errors import UsageError
from fabricbench.gpus import parse_gpus
from fabricbench.results.schema import header
from fabricbench.topology import kinds as _kinds  # noqa: F401  (registers the snapshot's record kind)
from fabricbench.topology.model import Gpu, Nic, Topology, ranges
from fabricbench.topology.nvml import read_nvml
from fabricbench.topology.smi import load_file, read_nvidia_smi

__all__ = ["Gpu", "Nic", "Topology", "read_topology", "load_file", "snapshot", "islands_warning", "cuda_to_nvml",
           "topology_for", "TOPO_FILE"]

# the option that names a saved topology, one name in every command that reads one (read_topology's file)
TOPO_FILE = Declared(flag="--topo-file", kind="input file", help=(
    "A saved `nvidia-smi topo -m` output (or `fabricbench topo --json`) instead of this machine's."))


@functools.lru_cache(maxsize=1)
def _machine() -> Topology | None:
    return read_nvml() or read_nvidia_smi()


def read_topology(from_file: str | None = None, *, what: str = "--topo-file") -> Topology | None:
    """The topology of a saved file (see load_file), or of this machine (NVML, then nvidia-smi)."""
    if from_file is not None:
        return load_file(from_file, what=what)
    return _machine()


def topology_for(from_file: str | None, gpus: str | None) -> Topology:
    """What `fabricbench topo` shows: the topology of `from_file` or this machine, cut to `gpus` (NVML
    indices); UsageError when neither answers, or when `gpus` names a GPU the topology lacks."""
    topo = read_topology(from_file)
    if topo is None:
        raise UsageError("no GPU topology here: NVML did not answer and `nvidia-smi topo -m` is not "
                         "available; pass --topo-file with a saved `nvidia-smi topo -m` output")
    if gpus is None:
        return topo
    wanted = parse_gpus(gpus)
    n = len(topo.gpus)
    beyond = [g for g in wanted if g >= n]
    if beyond:
        shown = str(beyond[0]) if len(beyond) == 1 else f"{min(beyond)}-{max(beyond)}" \
            if len(beyond) == max(beyond) - min(beyond) + 1 else ", ".join(map(str, beyond[:8]))
        raise UsageError(f"--gpus {gpus} names GPU {shown} but the topology has {n} GPU(s) (0-{n - 1})")
    return topo.subset(wanted)


def cuda_to_nvml(gpus: tuple[int, ...], topo: Topology | None = None) -> tuple[int, ...]:
    """CUDA ordinals (as --gpus names them) -> NVML indices, through CUDA_VISIBLE_DEVICES when it is set."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not visible:
        return tuple(gpus)
    ids = [v.strip() for v in visible.split(",") if v.strip()]
    out = []
    for g in gpus:
        if g >= len(ids):
            out.append(g)
            continue
        ident = ids[g]
        if ident.isdigit():
            out.append(int(ident))
            continue
        match = None
        if topo is not None:  # a UUID (GPU-xxxx), possibly abbreviated
            match = next((x.index for x in topo.gpus if x.uuid and x.uuid.startswith(ident)), None)
        out.append(match if match is not None else g)
    return tuple(out)


def snapshot() -> dict[str, Any] | None:
    """This machine's topology as the body of a "topology" record (the caller adds header()), or None."""
    try:
        topo = _machine()
        if topo is None:
            return None
        d = topo.to_dict()
        return {"gpus": d["gpus"], "links": d["links"], "islands": d["islands"], "uniform": d["uniform"],
                "nics": d["nics"], "source": d["source"],
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    except Exception:  # a snapshot is a courtesy: never fail a measurement for it
        return None


def islands_warning(gpus: tuple[int, ...], topo: Topology | None = None) -> str | None:
    """One line when these GPUs (CUDA ordinals) span NVLink islands, else None. Never raises."""
    try:
        topo = topo if topo is not None else _machine()
        if topo is None or len(gpus) < 2:
            return None
        nvml = cuda_to_nvml(tuple(gpus), topo)
        if any(g not in topo.indices for g in nvml):
            return None
        sub = topo.subset(nvml)
        if topo.uniform or topo.island_of(nvml) is not None:
            return None
        if not sub.has_nvlink() and not topo.has_nvlink():
            return None  # no NVLink on this machine at all: nothing to warn about
        parts = [sorted(set(i) & set(nvml)) for i in topo.islands()]
        parts = [p for p in parts if p]
        seen: list[list[int]] = []
        for p in parts:  # overlapping cliques: keep each GPU once, in its first island
            q = [g for g in p if not any(g in s for s in seen)]
            if q:
                seen.append(q)

        shown = ", ".join("[" + ",".join(map(str, s)) + "]" for s in seen)
        return (f"GPUs {ranges(list(gpus))} span {len(seen)} NVLink islands ({shown}): collectives run "
                f"at the speed of the {sub.worst_link(nvml)} link between them")
    except Exception:
        return None


def snapshot_record(run_id: str, fabric: str = "default", topo: Topology | None = None) -> dict[str, Any] | None:
    """A whole "topology" record (header + snapshot) for the start of a results file, or None."""
    if topo is not None:
        d = topo.to_dict()
        body = {k: d[k] for k in ("gpus", "links", "islands", "uniform", "nics", "source")}
    else:
        body = snapshot()
    if body is None:
        return None
    return {**header("topology", run_id=run_id, fabric=fabric), **body}
