"""How long a study's units will take, each with its interval: what `study --dry-run` prints and the plan
record keeps.

    fabricbench study --device cpu --nprocs 2 --fabrics default,shaped:1gbit --model tiny-mistral \
        --out lab/ --dry-run                     (each unit "~15 s (9-31)", and the total)

Every figure comes from the best source that has it, in this order:
1. this study's own records (`--resume`): a unit's recorded duration; a train unit not yet run, from the
   fixed cost, step time and step count of the study's recorded train runs;
2. this host's store (hoststore.py): what earlier studies on this host measured, in fabricbench's cache
   folder;
3. a first guess calibrated on a 2-core VM (CPU) and an H100 (GPU), with a wide interval.
A train run is its fixed cost (start-up, teardown: everything but its counted and profiled steps), plus its
trace phase where its round profiles (the first --trace-rounds rounds; a run of one rank, the first only:
units/train.py profiles), plus its steps times its step; with --target-ci the steps go on between --steps
and the cap, so the count is an interval of its own. A figure measured while other processes loaded the
host is scaled to the load now (`_slowdown`); the load now is read once, over LOAD_WINDOW_S, as hostload.py
reads it during a run.

A unit's interval: the spread of its samples, never narrower than SAMPLE_SPREAD around their median (a
few samples understate a busy host's spread), and the load assumed to stay within LOAD_SPREAD of now's.
A train round past the minimum runs only while a question is open: the total counts it half in its
middle figure, not at all in the low one, wholly in the high one. The total's bounds are the units'
bounds added: their errors share a cause (the host's speed that day), so they do not cancel.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from fabricbench import hostload
from fabricbench.fabrics import get_fabric
from fabricbench.results.status import Status
from fabricbench.sizes import SizeSweep
from fabricbench.studying import hoststore
from fabricbench.studying.config import DEFAULT_SIZES, SWEEP_OPS, StudyConfig
from fabricbench.studying.units import Unit
from fabricbench.studying.units.train import profiles

LOAD_WINDOW_S = 0.5
SAMPLE_SPREAD = (0.8, 1.25)  # at least this interval around a measured figure's median
LOAD_SPREAD = (0.5, 1.5)  # the other processes' load during the study, against the load now
OPTIONAL_SHARE = 0.5  # a round past the minimum, in the middle figure

# First guesses, for a host with no record of its own (benchmarks/estimates/README.md has the runs). CPU:
# the 2-core VM, normalized to a quiet host: a train run's fixed cost 5-15 s; a step of tiny-mistral and of
# lab-mistral (2 gloo ranks, batch 8 x 512) 0.45 and 0.78 s, which STEP_OVERHEAD_S + work / FLOP_RATE
# fits. GPU: one H100, mistral-1b DDP's 4.5 s outside its steps (benchmarks/startup/results/h100-1gpu/after3),
# and bf16 at about 40% of the card's dense peak. The other units: what the VM's and the H100's studies took.
FIRST = {
    "cpu": {"machine": 3.0, "estimate": 1.0, "batch": 45.0, "scaling": 60.0, "relate": 3.0, "summary": 1.5,
            "start": 1.0, "report": 3.0, "train_fixed": 9.0, "train_trace": 1.0},
    "cuda": {"machine": 20.0, "estimate": 2.0, "batch": 45.0, "scaling": 60.0, "relate": 6.0, "summary": 3.0,
             "start": 2.0, "report": 5.0, "train_fixed": 4.5, "train_trace": 2.0},
}
# train_trace: a profiled run's trace phase, 0.9-1.2 s of tiny-mistral on the VM's 2 ranks, 1.8-2.5 s of a 1B
# model on one H100 (benchmarks/startup/results: cpu-vm/trace-cost-cpu*.txt, h100-1gpu/2026-12-07b)
STEP_OVERHEAD_S = {"cpu": 0.3, "cuda": 0.05}
FLOP_RATE = {"cpu": 5e10, "cuda": 1.5e14}  # sustained FLOP/s of one rank
FIRST_SPREAD = (0.4, 2.5)  # a first guess's interval: it has not seen this host


@dataclass(frozen=True)
class Duration:
    """Seconds: the middle figure and its interval, and where it came from ("this study", "this host",
    "first guess"; a sum of several names each)."""

    s: float
    lo_s: float
    hi_s: float
    source: str = ""

    def __add__(self, other: "Duration") -> "Duration":
        src = ", ".join(dict.fromkeys(x for x in (*self.source.split(", "), *other.source.split(", ")) if x))
        return Duration(self.s + other.s, self.lo_s + other.lo_s, self.hi_s + other.hi_s, src)

    def times(self, lo: float, mid: float, hi: float) -> "Duration":
        return Duration(self.s * mid, self.lo_s * lo, self.hi_s * hi, self.source)

    def text(self) -> str:
        """"~3.2 min (2.1-4.8)" or "~40 s (25-90)": one unit, the middle figure's."""
        if self.s >= 90:
            return f"~{self.s / 60:.1f} min ({self.lo_s / 60:.1f}–{self.hi_s / 60:.1f})"
        digits = 1 if self.hi_s < 10 else 0
        return f"~{self.s:.{digits}f} s ({self.lo_s:.{digits}f}–{self.hi_s:.{digits}f})"

    def to_dict(self) -> dict[str, Any]:
        return {"s": round(self.s, 1), "lo_s": round(self.lo_s, 1), "hi_s": round(self.hi_s, 1),
                "source": self.source}


