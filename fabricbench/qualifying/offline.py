"""Judging a spec on results already measured (fabricbench's, or imported from nccl-tests / nvbandwidth):
nothing is run.

    fabricbench import old/*.log --out imported.jsonl --nranks 8
    fabricbench qualify --spec builtin:h200-sxm-8 --from imported.jsonl

The checks ask the context for measurements as always; this context answers from the records instead of
starting children. Imported DCGM diagnostics and NCCL RAS health become verdicts of their own (health.py). What the records cannot answer is waived with the reason (a topology or training
check, a pair of GPUs the records do not single out), never measured.
"""

from __future__ import annotations

from typing import Any

from fabricbench.jobs.configs import job_key
from fabricbench.measuring.p2p_run import P2PConfig
from fabricbench.qualifying import health
from fabricbench.qualifying.checks.common import READ_AT
from fabricbench.qualifying.context import Context, UnitResult, noted
from fabricbench.qualifying.units import SweepUnit
from fabricbench.training.config import TrainConfig

# Check kinds that read collective or copy records; the others need a machine or a run (waived).
JUDGED = ("collective", "correctness", "transport", "p2p", "host_copy", "nccl_diag")
NEAR = 0.01  # a record stands for a spec size within 1% (nccl-tests rounds sizes to whole elements per rank)
# A floor at a size the file lacks is read at its largest size below, down to a quarter of it: busbw is
# near its plateau there on any fabric worth a floor; a CPU sweep's 8M says nothing of a 16G GPU floor.
READ_BELOW = 4


class OfflineContext(Context):
    offline = True  # the checks judge what the records hold: a size or figure they lack is not measured here

    def __init__(self, spec, *, records: list[dict[str, Any]], source: str, **kw: Any) -> None:
        super().__init__(spec, **kw)
        self.records = records
        self.source = source

    def skip_reason(self, kind: str) -> str | None:
        """Why a check of this kind is waived here: it needs the machine, or the records hold nothing it reads
        (what is missing was not measured there: a waiver, not an error that sends someone to the node)."""
        if kind not in JUDGED:
            return f"judged from {self.source}: a {kind} check needs this machine or a run, not recorded results"
        if kind == "nccl_diag":  # the check says itself what is missing (and how to produce it)
            return None
        wanted = {"p2p": ("copy", "peer"), "host_copy": ("copy", "host")}.get(kind, ("collective", None))
        if not any(r.get("kind") == wanted[0] and (wanted[1] is None or r.get("copy_kind") == wanted[1])
                   for r in self.records):
            what = f"{wanted[1]} copy" if wanted[1] else "collective"
            return f"judged from {self.source}: it holds no {what} record for a {kind} check"
        return None

    def topology(self):
        return None

    def health_verdicts(self):
        """Verdicts of the imported DCGM diagnostics and NCCL RAS health the records hold (health.py)."""
        return health.verdicts(self.records, self.source)

    def visible_gpus(self) -> int:
        n = [r.get("nranks") or 0 for r in self.records if r.get("kind") == "collective"]
        g = [int(x[3:]) + 1 for r in self.records if r.get("kind") == "copy" for x in (r.get("src"), r.get("dst"))
             if isinstance(x, str) and x.startswith("GPU") and x[3:].isdigit()]
        return max(n + g, default=0)

    def gpu_sets(self, want):
        if want != "all":
            return [], (f"judged from {self.source}: the records do not single out GPU sets (gpus = \"all\" "
                        f"only)")
        return [None], None

    @noted
    def sweep(self, unit: SweepUnit) -> UnitResult:
        key = unit.key
        if key not in self._units:
            self._units[key] = self._answer(unit, key)
        return self._units[key]

    @noted
    def copies(self, gpus: tuple[int, ...], size: int, *, peers: bool, host: bool) -> UnitResult:
        key = job_key(P2PConfig(gpus=",".join(map(str, gpus)), size=size, no_peer=not peers, no_host=not host))
        if key not in self._units:
            kinds = {"peer"} if peers and not host else {"host"} if host and not peers else {"peer", "host"}
            recs = [r for r in self.records if r.get("kind") == "copy" and r.get("copy_kind") in kinds
                    and (r.get("bytes") is None or _near(r["bytes"], size))]
            self._units[key] = UnitResult(key=key, records=recs, reused=True,
                                          waived=None if recs else f"no copy record in {self.source}")
        return self._units[key]

    @noted
    def train(self, job: TrainConfig) -> UnitResult:
        return UnitResult(key=job_key(job), waived=self.skip_reason("train"), reused=True)

    def _answer(self, unit: SweepUnit, key: str) -> UnitResult:
        colls = [r for r in self.records if r.get("kind") == "collective" and r.get("op") in unit.ops
                 and (r.get("dtype") or unit.dtype) == unit.dtype]
        fabrics = {r.get("fabric") or "default" for r in colls}
        mine = [r for r in colls if (r.get("fabric") or "default") == unit.fabric]
        if not mine and len(fabrics) == 1 and unit.fabric == "default":
            mine = colls  # one fabric in the file, under the label --fabric gave at import: it is the node's
        if unit.check:
            mine = [r for r in mine if r.get("wrong") is not None] or mine
        out = []
        for size in unit.sizes:
            for op in unit.ops:
                near = [(i, r) for i, r in enumerate(mine)
                        if r.get("op") == op and r.get("bytes") and _near(r["bytes"], size)]
                # the plain (out-of-place) record of a size, the closest, the latest where several hold it
                plain = [(i, r) for i, r in near if not r.get("inplace")] or near
                if plain:
                    _, best = min(plain, key=lambda ir: (abs(ir[1]["bytes"] - size), -ir[0]))
                    out.append({**best, "requested_bytes": size, "inplace": False})
                    continue
                # a size the file stops short of: its largest size below stands in, for a floor to read
                below = [(i, r) for i, r in enumerate(mine) if r.get("op") == op and r.get("bytes")
                         and size / READ_BELOW <= r["bytes"] < size and r.get("busbw_gbps") is not None]
                plain = [(i, r) for i, r in below if not r.get("inplace")] or below
                if plain:
                    _, best = max(plain, key=lambda ir: (ir[1]["bytes"], ir[0]))
                    out.append({**best, "requested_bytes": size, "inplace": False, READ_AT: best["bytes"]})
        if not out:
            have = ", ".join(sorted(fabrics)) or "none"
            return UnitResult(key=key, reused=True, waived=f"{self.source} holds no {'/'.join(unit.ops)} "
                                                           f"{unit.dtype} record at these sizes (fabrics: {have})")
        transport = next((r.get("transport") for r in out if r.get("transport")), None)
        return UnitResult(key=key, records=out, transport=transport, reused=True)


def _near(nbytes: int, size: int) -> bool:
    return abs(nbytes - size) <= NEAR * size
