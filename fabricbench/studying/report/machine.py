"""The study report's section "The machine": processors, GPU links, library versions, and each fabric with
the transport it really used."""

from __future__ import annotations

from typing import Any

from fabricbench.fabrics import get_fabric
from fabricbench.reporting.document import Document
from fabricbench.results.schema import CollectiveResult, TrainResult
from fabricbench.results.status import Status
from fabricbench.studying import figures
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.report.common import Figs


def machine_section(doc: Document, sr, c: StudyConfig, machine, colls: list[CollectiveResult], trains: list[TrainResult],
             figs: Figs) -> None:
    s = doc.section("The machine", intro="Where the numbers come from: the processors, the wiring between the "
                                         "GPUs, the library versions, and each fabric with the transport it "
                                         "really used.")
    if machine is None:
        s.text("The machine unit did not finish; its facts are missing (see “Reproduce”).")
    else:
        v = machine.get("versions") or {}
        items = [f"host `{machine.get('host')}`, {machine.get('cpu_count')} CPU cores ({machine.get('cpu_model')}), "
                 f"{machine.get('platform')}"]
        if machine.get("gpus"):
            kinds: dict[tuple, list[int]] = {}
            for g in machine["gpus"]:  # identical GPUs on one line
                kinds.setdefault((g["name"], g["memory_total_bytes"], g.get("capability")), []).append(g["ordinal"])
            for (name, mem, cap), ords in kinds.items():
                items.append(f"{len(ords)} × {name} (GPU {','.join(map(str, ords))}), {mem / 1e9:.1f} GB each, "
                             f"compute capability {cap}")
        else:
            items.append(f"no GPU: {c.nprocs} gloo rank(s) on this host's CPUs (the CPU fabric lab)")
        names = {"cuda_driver": "NVIDIA driver", "torch_cuda": "CUDA (torch)", "nccl_torch": "NCCL (torch)",
                 "torch": "torch", "accelerate": "accelerate", "transformers": "transformers",
                 "deepspeed": "DeepSpeed", "fabricbench": "fabricbench"}
        items.append(", ".join(f"{label} {v[k]}" for k, label in names.items() if v.get(k)))
        s.bullets(items)
        topo = machine.get("topology")
        if topo and len(topo.get("links") or []) == 1:
            s.text("One GPU: no GPU-to-GPU link, no NVLink island boundary; collectives have no peer (n = 1).")
        elif topo and topo.get("links"):
            labels = [f"GPU{g['index']}" for g in topo["gpus"]]
            s.table([""] + labels, [[lab] + list(row) for lab, row in zip(labels, topo["links"])],
                    caption="Link between every pair of GPUs (nvidia-smi topo -m: NV# = # bonded NVLinks; "
                            "PIX < PXB < PHB < NODE < SYS = more PCIe hops)")
            p = figs.path("topology")
            figures.link_matrix(labels, topo["links"], topo.get("islands") or [], p)
            s.figure(p, "The topology matrix; NVLink islands in the title. A job inside one island runs at "
                        "NVLink speed; one that spans islands runs at the speed of its slowest hop.")
            s.text("NVLink islands: " + ", ".join("[" + ",".join(map(str, i)) + "]" for i in topo.get("islands") or [])
                   + ("; every pair alike (uniform)." if topo.get("uniform") else "."))
        elif c.device == "cuda":
            s.text("No topology could be read (NVML and nvidia-smi did not answer).")
    rows, variables = [], []
    for f in c.fabrics:
        mine = [r for r in colls if r.fabric == f]
        # the fabric's facts, which every study record carries (studying/runner._facts), from a train run where no
        # sweep finished; the transport only from collectives (NCCL's log is read for those alone)
        r0 = next(iter(mine or [r for r in trains if r.fabric == f]), None)
        transports = sorted({r.transport for r in mine if r.transport})
        mismatch = sorted({r.transport_mismatch for r in mine if r.transport_mismatch})
        env = _fact(r0, "fabric_env")
        if env is None:  # records from before fabric facts were recorded: the fabric's own definition
            try:
                env = get_fabric(f).variables
            except Exception:
                env = {}
        rate = _fact(r0, "shaped_rate_bps")
        units = [u for u in sr.units.values() if u.get("fabric") == f and u.get("unit_kind") in ("sweep", "train")]
        status = Status.OK if units and all(u["status"] == Status.OK for u in units) else \
            (sorted({u["status"] for u in units})[0] if units else "not run")
        used = ", ".join(transports) or ("gloo over loopback" if c.device == "cpu" else
                                         "none (one rank: no peer)" if c.world_size < 2 else "not recorded")
        if mismatch:
            used += " — MISMATCH: " + "; ".join(mismatch)
        rows.append([f, f"{rate / 1e9:g} Gbit/s (tc on the loopback of a namespace)" if rate else "-", used, status])
        variables.append(f"**{f}** sets " + (", ".join(f"`{k}={v}`" for k, v in env.items()) if env else "nothing")
                         + (f"; ran in network namespace `{r0.netns}`" if r0 and r0.netns else ""))
    s.table(["fabric", "shaping", "transport really used", "units"], rows, status_col=3,
            caption="The fabrics, and what the collectives really ran over")
    s.bullets(variables)


def _fact(r: CollectiveResult | TrainResult | None, name: str) -> Any:
    """A fabric fact of a record (fabric_env, shaped_rate_bps), None where it has none or it never ran."""
    if isinstance(r, TrainResult):
        return r.reached(name)
    return getattr(r, name) if r is not None else None