ZERO = Duration(0.0, 0.0, 0.0)


@dataclass(kw_only=True)
class Estimate:
    """A plan's durations: per unit (by name), the total of those to run, and the load they were scaled to."""

    units: dict[str, Duration] = field(default_factory=dict)
    optional: frozenset[str] = frozenset()  # rounds past the minimum: run only while a question is open
    todo: frozenset[str] = frozenset()  # the units the total counts (a --resume skips those recorded done)
    total: Duration = ZERO
    load_cpus: float | None = None  # the other processes' CPUs now; None: not read (not Linux)
    cpus: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {**self.total.to_dict(), "load_cpus": None if self.load_cpus is None else round(self.load_cpus, 2),
                "cpus": self.cpus,
                "units": {k: v.to_dict() for k, v in self.units.items()}, "optional": sorted(self.optional)}


def learn(config: StudyConfig, got: Any, *, report_s: float | None = None, path: Path | None = None) -> None:
    """Add what the latest attempt of the study (records.load's StudyRecords `got`) measured to the host's
    store: its units, its train runs, its command's start (the plan's process age) and `report_s`. An
    unwritable cache is not the study's failure: the next estimate is a first guess again."""
    plan = (got.plan or {}).get("study") or {}
    attempt, start_s = plan.get("attempt"), plan.get("process_age_s")
    new: dict[str, list[dict[str, float]]] = {}
    add = lambda key, s: new.setdefault(key, []).append(s)  # noqa: E731
    for key, sample in _samples(config, [u for u in got.units.values() if u.get("attempt") == attempt],
                                [r for r in got.of_kind("train") if (r.get("study") or {}).get("attempt") == attempt]):
        add(key, sample)
    if report_s is not None:
        add(_key("report", config.device), hoststore.sample(report_s, None, 1))
    if isinstance(start_s, (int, float)):
        add(_key("start", config.device), hoststore.sample(start_s, None, 1))
    if new:
        hoststore.add(new, path)


def _key(*parts: Any) -> str:
    return "/".join(str(p) for p in parts)


def _train_key(config: StudyConfig, strategy: str | None, fabric: str | None = None) -> str:
    shape = ",".join(f"{k}={v}" for k, v in sorted(config.shape.items()))
    return _key("train", config.device, config.model_label, f"{config.ranks_per_node}x{config.nnodes}",
                config.batch_size, shape, config.precision, strategy, fabric or "any")


