"""Which units a study runs, and in which order (how long each takes: studying/durations.py).

    fabricbench study --device cpu --nprocs 2 --fabrics default,shaped:1gbit --model tiny-mistral \
        --out lab/ --dry-run

Order: the machine; the batch (picked on GPUs when none is given); the estimate; train on the first
fabric (its traces say what each strategy sends); a sweep per fabric (sizes covering those traces);
scaling inside and across NVLink islands when the GPUs span islands; across nodes, each sweep again
inside node 0 ("intra-node sweep @ F", not related: the report sets it against the sweep across nodes);
train on the other fabrics; the repeat rounds of train; relate; the summary (rankings with ties, slowdowns
with intervals). A unit that cannot measure anything here is waived with its reason when the plan is made
(waived()): a fabric that changes nothing on the study's backend (the rule compare applies), the
intra-node sweep at one rank per node.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fabricbench.fabrics import get_fabric
from fabricbench.measuring.child import waiver
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.units import INTRA, Unit
from fabricbench.topology import cuda_to_nvml


def has_islands(config: StudyConfig, topo: Any) -> bool:
    """Whether a scaling unit has something to compare: GPUs of this study in more than one NVLink island,
    or a non-uniform set of 3+ GPUs."""
    if config.device != "cuda" or topo is None or len(config.gpus) < 3:
        return False
    try:
        sub = topo.subset(cuda_to_nvml(tuple(config.gpus), topo))
    except Exception:  # a topology that does not name these GPUs: nothing to choose sets from
        return False
    return not sub.uniform


def build_plan(config: StudyConfig, topo: Any = None) -> list[Unit]:
    """The units of a validated config, in run order.

    Train runs repeat in rounds, each round every (fabric, strategy) once (A B C A B C), so that a drift of
    the machine hits all alike; the first round keeps the plain unit names ("train ddp @ default"), later
    ones are "train ddp @ default #2". Rounds past config.min_rounds run only where the run-to-run CI is
    not yet within target (units.py decides when the unit starts). At one rank no collective runs, so
    there is nothing to sweep or relate: no sweep units then. Durations are left to durations.estimate."""
    units: list[Unit] = [Unit(name="machine", kind="machine")]
    if config.batch_size is None:
        units.append(Unit(name="batch", kind="batch"))
    units.append(Unit(name="estimate", kind="estimate"))
    # fabric names, never specs: a custom fabric's values stay out of unit names, file names and argv
    first, rest = config.fabric_names[0], list(config.fabric_names[1:])

    span = config.nnodes > 1  # across nodes: train and sweep are jobs of every node's ranks (studying/nodes.py)

    def train(s: str, f: str, r: int) -> Unit:
        return Unit(name=f"train {s} @ {f}" + (f" #{r}" if r > 1 else ""), kind="train", fabric=f, strategy=s,
                    repeat=r, span=span)

    units += [train(s, first, 1) for s in config.strategies]
    if config.world_size > 1:
        for f in config.fabric_names:
            units.append(Unit(name=f"sweep @ {f}", kind="sweep", fabric=f, span=span))
            if span:  # the same sweep inside node 0: intra- against inter-node (waived at one rank per node)
                units.append(Unit(name=f"{INTRA} @ {f}", kind="sweep", fabric=f))
    if has_islands(config, topo):
        units.append(Unit(name=f"scaling @ {first}", kind="scaling", fabric=first))
    units += [train(s, f, 1) for f in rest for s in config.strategies]
    for r in range(2, config.rounds + 1):
        units += [train(s, f, r) for f in config.fabric_names for s in config.strategies]
    units.append(Unit(name="relate", kind="relate"))
    units.append(Unit(name="summary", kind="summary"))
    names = [u.name for u in units]
    assert len(set(names)) == len(names), names
    return [dataclasses.replace(u, waived=why) if (why := waived(config, u)) else u for u in units]


def backend(config: StudyConfig) -> str:
    """The backend every collective of the study's sweep and train units goes through."""
    return "gloo" if config.device == "cpu" else "nccl"


def fabric_waiver(config: StudyConfig, name: str) -> str | None:
    """Why the study's fabric `name` would change nothing here: measuring.child.waiver, the rule compare
    and sweep --fabric apply (p2p-off on gloo ranks), so that no command measures such a fabric."""
    spec = next(s for s in config.fabrics if get_fabric(s).name == name)
    return waiver(get_fabric(spec), engine="torch", backend=backend(config))


def waived(config: StudyConfig, unit: Unit) -> str | None:
    """Why `unit` cannot measure anything here, decided with the plan (so --dry-run says it too); None: it runs."""
    if unit.name.startswith(INTRA) and config.ranks_per_node < 2:
        return (f"one rank per node: a collective inside a node needs 2 ranks there, so only the sweep across "
                f"the {config.nnodes} nodes runs")
    if unit.fabric is not None and unit.kind in ("train", "sweep", "scaling"):
        return fabric_waiver(config, unit.fabric)
    if unit.kind == "relate" and config.world_size > 1 and len(config.fabrics) > 1:
        live = [f for f in config.fabric_names if not fabric_waiver(config, f)]
        if len(live) < 2:
            return (f"relate explains the slowdown between fabrics, and here only {len(live)} of the "
                    f"{len(config.fabrics)} can be measured ({', '.join(live) or 'none'}; the others are waived)")
    return None
