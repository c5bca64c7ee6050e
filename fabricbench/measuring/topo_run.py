"""`fabricbench.topo`: GPU links, NVLink islands and placement advice, as `fabricbench topo` shows them.

    fabricbench topo --gpus 0-3 --json
    r = fabricbench.topo(fabricbench.TopoConfig(topo_file="saved-topo-m.txt"))
    r.topology.islands, r.advice

The topology itself is topology/'s; this module is the command's one config and result. It sits with the
measuring commands because the record it appends to --out carries a run id as theirs do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fabricbench.errors import expect_config
from fabricbench.declare import check, declare, of, shared
from fabricbench.files import refuse_collisions
from fabricbench.gpus import parse_gpus
from fabricbench.measuring.config import SweepConfig
from fabricbench.measuring.runner import new_run_id
from fabricbench.results.writer import ResultWriter
from fabricbench.topology import TOPO_FILE, Topology, snapshot_record, topology_for


@dataclass(frozen=True, kw_only=True)
class TopoConfig:
    """Which topology to show and where its record goes; checked once, here, for the CLI and the library."""

    # NVML indices, as a GPU list text (0-3,6) or the indices (kept as the text); None: every GPU
    gpus: str | tuple[int, ...] | None = field(default=None, metadata=shared(
        of(SweepConfig, "gpus"), help="GPU list to show (NVML indices): 0-7, 0,2,5."))
    # a saved `nvidia-smi topo -m` output (or `topo --json`); None: this machine's
    topo_file: str | None = field(default=None, metadata=shared(
        TOPO_FILE, aliases=("--from-file",), help="Parse a saved `nvidia-smi topo -m` output."))
    out: str | None = field(default=None, metadata=declare(  # JSONL, appended to
        "--out", "output file", "Append the topology record to this JSONL file."))

    def __post_init__(self) -> None:
        if self.gpus is not None and not isinstance(self.gpus, str):
            object.__setattr__(self, "gpus", ",".join(str(int(g)) for g in self.gpus))
        check(self)
        if self.gpus is not None:
            parse_gpus(self.gpus)  # the list's syntax before any topology is read
        refuse_collisions({"--out": self.out}, {"--topo-file": self.topo_file})


@dataclass(frozen=True, kw_only=True)
class TopoResult:
    topology: Topology  # cut to config.gpus
    advice: list[dict[str, Any]]  # for each job size: the GPU sets that stay inside one NVLink island
    summary: str  # one line
    record: dict[str, Any] | None = None  # the "topology" record appended to config.out, when one was given

    def to_dict(self) -> dict[str, Any]:
        """What `fabricbench topo --json` prints."""
        return {**self.topology.to_dict(), "advice": self.advice, "summary": self.summary}


def topo(config: TopoConfig) -> TopoResult:
    """The topology of config.topo_file (or this machine's), its advice, and its record appended to config.out."""
    expect_config(config, TopoConfig, "topo")
    writer = ResultWriter(config.out) if config.out else None  # opened (so checked) before anything is read
    t = topology_for(config.topo_file, config.gpus)
    advice, summary = t.advice(), t.summary()
    rec = None
    if writer is not None:
        rec = snapshot_record(new_run_id(), topo=t)
        if rec is not None:
            rec["advice"] = advice
            writer.write(rec)
        writer.close()
    return TopoResult(topology=t, advice=advice, summary=summary, record=rec)
