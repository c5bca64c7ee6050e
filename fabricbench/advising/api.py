"""`fabricbench.advise`: one recommendation (GPU set and strategy), its reasons and a runner-up.

    import fabricbench
    a = fabricbench.advise(fabricbench.AdviseConfig(model="mistral-7b", num_gpus=4, topo_file="box.txt",
                                                    gpu_memory="80GB"))
    a.placement, a.strategy, a.reasons, a.runner_up
    a.placements    # every GPU set of size N, best busbw first (equal ones folded)
    a.strategies    # per strategy: memory verdict, volume, T_comm (and T_step) on the recommended set

The decision: the placement with the highest busbw (measured, else from link types); on it, among the
strategies whose memory fits (verdict "fits" before "tight"), the fastest by predicted step time (relate's
model) or, lacking a calibration, by communication time. Strategies within EVEN of the fastest count as
even; among even ones the simplest (the order DDP, ZeRO-1, ZeRO-2, ZeRO-3, FSDP) wins, as the reference
study found DDP a few percent faster wherever it fits. The runner-up is the next strategy on that set.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fabricbench
from fabricbench.advising.config import AdviseConfig, parse_memory
from fabricbench.advising.memory import MemoryFit, capacity_from_name, fits
from fabricbench.advising.strategy import StrategyTime, predict
from fabricbench.errors import UsageError, expect_config
from fabricbench.statistics.comparison import Comparison
from fabricbench.results import records as result_records
from fabricbench.results.schema import CollectiveResult, TrainResult
from fabricbench.sizes import format_gib
from fabricbench.studying import records as study_records
from fabricbench.topology import load_file, read_topology
from fabricbench.topology.model import Topology, ranges
from fabricbench.topology.ranking import PlacementRank, rank_placements
from fabricbench.training import estimate as est, models, repeats


_gib_text = functools.partial(format_gib, missing="?", unit=True)  # "13.5 GiB" in sentences
EVEN = 0.05  # predicted times within 5% are even (run-to-run noise of step times is of that order)


@dataclass(kw_only=True)
class StrategyAdvice:
    strategy: str
    memory: MemoryFit
    time: StrategyTime
    rank: int | None = None  # 1 = recommended; None when ruled out
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "rank": self.rank, "note": self.note, "memory": self.memory.to_dict(),
                **{k: v for k, v in self.time.to_dict().items() if k not in ("strategy",)}}


@dataclass(kw_only=True)
class Advice:
    model: str
    params: int
    num_gpus: int
    gpu_memory_bytes: int | None
    topology: str
    placement: list[int]
    strategy: str | None
    reasons: list[str]
    runner_up: dict[str, Any] | None
    placements: list[PlacementRank]
    strategies: list[StrategyAdvice]
    placement_source: str
    time_source: str
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # --results lines or records left out, one each

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "params": self.params, "num_gpus": self.num_gpus,
                "gpu_memory_bytes": self.gpu_memory_bytes, "topology": self.topology,
                "placement": self.placement, "strategy": self.strategy, "reasons": self.reasons,
                "runner_up": self.runner_up, "placement_source": self.placement_source,
                "time_source": self.time_source, "notes": self.notes, "warnings": self.warnings,
                "placements": [p.to_dict() for p in self.placements],
                "strategies": [s.to_dict() for s in self.strategies]}


def _set(g: list[int]) -> str:
    return "[" + ranges(sorted(g)) + "]" if len(g) > 2 else "[" + ",".join(map(str, g)) + "]"


@dataclass(kw_only=True)
class _Results:
    """What --results held: every record (the machine, topology and relate records are read from these),
    and the collective and train records typed (results/records.py)."""

    records: list[dict[str, Any]]
    collectives: list[CollectiveResult]
    trains: list[TrainResult]
    warnings: list[str] = field(default_factory=list)  # one per line or record left out


def _read_records(results: Any) -> _Results:
    got = result_records.Records(path="--results")
    for n, item in enumerate(results or [], 1):
        if isinstance(item, dict):  # a library caller's record: checked as a file's line is
            why = result_records.check_record(item)
            if why is None:
                got.records.append(item)
            else:
                got.warnings.append(f"results item {n}: {why}; skipped")
            continue
        p = Path(item)
        if p.is_dir() and (p / "results.jsonl").exists():  # a study directory: its latest attempts only
            sr = study_records.load(p)
            got.records.extend(sr.records)
            got.warnings.extend(sr.warnings)
            continue
        held = result_records.read_nonempty(p, what="--results")  # a file with none: say so
        got.records.extend(held.records)
        got.warnings.extend(held.warnings)
    return _Results(records=got.records, collectives=got.typed(CollectiveResult), trains=got.typed(TrainResult),
                    warnings=got.warnings)


def _topology(topo: Any, topo_file: str | None, records: list[dict[str, Any]]):
    if isinstance(topo, Topology):
        return topo
    path = topo_file or topo
    if path:
        return load_file(path, what="--topo-file")
    for r in reversed(records):  # a study's machine record, or a results file's topology snapshot
        body = r.get("topology") if r.get("kind") == "machine" else (r if r.get("kind") == "topology" else None)
        if body and body.get("links"):
            return Topology.from_dict(body)

    return read_topology()


def _capacity(gpu_memory: Any, topo: Any, records: list[dict[str, Any]], from_machine: bool) -> tuple[int | None, str]:
    given = parse_memory(gpu_memory)
    if given is not None:
        return given, "given (--gpu-memory)"
    for r in reversed(records):
        if r.get("kind") == "machine" and r.get("gpus"):
            mem = [g.get("memory_total_bytes") for g in r["gpus"] if g.get("memory_total_bytes")]
            if mem:
                return min(mem), "measured machine (study)"
    if topo is not None:
        for g in topo.gpus:
            cap = capacity_from_name(g.name)
            if cap:
                return cap, f"data sheet of {g.name}"
    if from_machine:
        try:
            import pynvml

            pynvml.nvmlInit()
            try:
                return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).total), "NVML"
            finally:
                pynvml.nvmlShutdown()
        except Exception:
            pass
    return None, "unknown"


def advise(config: AdviseConfig) -> Advice:
    """The recommended GPU set and strategy for config's job, its reasons and a runner-up."""
    expect_config(config, AdviseConfig, "advise")
    c = config
    # the files next (results, topology): bad input fails before the model is built
    given = _read_records(c.results)
    records = given.records
    names = list(c.strategies)
    t = _topology(c.topo, c.topo_file, records)
    if t is None:
        why = ("the --results hold no GPU topology (measured where no GPU was visible, e.g. the CPU lab); "
               if records else "no GPU topology here; ")
        raise UsageError(why + "advise places GPU jobs: pass --topo-file with a saved `nvidia-smi topo -m` "
                               "(or `fabricbench topo --json`), or --results of a study run on GPUs")
    pool = list(c.gpus) if c.gpus else list(t.indices)
    missing = [g for g in pool if g not in t.indices]
    if missing:
        raise UsageError(f"--gpus names GPU {','.join(map(str, missing))} but the topology has "
                         f"{len(t.gpus)} ({','.join(map(str, t.indices))})")
    n = c.num_gpus if c.num_gpus is not None else len(pool)
    if not 1 <= n <= len(pool):
        raise UsageError(f"--num-gpus {n}: choose 1 to {len(pool)} (the GPUs {'of --gpus' if c.gpus else 'in the topology'})")
    resolved = models.resolve(name=c.model, config_file=c.model_config)
    psi = models.count_params(resolved)
    cap, cap_src = _capacity(c.gpu_memory, t, records, from_machine=c.topo is None and c.topo_file is None)
    act = est.activation_bytes(resolved.config, task=resolved.task, batch_size=c.batch_size, seq_len=c.seq_len,
                               image_size=c.image_size)
    mem = {m.strategy: m for m in fits(strategies=names, psi=psi, n=n, activation_bytes=act, capacity=cap,
                                       model=resolved.name, trains=given.trains, recipe=c.recipe,
                                       batch_size=c.batch_size)}
    placements = rank_placements(t, pool, n, given.collectives, fabric=c.fabric)
    best = placements[0]
    relate_rows = _relate_rows(given)
    times = {x.strategy: x for x in predict(strategies=names, gpus=best.gpus, busbw_gbps=best.busbw_gbps, psi=psi,
                                            n=n, trains=given.trains, model=resolved.name, relate_rows=relate_rows,
                                            fabric=c.fabric, batch_size=c.batch_size)}
    advice = [StrategyAdvice(strategy=s, memory=mem[s], time=times[s]) for s in names]
    chosen = _choose(advice)
    notes = []
    if cap is None:
        notes.append("GPU memory unknown: pass --gpu-memory (e.g. 80GB or 80GiB) to rule strategies in or out")
    notes += [f"{a.strategy}: {a.time.host_bound}" for a in advice if a.time.host_bound]
    placement_source = best.source
    sources = {a.time.time_source for a in advice if a.time.step_time_s is not None}
    time_source = " and ".join(sorted(sources)) if sources else \
        ("trace volumes at the set's busbw (comm time only)" if any(a.time.volume_source.startswith("trace")
                                                                     for a in advice)
         else "comm-volume arithmetic (textbook volumes at the set's busbw; comm time only)")
    reasons = _reasons(chosen, placements, n, cap, cap_src, t)
    reasons += [f"{a.strategy} {a.note}" for a in advice if not a.memory.usable]
    runner = chosen[1] if len(chosen) > 1 else None
    return Advice(model=resolved.name, params=psi, num_gpus=n, gpu_memory_bytes=cap, topology=t.summary(),
                  placement=best.gpus, strategy=chosen[0].strategy if chosen else None, reasons=reasons,
                  runner_up=None if runner is None else {
                      "placement": best.gpus, "strategy": runner.strategy, "why_second": runner.note,
                      "step_time_s": runner.time.step_time_s, "comm_time_s": runner.time.comm_time_s,
                      "headroom_bytes": runner.memory.headroom_bytes},
                  placements=placements, strategies=advice, placement_source=placement_source,
                  time_source=time_source, notes=notes, warnings=given.warnings)


