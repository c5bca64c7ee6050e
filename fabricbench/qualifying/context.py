"""What a check's judge may ask for: the topology, the GPU sets, and measurements, each run once.

    fabricbench qualify --spec node.toml --out q/

Every measurement is a *unit*: one child `fabricbench sweep` (or `p2p`, or `train`) under one fabric, in
a fresh process (NCCL reads its environment once per process), with a wall-clock limit. Two checks that
need the same unit share it. Each unit's records are appended to DIR/results.jsonl as they come back,
tagged extra.qualify_unit = its key, and closed by a kind "qualify_unit" record (its error, transport,
waiver); `--resume` reuses every closed unit and runs only the rest.

Under torchrun/srun (RANK and WORLD_SIZE set), sweeps run in this process across all ranks instead (the
engine's rank-per-process mode); every rank makes the same calls in the same order, rank 0 records.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable

import fabricbench.gpus  # looked up on call: tests stand in for visible_gpu_count
from fabricbench.errors import FabricbenchError
from fabricbench.jobs import store
from fabricbench.jobs.configs import job_key, to_argv
from fabricbench.measuring.devices import make_config, resolve_devices
from fabricbench.measuring import runner
from fabricbench.measuring.child_sweeps import adopt
from fabricbench.measuring.p2p_run import P2PConfig
from fabricbench.qualifying import children
from fabricbench.qualifying.children import UnitResult
from fabricbench.qualifying.spec import Spec
from fabricbench.qualifying.units import SweepUnit
from fabricbench.qualifying.verdict import NO_GPU
from fabricbench.results.schema import header
from fabricbench.topology import read_topology
from fabricbench.training.config import TrainConfig


def noted(measure: Callable[..., UnitResult]) -> Callable[..., UnitResult]:
    """A measurement that joins `used`: the units the check being judged read (api._judge asks whether
    the host was busy while they measured)."""
    def wrapper(self, *args: Any, **kw: Any) -> UnitResult:
        res = measure(self, *args, **kw)
        self.used.append(res)
        return res

    wrapper.__doc__ = measure.__doc__
    return wrapper


class Context:
    offline = False  # recorded results (offline.OfflineContext) measure nothing: no retry can be quieter

    def __init__(self, spec: Spec, *, writer, run_id: str, topo_file: str | None = None,
                 previous: list[dict[str, Any]] | None = None, echo: Callable[[str], None] | None = None) -> None:
        self.spec = spec
        self.run = spec.run
        self.writer = writer
        self.run_id = run_id
        self.topo_file = topo_file
        self.echo = echo or (lambda s: None)
        self._units: dict[str, UnitResult] = {}
        self._topo: Any = ...
        self._previous = _closed_units(previous or [])
        self.attempt = 0  # a retry (api._judge) measures afresh: its units get keys of their own
        self.used: list[UnitResult] = []  # the units read since the judge of one check began (noted)
        self.records: list[dict[str, Any]] = []  # what `--from` gave (offline.OfflineContext); none here
        self.source = "this machine"
        self.distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
        self.rank = int(os.environ.get("RANK", "0")) if self.distributed else 0

    # -- what the machine is ---------------------------------------------------------------------
    def topology(self):
        """The GPU topology (--topo-file, else NVML / nvidia-smi), or None when nothing answers."""
        if self._topo is ...:
            self._topo = read_topology(self.topo_file, what="--topo-file")
        return self._topo

    def visible_gpus(self) -> int:
        return fabricbench.gpus.visible_gpu_count()

    def skip_reason(self, kind: str) -> str | None:
        """Why no check of `kind` can be judged here, said once for the run (verdict.NO_GPU): a GPU spec on
        a machine with none, where only a topology check on a saved --topo-file has anything to judge."""
        if self.run.cpu_ranks or self.distributed or (kind == "topology" and self.topo_file is not None):
            return None
        return NO_GPU if self.visible_gpus() == 0 else None

    def gpu_sets(self, want) -> tuple[list[tuple[int, ...] | None], str | None]:
        """The GPU sets a collective runs on, or ([], why it cannot apply here)."""
        if self.run.cpu_ranks or self.distributed:
            if want != "all":
                where = "gloo ranks drive no GPU" if self.run.cpu_ranks else "a torchrun launch runs on its ranks"
                return [], f"{where}: gpus = {_show(want)} does not apply (only \"all\")"
            return [None], None
        n = self.visible_gpus()
        if n == 0:
            return [], "error: no CUDA GPU is visible here (the spec runs on GPUs: engine = \"native\")"
        if want == "all":
            return [tuple(range(n))], None
        if want == "each_pair":
            if n < 2:
                return [], f"{n} GPU visible: a pair check needs at least 2"
            return [(a, b) for a in range(n) for b in range(a + 1, n)], None
        if want == "each_island":
            topo = self.topology()
            if topo is None:
                return [], "error: no topology (NVML and nvidia-smi did not answer) to find the islands"
            isl = [tuple(i) for i in topo.islands() if len(i) > 1 and max(i) < n]
            if not isl:
                return [], f"no NVLink island of 2 or more GPUs among the {n} visible"
            return isl, None
        sets = [s for s in want if max(s) < n]
        if not sets:  # the GPU count itself is the topology check's to judge
            return [], (f"gpus = {_show(want)} names GPUs beyond the {n} visible here (0-{n - 1}); "
                        f"a topology check judges the count")
        return sets, None

    # -- measurements ----------------------------------------------------------------------------
    def retry(self, attempt: int) -> None:
        """Measure afresh from here on: units get new keys, NVML is asked again (a saved file is not)."""
        self.attempt = attempt
        if self.topo_file is None:
            self._topo = ...

    def _fresh(self, key: str) -> str:
        return key if not self.attempt else f"{key}-try{self.attempt + 1}"

    @noted
    def sweep(self, unit: SweepUnit) -> UnitResult:
        key = self._fresh(unit.key)
        if key in self._units:
            return self._units[key]
        if key in self._previous:
            res = self._previous[key]
        elif self.distributed:
            res = self._sweep_here(unit, key)
        else:
            sweep = unit.config  # its fabric is no option: run_child names it (and --out)
            self.echo(f"measuring: sweep {' '.join(to_argv(sweep))} (fabric {unit.fabric})")
            res = children.sweep_under(unit.fabric, sweep, key=key, wall_timeout_s=self.run.unit_timeout_s,
                                       on_record=lambda rec: self._write(rec, key))
        return self._keep(res)

    @noted
    def copies(self, gpus: tuple[int, ...], size: int, *, peers: bool, host: bool) -> UnitResult:
        job = P2PConfig(gpus=",".join(map(str, gpus)), size=size, iters=self.run.iters, warmup=self.run.warmup,
                        no_peer=not peers, no_host=not host)
        key = self._fresh(job_key(job))
        if key in self._units:
            return self._units[key]
        if key in self._previous:
            return self._keep(self._previous[key])
        self.echo(f"measuring: p2p {' '.join(to_argv(job))}")
        return self._keep(children.run_command(job, key=key, kind="copy", wall_timeout_s=self.run.unit_timeout_s))

    @noted
    def train(self, job: TrainConfig) -> UnitResult:
        args = to_argv(job)
        key = self._fresh(job_key(job))
        if key in self._units:
            return self._units[key]
        if key in self._previous:
            return self._keep(self._previous[key])
        self.echo(f"measuring: train {' '.join(args)}")
        return self._keep(children.run_command(job, key=key, kind="train", wall_timeout_s=self.run.unit_timeout_s))

    def _sweep_here(self, unit: SweepUnit, key: str) -> UnitResult:
        """Under torchrun: every rank runs the sweep; rank 0 gets the records. Each unit is a sweep of its
        own in the launch's ranks (ranks.dist_from_env gives each call its own store prefix)."""
        from types import SimpleNamespace

        if unit.fabric != "default":
            return UnitResult(key=key, waived=f"fabric {unit.fabric}: a torchrun launch runs under the "
                                              f"launcher's environment; qualify fabrics per node")
        records: list[dict[str, Any]] = []
        try:
            fields: dict[str, Any] = dict(ops=list(unit.ops), sizes=list(unit.sizes), dtype=unit.dtype,
                                          iters=self.run.iters, warmup=self.run.warmup, engine=self.run.engine,
                                          backend=self.run.backend, check=unit.check, timeout_s=self.run.timeout_s)
            # GPU engines: each rank drives GPU LOCAL_RANK of the GPUs visible to it (the engines decide)
            config, _ = resolve_devices(make_config(**fields))
            runner.run_sweep(config, writer=SimpleNamespace(write=records.append))  # rank 0's records, as written
        except FabricbenchError as e:
            return UnitResult(key=key, records=records, error=f"{type(e).__name__}: {e}")
        return UnitResult(key=key, records=records)

    def _write(self, rec: dict[str, Any], key: str) -> dict[str, Any]:
        """A child's record joins this run (its own run id kept in extra.child_run_id) and is appended."""
        rec = adopt(rec, self.run_id)
        rec["extra"]["qualify_unit"] = key
        if self.rank == 0:
            self.writer.write(rec)
        return rec

    def _keep(self, res: UnitResult) -> UnitResult:
        """Remember a unit; append its records (unless streamed) and its closing record."""
        self._units[res.key] = res
        if res.reused or self.rank != 0:
            return res

        if not res.streamed:
            res.records = [self._write(rec, res.key) for rec in res.records]
        self.writer.write({**header("qualify_unit", run_id=self.run_id), **res.to_record()})
        return res


def _closed_units(records: list[dict[str, Any]]) -> dict[str, UnitResult]:
    """Units a previous run of the same --out settled (their closing record says ok or waived), for --resume;
    a unit that failed is measured again. Records from before units had a status get it from `error`."""
    units = [r if r.get("status") else {**r, "status": UnitResult(key="", error=r.get("error"),
                                                                  waived=r.get("waived")).status}
             for r in records if r.get("kind") == "qualify_unit"]
    held = store.ResumeStore.of(units, key=lambda r: r.get("key"))
    out: dict[str, UnitResult] = {}
    for key in held.keys():
        c = held.reusable(key)
        if c is None:
            continue
        recs = [r for r in records if (r.get("extra") or {}).get("qualify_unit") == key
                and r.get("kind") != "qualify_unit"]
        out[key] = UnitResult(key=key, records=recs, waived=c.get("waived"), transport=c.get("transport"),
                              mismatch=c.get("transport_mismatch"), facts=c.get("facts") or {}, reused=True)
    return out


def _show(v) -> str:
    if isinstance(v, (list, tuple)):
        return json.dumps([list(x) if isinstance(x, tuple) else x for x in v]) if v and isinstance(
            v[0], (list, tuple)) else json.dumps(list(v))
    return json.dumps(v)
