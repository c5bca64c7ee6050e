"""Read the GPU topology from NVML (nvidia-ml-py): no CUDA context, no torch.

    fabricbench topo            (NVML first; `nvidia-smi topo -m` when NVML cannot answer)

Per pair: the NVLink count (links up whose remote end is the other GPU, or an NVSwitch that both reach;
nvidia-smi prints NV18 for every pair of an HGX board because of the switches) or else the PCIe relation
from nvmlDeviceGetTopologyCommonAncestor. Per GPU: name, UUID, bus id, PCIe gen/width, NUMA node, CPUs.
"""

from __future__ import annotations

from fabricbench.topology.model import Gpu, Topology

_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS on Hopper; newer NVML may allow more, errors end the scan


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _try(fn, *args, default=None):
    try:
        return fn(*args)
    except Exception:  # NVML_ERROR_NOT_SUPPORTED and friends: the fact is unknown, not fatal
        return default


def _cpu_list(words: list[int], bits: int = 64) -> str | None:
    cpus = [w * bits + b for w, word in enumerate(words) for b in range(bits) if (word >> b) & 1]
    if not cpus:
        return None
    out, start, prev = [], cpus[0], cpus[0]
    for c in cpus[1:] + [None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        out.append(f"{start}-{prev}" if prev != start else str(start))
        if c is not None:
            start = prev = c
    return ",".join(out)


def _numa_node(nvml, handle, bus_id: str | None) -> int | None:
    node = _try(getattr(nvml, "nvmlDeviceGetNumaNodeId", lambda h: None), handle)
    if node is not None and node >= 0:
        return int(node)
    if not bus_id:
        return None
    # sysfs names the device by its 4-digit domain: 00000000:18:00.0 -> 0000:18:00.0
    short = bus_id.lower()[-12:] if len(bus_id) > 12 else bus_id.lower()
    try:
        with open(f"/sys/bus/pci/devices/{short}/numa_node") as fh:
            v = int(fh.read().strip())
        return v if v >= 0 else None
    except (OSError, ValueError):
        return None


def _relation(nvml, level: int | None) -> str:
    table = {
        getattr(nvml, "NVML_TOPOLOGY_INTERNAL", 0): "PIX",  # two GPUs of one board
        getattr(nvml, "NVML_TOPOLOGY_SINGLE", 10): "PIX",
        getattr(nvml, "NVML_TOPOLOGY_MULTIPLE", 20): "PXB",
        getattr(nvml, "NVML_TOPOLOGY_HOSTBRIDGE", 30): "PHB",
        getattr(nvml, "NVML_TOPOLOGY_NODE", 40): "NODE",
        getattr(nvml, "NVML_TOPOLOGY_SYSTEM", 50): "SYS",
    }
    return table.get(level, "SYS")


def read_nvml() -> Topology | None:
    """The topology of every GPU NVML sees, or None when NVML is missing or fails."""
    try:
        import pynvml as nvml

        nvml.nvmlInit()
    except Exception:
        return None
    try:
        return _read(nvml)
    except Exception:
        return None
    finally:
        _try(nvml.nvmlShutdown)


def _read(nvml) -> Topology:
    n = nvml.nvmlDeviceGetCount()
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
    gpus, bus_ids = [], []
    for i, h in enumerate(handles):
        pci = _try(nvml.nvmlDeviceGetPciInfo, h)
        bus = _s(pci.busId) if pci is not None else None
        bus_ids.append(bus.lower() if bus else None)
        affinity = _try(nvml.nvmlDeviceGetCpuAffinity, h, 16)
        gpus.append(Gpu(
            index=i,
            name=_try(lambda: _s(nvml.nvmlDeviceGetName(h))),
            uuid=_try(lambda: _s(nvml.nvmlDeviceGetUUID(h))),
            bus_id=bus,
            pcie_gen=_try(nvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
            pcie_width=_try(nvml.nvmlDeviceGetCurrPcieLinkWidth, h),
            pcie_gen_max=_try(nvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
            pcie_width_max=_try(nvml.nvmlDeviceGetMaxPcieLinkWidth, h),
            numa_node=_numa_node(nvml, h, bus),
            cpu_affinity=_cpu_list(list(affinity)) if affinity is not None else None,
        ))

    # NVLinks per GPU: to each peer GPU directly, and to switches (counted per GPU).
    direct = [[0] * n for _ in range(n)]
    to_switch = [0] * n
    for i, h in enumerate(handles):
        for link in range(_MAX_LINKS):
            state = _try(nvml.nvmlDeviceGetNvLinkState, h, link)
            if state is None:
                break
            if state != getattr(nvml, "NVML_FEATURE_ENABLED", 1):
                continue
            remote = _try(nvml.nvmlDeviceGetNvLinkRemotePciInfo, h, link)
            rbus = _s(remote.busId).lower() if remote is not None else None
            if rbus in bus_ids and bus_ids.index(rbus) != i:
                direct[i][bus_ids.index(rbus)] += 1
            else:  # an NVSwitch (or a device NVML does not list): reachable by every switch user
                to_switch[i] += 1

    links = []
    for i in range(n):
        row = []
        for j in range(n):
            if i == j:
                row.append("X")
                continue
            nv = direct[i][j] or min(to_switch[i], to_switch[j])
            if nv:
                row.append(f"NV{nv}")
            else:
                level = _try(nvml.nvmlDeviceGetTopologyCommonAncestor, handles[i], handles[j])
                row.append(_relation(nvml, level))
        links.append(tuple(row))
    return Topology(gpus=tuple(gpus), links=tuple(links), source="nvml")