def _relate_rows(given: _Results) -> list[Any]:
    for r in reversed(given.records):
        if r.get("kind") == "relate" and r.get("rows"):
            return r["rows"]
    if not given.trains or not given.collectives:
        return []
    try:
        return fabricbench.relate(fabricbench.RelateConfig(inputs=[*given.trains, *given.collectives])).rows
    except Exception:  # no calibration possible from these records: advice falls back to comm time
        return []


def _key(a: StrategyAdvice) -> float:
    t = a.time.step_time_s if a.time.step_time_s is not None else a.time.comm_time_s
    return float("inf") if t is None else t


def _verdict(x: StrategyAdvice, y: StrategyAdvice) -> Comparison | None:
    """x against y where both were measured: the paired comparison of their runs (training/repeats.py)."""
    if not (x.time.runs and y.time.runs) or x is y:
        return None
    comps = repeats.comparisons([*x.time.runs, *y.time.runs])
    return comps[0] if comps else None


def _even(top: StrategyAdvice, a: StrategyAdvice, fastest: float) -> bool:
    """Whether a shares top's band: measured both, unless the comparison says one is faster; else
    predicted times within EVEN."""
    v = _verdict(top, a)
    if v is not None:
        return v.verdict != "faster"
    return _key(a) <= fastest * (1 + EVEN) or _key(a) == fastest


