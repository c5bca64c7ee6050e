"""`--resume`: measure only what the results file does not already hold as "ok".

    fabricbench sweep --engine torch --backend gloo --nprocs 2 --sizes 1K-1G --out r.jsonl --resume

--out is read through the one resume store (fabricbench/jobs/store.py): a torn last line is cut off with a
warning and measured again. A planned measurement is skipped when --out holds a record with the same key: the item (op, dtype,
requested bytes, in-place), where it ran (nranks, the GPUs, engine, backend, fabric) and the settings
that shape the number (every SweepConfig field except those that only choose the items, name the ranks
or bound the time; see SELECTING). The settings travel in each record as extra.settings, so a record
written before this existed, or with other settings (--iters, --check, --graph, a new option), is
measured again rather than trusted. Waived records of the same key are reused too, so that a resumed
run does not write them twice.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from fabricbench.jobs import store
from fabricbench.measuring.config import SweepConfig
from fabricbench.measuring.devices import nranks, resolve_devices, uses_gpus
from fabricbench.measuring.plan import PlanItem, build_plan
from fabricbench.results.status import REUSABLE, Status

# SweepConfig fields that select which items run, how many ranks, or only bound the time: not settings.
# A field not named here (a new option) is a setting by default, so it can only make resume measure more.
SELECTING = frozenset({"ops", "sizes", "dtype", "inplace", "gpus", "backend", "nprocs", "timeout_s", "seed"})


def settings(config: SweepConfig) -> dict[str, Any]:
    """The fields that change a measurement, as JSON values (recorded in every record's extra.settings)."""
    out = {}
    for f in dataclasses.fields(config):
        if f.name in SELECTING:
            continue
        v = getattr(config, f.name)
        out[f.name] = list(v) if isinstance(v, tuple) else v
    return out


def record_key(rec: dict[str, Any]) -> tuple | None:
    """A record's resume key, or None when it carries no settings (written before --resume existed)."""
    extra = rec.get("extra") or {}
    st = extra.get("settings")
    if not isinstance(st, dict):
        return None
    try:
        return (rec["op"], rec["dtype"], int(rec["requested_bytes"]), bool(rec["inplace"]), int(rec["nranks"]),
                tuple(rec.get("gpus") or ()), rec.get("backend"), rec.get("fabric"), _freeze(st))
    except (KeyError, TypeError, ValueError):
        return None


def item_key(item: PlanItem, config: SweepConfig, *, nranks: int, gpus: list[int], backend: str | None) -> tuple:
    return (item.op, item.dtype, int(item.requested_bytes), bool(item.inplace), int(nranks), tuple(gpus),
            backend, config.fabric, _freeze(settings(config)))


def _freeze(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    return v


def read_prior(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The reusable collective records of a results file (none when it does not exist yet), read through the
    one resume store: a torn last line is cut off with a warning and its measurement done again."""
    return [r for r in store.read_repaired(path) if r.get("kind") == "collective" and r.get("status") in REUSABLE]


@dataclass(kw_only=True)
class Resume:
    """What a resumed sweep may reuse. run_sweep calls on_skip(skipped, planned) once rank 0 has matched
    the plan (skipped counts "ok" records, not waived ones) and sets `skipped`."""

    records: list[dict[str, Any]] = field(default_factory=list)
    source: str | None = None  # the file they came from, for messages
    on_skip: Callable[[int, int], None] | None = None
    skipped: int = 0

    @classmethod
    def from_file(cls, path: str | os.PathLike, **kw: Any) -> "Resume":
        return cls(records=read_prior(path), source=str(path), **kw)


def match(plan: list[PlanItem], records: list[dict[str, Any]], config: SweepConfig, *, nranks: int,
          gpus: list[int], backend: str | None) -> dict[int, dict[str, Any]]:
    """Plan index -> the record that already holds it (the last one written, when several do)."""
    held = store.ResumeStore.of((r for r in records if r.get("status") in REUSABLE), key=record_key)
    out = {}
    for i, item in enumerate(plan):
        rec = held.get(item_key(item, config, nranks=nranks, gpus=gpus, backend=backend))
        # a waived record is reused only for an item that is still waived (and vice versa for ok)
        if rec is not None and (rec["status"] == Status.WAIVED) == (item.case is None):
            out[i] = rec
    return out


def skip_counts(plan: list[PlanItem], skipped) -> tuple[int, int]:
    """What on_skip is told: (measurements skipped, measurements planned); waived items count in neither."""
    return sum(1 for i in skipped if plan[i].case is not None), sum(1 for item in plan if item.case is not None)


def plan_held(config: SweepConfig, records: list[dict[str, Any]]) -> tuple[list[PlanItem], dict[int, dict[str, Any]]]:
    """The plan of `config` and the records that already hold its items (plan index -> record), for a parent
    that starts the sweep in a child and measures nothing itself (compare, scaling, sweep --fabric X): the
    GPUs and backend come from the config as this machine completes it, not from an open session."""

    config, _ = resolve_devices(config)
    n = nranks(config)
    gpus = list(config.gpus or ()) if uses_gpus(config) else []
    backend = config.backend if config.engine == "torch" else None
    plan = build_plan(config, n)
    return plan, match(plan, records, config, nranks=n, gpus=gpus, backend=backend)


def covering(records: list[dict[str, Any]], sweep: SweepConfig, *,
             where: dict[str, Any] | None = None) -> list[dict[str, Any]] | None:
    """For compare and scaling: the records that already hold every measurement of the child sweep
    `sweep` (its fabric included), in plan order, or None when one is missing (the child then runs
    whole). `where`: extra fields a record must also carry (e.g. the placement)."""

    if where:
        records = [r for r in records if all((r.get("extra") or {}).get(k) == v for k, v in where.items())]
    plan, held = plan_held(sweep, records)
    return [held[i] for i in range(len(plan))] if plan and len(held) == len(plan) else None