def _samples(config: StudyConfig, units: list[dict[str, Any]], trains: list[dict[str, Any]]
             ) -> Iterable[tuple[str, dict[str, float]]]:
    """(key, sample) for every ok unit and train run of one attempt."""
    d, ranks = config.device, config.ranks_per_node
    by_unit = {(r.get("study") or {}).get("unit"): r for r in trains}
    for u in units:
        if u.get("status") != Status.OK or not isinstance(u.get("duration_s"), (int, float)):
            continue
        kind, dur, load = u.get("unit_kind"), float(u["duration_s"]), (u.get("details") or {}).get(hostload.FIELD)
        if kind == "sweep":
            model = _sweep_model(config, str(u.get("fabric") or "default"))
            yield _key("sweep", d), hoststore.sample(dur / model, load, ranks)
        elif kind == "train":
            run = _train_run(by_unit.get(u.get("name")), dur)
            if run is None:
                continue
            fixed, step, count, trace_s = run
            strategy, fabric = u.get("strategy"), u.get("fabric")
            for what, s in (("train_fixed", fixed), ("train_trace", trace_s)):
                if s is not None:
                    yield _key(what, d, strategy), hoststore.sample(s, load, ranks)
                    yield _key(what, d), hoststore.sample(s, load, ranks)
            for f in (fabric, None):
                yield _train_key(config, strategy, f) + "/step", hoststore.sample(step, load, ranks)
            yield _key("train_speed", d), hoststore.sample(step / _first_step(config), load, ranks)
            cap = _step_cap(config)
            if cap > config.steps:  # where the count was free to move: how far toward the cap it went
                went = (count - config.steps) / (cap - config.steps)
                yield _train_key(config, strategy) + "/steps", hoststore.sample(went, None, 0)
        elif kind:
            yield _key(kind, d), hoststore.sample(dur, load, 1)


def _train_run(rec: dict[str, Any] | None, unit_s: float | None = None
               ) -> tuple[float, float, int, float | None] | None:
    """(fixed cost, median step, steps, trace phase) of a train record: the unit's wall (else the run's
    phases) less its steps and its trace phase; the trace phase None where the run did not profile (no
    "comm"); None without step times."""
    if not rec:
        return None
    phases = rec.get("phases") or {}
    times = [t for t in rec.get("step_times_s") or [] if isinstance(t, (int, float))]
    total = unit_s if unit_s is not None else phases.get("total")
    if not times or not isinstance(total, (int, float)):
        return None
    trace = phases.get("trace") if isinstance(phases.get("trace"), (int, float)) else 0.0
    return (max(0.0, total - sum(times) - trace), statistics.median(times), len(times),
            trace if rec.get("comm") else None)


def load_now(window_s: float = LOAD_WINDOW_S) -> hostload.Load | None:
    """The other processes' load on this host over the next `window_s` seconds; None off Linux."""
    with hostload.watch() as w:
        time.sleep(window_s)
    return w.load


def _slowdown(need: float, others: float, cpus: int) -> float:
    """How much slower a run wanting `need` CPUs goes while others keep `others` busy on `cpus`: 1 while
    both fit, else the share it gets of a time-shared host."""
    return max(1.0, (need + others) / max(1, cpus))


def estimate(config: StudyConfig, units: list[Unit], *, done: Any = None, todo: set[str] | None = None,
             store: hoststore.Samples | None = None, load: hostload.Load | None = None) -> Estimate:
    """Every unit's duration (waived ones: 0) and the total of `todo` (names; None: all). `done` is the
    study's records (records.load) on a --resume, `store` the host's (hoststore.read_store()), `load` the load
    now (load_now())."""
    est = Estimate(load_cpus=None if load is None else load.others_cpus + (load.steal_cpus or 0),
                   cpus=load.cpus if load is not None else os.cpu_count() or 1)
    ctx = _Sources(config=config, done=done, store=store or {}, others=est.load_cpus or 0.0, cpus=est.cpus)
    optional = set()
    total = ZERO
    for u in units:
        d = ZERO if u.waived else ctx.unit(u)
        est.units[u.name] = d
        if u.kind == "train" and u.repeat > config.min_rounds:
            optional.add(u.name)
        if todo is None or u.name in todo:
            total = total + (d.times(0.0, OPTIONAL_SHARE, 1.0) if u.name in optional else d)
    est.optional = frozenset(optional)
    est.todo = frozenset(u.name for u in units if (todo is None or u.name in todo) and not u.waived)
    # the command's own start and the report after the units
    est.total = total + ctx.other("start", 1.0) + ctx.other("report", 1.0)
    return est