def _choose(advice: list[StrategyAdvice]) -> list[StrategyAdvice]:
    """The usable strategies in recommended order (rank set on each); the others get a note."""
    order = {a.strategy: i for i, a in enumerate(advice)}
    for a in advice:
        if not a.memory.usable:
            a.note = (f"ruled out: needs {_gib_text(a.memory.need_bytes)} per GPU, "
                      f"{_gib_text(a.memory.capacity_bytes)} available ({a.memory.source})")
    usable = [a for a in advice if a.memory.usable]
    if not usable:
        return []
    # "fits" before "tight"; then time bands of EVEN around the fastest, dial order inside a band
    ranked: list[StrategyAdvice] = []
    for group in ([a for a in usable if a.memory.verdict != "tight"], [a for a in usable if a.memory.verdict == "tight"]):
        rest = sorted(group, key=_key)
        while rest:
            fastest = _key(rest[0])
            band = [a for a in rest if _even(rest[0], a, fastest)]
            band.sort(key=lambda a: order[a.strategy])
            ranked.extend(band)
            rest = [a for a in rest if a not in band]
    for i, a in enumerate(ranked, 1):
        a.rank = i
    top = ranked[0]
    for a in ranked[1:]:
        kt, ka = _key(top), _key(a)
        if a.memory.verdict == "tight" and top.memory.verdict != "tight":
            a.note = "fits only without the 10% reserve"
        elif (v := _verdict(top, a)) is not None:  # both measured: the paired comparison's sentence
            busy = [b["unit"] for b in repeats.busy_runs([*top.time.runs, *a.time.runs])]
            a.note = v.text() + ("" if v.verdict == "faster" else
                                 f"; {top.strategy} comes first in the dial order DDP → ZeRO-1 → ZeRO-2 → ZeRO-3 → FSDP") \
                + (f"; run on a busy host: {', '.join(busy)}" if busy else "")  # its figures may be low
        elif ka <= kt * (1 + EVEN):
            a.note = (f"even with {top.strategy} (within {EVEN:.0%}); {top.strategy} comes first in the dial "
                      f"order DDP → ZeRO-1 → ZeRO-2 → ZeRO-3 → FSDP")
        elif kt > 0 and ka != float("inf"):
            a.note = f"{ka / kt:.2f}× the {'step' if top.time.step_time_s is not None else 'comm'} time of {top.strategy}"
    return ranked


