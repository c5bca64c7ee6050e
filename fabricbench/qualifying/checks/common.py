"""Helpers the measuring check kinds share: the keys that say where a collective runs, the sweep of one
GPU set, and the subject label a verdict item names.

    [[check]]
    kind = "collective"
    gpus = "each_pair"        # or "all", "each_island", [[0,1],[2,3]]
    fabric = "default"        # or "p2p-off", "shaped:1gbit", "name:VAR=VAL"
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from fabricbench.qualifying.fields import Field
from fabricbench.qualifying.units import Measurements, SweepUnit
from fabricbench.qualifying.verdict import Item, error, waived
from fabricbench.sizes import format_size

# A record that stands in for a size the recorded results (--from) lack: the largest size below it, with
# the size it was measured at under this key. Only a floor reads it (busbw rises with size, so a pass at a
# smaller size holds at the size wanted); a latency or a spread at another size says nothing.
READ_AT = "read_at_bytes"

WHERE = {
    "gpus": Field("gpu_sets", "where it runs: all, each_island, each_pair, or GPU lists", default="all"),
    "fabric": Field("fabric", "the fabric (NCCL environment) it runs under", default="default"),
    "dtype": Field("dtype", "element type", default="float32"),
}


def per_gpu_set(check, ctx, judge_set: Callable[[tuple[int, ...] | None], list[Item]]) -> list[Item]:
    """A check judged on every GPU set its `gpus` names (ctx.gpu_sets), the items of each set in order;
    one item saying why when the sets cannot be formed here."""
    sets, why = ctx.gpu_sets(check.params["gpus"])
    if why:
        return [not_here("gpus", why)]
    return [item for gpus in sets for item in judge_set(gpus)]


def sweep(ctx: Measurements, gpus: tuple[int, ...] | None, *, fabric: str, ops: Iterable[str], sizes: Iterable[int],
          dtype: str, check: bool = False):
    """One GPU set's sweep (measured, reused from --resume or read from --from: the context decides)."""
    return ctx.sweep(SweepUnit(fabric=fabric, ops=tuple(ops), sizes=tuple(sizes), dtype=dtype, gpus=gpus,
                               check=check, run=ctx.run))


def not_here(criterion: str, why: str) -> Item:
    """A GPU set that cannot be formed: an error when the spec's GPUs are missing, else waived."""
    if why.startswith("error: "):
        return error(criterion, why[len("error: "):])
    return waived(criterion, why)


def subject(gpus: tuple[int, ...] | None, ctx, fabric: str = "default") -> str:
    if gpus is None and ctx.distributed:
        import os

        where = f"all {os.environ.get('WORLD_SIZE')} ranks of the launch"
    elif gpus is None:
        where = f"{ctx.run.nprocs} gloo ranks" if ctx.run.cpu_ranks else "all ranks"
    else:
        where = ("GPU " if len(gpus) == 1 else "GPUs ") + ",".join(map(str, gpus))
    return where if fabric == "default" else f"{where} [{fabric}]"


def unit_problem(criterion: str, res, subj: str) -> Item | None:
    """The item a unit that could not measure gives (waived or error), else None."""
    if res.waived:
        return waived(criterion, res.waived, subject=subj)
    if res.error and not res.records:
        return error(criterion, f"the measurement failed: {res.error}", subject=subj)
    return None


def by_size(records: list[dict[str, Any]], op: str, *, stand_ins: bool = False) -> dict[int, dict[str, Any]]:
    """Out-of-place records of one op by requested size (what the spec names); with `stand_ins`, also
    the records read at a smaller size for a size the recorded results lack (READ_AT)."""
    return {r["requested_bytes"]: r for r in records
            if r.get("kind") == "collective" and r.get("op") == op and not r.get("inplace")
            and (stand_ins or r.get(READ_AT) is None)}


def source_tool(records: list[dict[str, Any]]) -> str | None:
    """The tool whose output the records were imported from (nccl-tests, nvbandwidth), where every one
    was: a figure such a format does not carry is not measured by that source, not a failed measurement."""
    tools = {(r.get("source") or {}).get("tool") if isinstance(r.get("source"), dict) else None for r in records}
    return tools.pop() if len(tools) == 1 and None not in tools else None


def absent(criterion: str, size: int, op: str, ctx, subject: str) -> Item:
    """A size the recorded results (--from) do not hold: waived, saying the size wanted and those held."""
    held = sorted({r["bytes"] for r in ctx.records if r.get("kind") == "collective" and r.get("op") == op
                   and isinstance(r.get("bytes"), int) and r["bytes"] > 0})
    have = (f"its sizes run {format_size(held[0])}-{format_size(held[-1])}" if len(held) > 1
            else f"its one size is {format_size(held[0])}" if held else "it holds no size")
    return waived(criterion, f"not measured by this source: {ctx.source} holds no {op} record at "
                             f"{format_size(size)} "
                             f"({have})", subject=subject)


def nccl_facts(rec: dict[str, Any]) -> str | None:
    """What NCCL ran a measurement with, where the record knows: NVLS (NVLink SHARP, from NCCL's log) and
    the algorithm and protocol (NCCL_ALGO / NCCL_PROTO when set, else NCCL's own choice per size).
    A busbw floor such as 431 GB/s for 8x H200 assumes NVLS on; with it off ~367 GB/s is healthy.
    Records before the nvls/nccl_algo/nccl_proto fields keep them in transport_detail and env."""
    extra = rec.get("extra") if isinstance(rec.get("extra"), dict) else {}
    detail = extra.get("transport_detail") if isinstance(extra.get("transport_detail"), dict) else {}
    env = rec.get("env") if isinstance(rec.get("env"), dict) else {}
    nvls = rec.get("nvls")
    if not isinstance(nvls, bool) and detail.get("log_lines"):
        nvls = detail.get("nvls")
    parts = [f"NVLS {'on' if nvls else 'off'}"] if isinstance(nvls, bool) else []
    for field, var, what in (("nccl_algo", "NCCL_ALGO", "algorithm"), ("nccl_proto", "NCCL_PROTO", "protocol")):
        value = rec.get(field) if isinstance(rec.get(field), str) else env.get(var)
        if isinstance(value, str):
            parts.append(f"{what} {value}")
    if parts and not any(p.startswith("algorithm") for p in parts):
        parts.append("algorithm and protocol NCCL's choice")
    return ", ".join(parts) or None