@dataclass(kw_only=True)
class _Sources:
    config: StudyConfig
    done: Any
    store: dict[str, list[dict[str, float]]]
    others: float
    cpus: int

    def _now(self, need: float) -> tuple[float, float, float]:
        lo, hi = LOAD_SPREAD
        return tuple(_slowdown(need, self.others * k, self.cpus) for k in (lo, 1.0, hi))  # type: ignore[return-value]

    def _measured(self, samples: list[dict[str, float]], need: float, source: str) -> Duration | None:
        """Samples normalized to a quiet host, then scaled to the load now; None without samples."""
        if not samples:
            return None
        quiet = [x["s"] / _slowdown(x["need"], x["others"], int(x["cpus"])) for x in samples]
        mid = statistics.median(quiet)
        lo, hi = min(min(quiet), mid * SAMPLE_SPREAD[0]), max(max(quiet), mid * SAMPLE_SPREAD[1])
        a, b, c = self._now(need)
        return Duration(mid * b, lo * a, hi * c, source)

    def _first(self, s: float, need: float) -> Duration:
        a, b, c = self._now(need)
        return Duration(s * b, s * FIRST_SPREAD[0] * a, s * FIRST_SPREAD[1] * c, "first guess")

    def _stored(self, key: str, need: float) -> Duration | None:
        return self._measured(self.store.get(key, []), need, "this host")

    def other(self, kind: str, need: float) -> Duration:
        c = self.config
        return self._stored(_key(kind, c.device), need) or self._first(FIRST[c.device][kind], need)

    def unit(self, u: Unit) -> Duration:
        c = self.config
        mine = self.done.units.get(u.name) if self.done is not None else None
        if mine and mine.get("status") == Status.OK and isinstance(mine.get("duration_s"), (int, float)):
            need = c.ranks_per_node if u.kind in ("train", "sweep") else 1
            load = (mine.get("details") or {}).get(hostload.FIELD)
            return self._measured([hoststore.sample(mine["duration_s"], load, need)],
                                  need, "this study")  # type: ignore[return-value]
        if u.kind == "train":
            return self.train(u)
        if u.kind == "sweep":
            model = _sweep_model(c, str(u.fabric))
            got = self._stored(_key("sweep", c.device), c.ranks_per_node)
            return got.times(model, model, model) if got else self._first(model, c.ranks_per_node)
        return self.other(u.kind, 1)

    def train(self, u: Unit) -> Duration:
        c, need = self.config, self.config.ranks_per_node
        runs = []
        if self.done is not None:  # this study's own runs: this strategy's, else any
            trains = self.done.of_kind("train")
            for r in [r for r in trains if r.get("strategy") == u.strategy] or trains:
                wall = (self.done.units.get((r.get("study") or {}).get("unit")) or {}).get("duration_s")
                run = _train_run(r, wall if isinstance(wall, (int, float)) else None)
                if run:
                    runs.append((run, r.get(hostload.FIELD)))
        trace = self.trace(u, runs) if profiles(u, c) else ZERO
        if runs:
            fixed = self._measured([hoststore.sample(f, ld, need) for (f, *_), ld in runs], need, "this study")
            step = self._measured([hoststore.sample(s, ld, need) for (_, s, *_), ld in runs], need, "this study")
            counts = sorted(n for (_, _, n, _), _ in runs)
            steps = (float(counts[0]), float(statistics.median(counts)), float(counts[-1]))
        else:
            fixed = self._stored(_key("train_fixed", c.device, u.strategy), need) or \
                self._stored(_key("train_fixed", c.device), need) or self._first(FIRST[c.device]["train_fixed"], need)
            step = self._stored(_train_key(c, u.strategy, u.fabric) + "/step", need) or \
                self._stored(_train_key(c, u.strategy) + "/step", need) or self._step_from_rate(need)
            steps = self._steps(u)
        assert fixed is not None and step is not None
        fixed = fixed + trace
        return Duration(fixed.s + steps[1] * step.s, fixed.lo_s + steps[0] * step.lo_s,
                        fixed.hi_s + steps[2] * step.hi_s, (fixed + step).source)

    def trace(self, u: Unit, runs: list[tuple[tuple[float, float, int, float | None], Any]]) -> Duration:
        """A profiled round's trace phase: this study's profiled runs, else this host's, else a first guess."""
        c, need = self.config, self.config.ranks_per_node
        mine = [hoststore.sample(t, ld, need) for (*_, t), ld in runs if t is not None]
        return (self._measured(mine, need, "this study")
                or self._stored(_key("train_trace", c.device, u.strategy), need)
                or self._stored(_key("train_trace", c.device), need)
                or self._first(FIRST[c.device]["train_trace"], need))

    def _step_from_rate(self, need: float) -> Duration:
        """A step of a model (or shape) this host has not trained: the first guess, times how this host's
        steps of others compared with theirs."""
        first = _first_step(self.config)
        speed = self._stored(_key("train_speed", self.config.device), need)
        if speed is None:
            return self._first(first, need)
        # another model's step says less about this one: its interval is a first guess's
        return Duration(first * speed.s, first * speed.lo_s * FIRST_SPREAD[0], first * speed.hi_s * FIRST_SPREAD[1],
                        "this host")

    def _steps(self, u: Unit) -> tuple[float, float, float]:
        """(fewest, middle, most) steps a run takes: --steps exactly, or with --target-ci up to the cap, as
        far as this host's runs of this model went (else anywhere between)."""
        c = self.config
        cap = _step_cap(c)
        if cap <= c.steps:
            return (float(c.steps),) * 3  # type: ignore[return-value]
        f = [x["s"] for x in self.store.get(_train_key(c, u.strategy) + "/steps", [])]
        lo, mid, hi = (min(f), statistics.median(f), max(f)) if f else (0.0, 0.5, 1.0)
        return tuple(c.steps + k * (cap - c.steps) for k in (lo, mid, hi))  # type: ignore[return-value]