def _reasons(chosen: list[StrategyAdvice], placements: list[PlacementRank], n: int, cap, cap_src, topo) -> list[str]:
    best = placements[0]
    out = []
    if n == 1:
        out.append(f"one GPU: no collective runs, so placement does not matter (any GPU; {_set(best.gpus)} shown)")
    else:
        if best.label == "uniform":
            alt = f" (any {n} GPUs: every pair has the same link)"
        else:
            alt = f" (or {', '.join(_set(e) for e in best.equivalent[:3])}: the same)" if best.equivalent else ""
        bw = f"{best.busbw_gbps:.0f} GB/s" if best.busbw_gbps is not None else "unknown busbw"
        out.append(f"pin the job to GPUs {_set(best.gpus)}{alt}: {best.label}, slowest hop {best.slowest_link}, "
                   f"all-reduce busbw {bw} ({best.source})")
        worse = next((p for p in placements[1:] if p.busbw_gbps and best.busbw_gbps
                      and p.busbw_gbps < best.busbw_gbps), None)
        if worse is not None:
            out.append(f"{best.busbw_gbps / worse.busbw_gbps:.1f}× the busbw of the next kind of set, "
                       f"{_set(worse.gpus)} ({worse.label}, slowest hop {worse.slowest_link}, "
                       f"{worse.busbw_gbps:.0f} GB/s, {worse.source})")
    if not chosen:
        out.append(f"no strategy fits {_gib_text(cap)} per GPU ({cap_src}): use more GPUs, a smaller batch or "
                   f"activation checkpointing")
        return out
    top = chosen[0]
    m = top.memory
    mem = (f"needs {_gib_text(m.need_bytes)} of {_gib_text(m.capacity_bytes)} per GPU ({m.source}; headroom "
           f"{_gib_text(m.headroom_bytes)})" if m.capacity_bytes else f"needs {_gib_text(m.need_bytes)} per GPU ({m.source}); "
           f"GPU memory unknown")
    t = top.time
    if t.step_time_s is not None and t.time_source == "measured":
        speed = f"measured step {t.step_time_s * 1e3:.1f} ms on this set"
    elif t.step_time_s is not None:
        speed = f"predicted step {t.step_time_s * 1e3:.1f} ms (relate model, comm {t.comm_time_s * 1e3:.1f} ms)"
    elif t.comm_time_s is not None:
        speed = f"comm {t.comm_time_s * 1e3:.1f} ms per step at that busbw ({t.volume_source}; compute not known)"
    else:
        speed = "comm time unknown"
    out.append(f"{top.strategy}: {mem}; {speed}")
    if len(chosen) > 1:
        r = chosen[1]
        out.append(f"runner-up {r.strategy}: {r.note}")
    return out