def _step_cap(c: StudyConfig) -> int:
    from fabricbench.training.config import DEFAULT_MAX_STEPS

    return c.steps if not c.target_ci else max(c.steps, c.max_steps or DEFAULT_MAX_STEPS)


def _first_step(c: StudyConfig) -> float:
    """A step's seconds by formula: a fixed cost (launches, the gradients' collectives, the optimizer) and
    the model's work at the device's rate."""
    return STEP_OVERHEAD_S[c.device] + _work(c) / FLOP_RATE[c.device]


def _work(c: StudyConfig) -> float:
    """FLOPs of one rank's step: 6 per parameter per token (forward and backward) and attention's
    12 x layers x hidden x tokens per token (Kaplan et al. 2020, table 1); 1 where the model cannot be read."""
    from fabricbench.training.estimate import tokens_per_sample
    from fabricbench.training.models import describe

    try:
        m = describe(name=c.model, config_file=c.model_config)
        tokens = tokens_per_sample(m.shape, task=m.task, seq_len=c.seq_len, image_size=c.image_size)
        per_token = 6 * m.params + 12 * m.shape.num_hidden_layers * m.shape.hidden_size * tokens
    except Exception:  # noqa: BLE001 - a config only transformers reads, and it is absent: no step from work
        return 1.0
    return float((c.batch_size or 8) * tokens * per_token)


def _sweep_model(config: StudyConfig, fabric: str) -> float:
    """A sweep unit's seconds by formula: a child's start-up plus, per op, size and iteration, a launch and
    the bytes at the fabric's rate (busbw = R/2 on a shaped loopback). What this host took over what this
    said is what the store keeps, so the sizes the traces choose and the host's speed come in measured."""
    sizes = SizeSweep.parse(config.sizes or DEFAULT_SIZES[config.device]).expand()
    gbps = 0.3 if config.device == "cpu" else 50.0
    try:
        rate = getattr(get_fabric(next((s for s in config.fabrics if get_fabric(s).name == fabric), fabric)),
                       "rate_bps", None)
    except Exception:  # noqa: BLE001 - a fabric this host cannot parse alone: the unshaped rate
        rate = None
    if rate:
        gbps = min(gbps, rate / 8 / 2 / 1e9)
    n = (config.iters or 5) + (config.warmup or 0)
    move = sum(n * (2e-4 + s / (gbps * 1e9)) for s in sizes) * len(SWEEP_OPS)
    return (6.0 if config.device == "cpu" else 15.0) + move
