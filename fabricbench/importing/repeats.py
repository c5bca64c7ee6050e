"""A table's rows gathered per measurement: the rows nccl-tests repeats (-N run cycles, a size printed again)
become one measurement with the repeats as samples, and a row with impossible figures is left out.

    all_reduce_perf -b 8 -e 8G -f 2 -N 5 > ar.log && fabricbench import ar.log --out imported.jsonl

nccl-tests' time is a mean over `iters` launches, and every repeat runs the same `iters`, so the repeats'
mean time is the mean over all of them; its bandwidths are the printed ones weighted by time (sum(bw·t) /
sum(t) = bytes / mean t where the printed bw is bytes / t), so a merged row keeps nccl-tests' own definition
(bw = bytes / mean time). The first SAMPLES_KEPT times are kept in extra.samples_us, their count in
extra.repeats. Memory is bounded: at most GROUPS_CAP measurements per table (rows of further sizes are
skipped, with a warning), each with at most SAMPLES_KEPT samples.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from operator import mul
from fabricbench.importing.collective import Side

GROUPS_CAP = 8192  # measurements (size x placement x type x op) of one table
SAMPLES_KEPT = 64  # repeat times kept per measurement
UNSUMMED = 4096  # fast-path rows of a table held before they are summed (a batch in C, not a call per row)
MAX_GBPS = 1e6  # no link moves a petabyte per second: a larger printed bandwidth is garbage
MAX_WHOLE = 2**63  # the results reader reads whole numbers below this (a 64-bit signed size or count)


def figures_problem(side: Side) -> str | None:
    """Why a placement's printed figures cannot be a measurement (None when they can)."""
    t = side.time_us
    if t is not None and (t <= 0 or math.copysign(1.0, t) < 0):
        return f"time {t!r} us (a time is > 0)"
    for name, v in (("algbw", side.algbw), ("busbw", side.busbw)):
        if v is not None and not 0 <= v <= MAX_GBPS:
            return f"{name} {v!r} GB/s (0 to {MAX_GBPS:g})"
    if side.wrong is not None and not 0 <= side.wrong < MAX_WHOLE:
        return f"#wrong {side.wrong} (a count of elements)"
    for name, v in (("min_us", side.min_us), ("max_us", side.max_us), ("p99_us", side.p99_us)):
        if v is not None and v <= 0:
            return f"{name} {v!r} (a time is > 0)"
    return None


@dataclass(kw_only=True)
class _Acc:
    """One measurement's repeats, summed as they come."""

    first: Side
    n: int = 0
    t_sum: float = 0.0
    t_sq: float = 0.0
    alg_t: float = 0.0
    bus_t: float = 0.0
    wrong: int | None = None
    samples: list[float] = field(default_factory=list)
    timed: bool = True  # every repeat printed a time and both bandwidths

    def add(self, s: Side) -> None:
        self.n += 1
        if s.wrong is not None:
            self.wrong = (self.wrong or 0) + s.wrong
        if s.time_us is None or s.algbw is None or s.busbw is None:
            self.timed = False
            return
        self.t_sum += s.time_us
        self.t_sq += s.time_us * s.time_us
        self.alg_t += s.algbw * s.time_us
        self.bus_t += s.busbw * s.time_us
        if len(self.samples) < SAMPLES_KEPT:
            self.samples.append(s.time_us)
        for name, pick in (("min_us", min), ("max_us", max), ("p99_us", max)):
            a, b = getattr(self.first, name), getattr(s, name)
            if a is not None and b is not None and s is not self.first:
                setattr(self.first, name, pick(a, b))

    def add_batch(self, ts: list[float], algs: list[float], buses: list[float]) -> None:
        """add() for rows read on the fast path (repeats of a row already seen, figures checked there, #wrong
        0), summed in C a batch at a time: per row, a method call and six attribute updates were a third of
        a large file's time."""
        self.n += len(ts)
        self.wrong = self.wrong or 0
        self.t_sum += sum(ts)
        self.t_sq += sum(map(mul, ts, ts))
        self.alg_t += sum(map(mul, algs, ts))
        self.bus_t += sum(map(mul, buses, ts))
        room = SAMPLES_KEPT - len(self.samples)
        if room > 0:
            self.samples += ts[:room]

    def side(self) -> Side:
        if self.n == 1:
            return self.first
        if not self.timed or self.t_sum <= 0:  # a repeat without figures: the first as printed, the count said
            return replace(self.first, wrong=self.wrong, extra={**self.first.extra, "repeats": self.n})
        mean = self.t_sum / self.n
        var = max(self.t_sq / self.n - mean * mean, 0.0) * self.n / (self.n - 1)
        f = self.first
        return Side(time_us=round(mean, 6), algbw=round(self.alg_t / self.t_sum, 6),
                    busbw=round(self.bus_t / self.t_sum, 6), wrong=self.wrong, max_error=f.max_error,
                    min_us=f.min_us, max_us=f.max_us, p99_us=f.p99_us, cv=None,
                    extra={**f.extra, "repeats": self.n, "samples_us": self.samples,
                           "repeats_cv": round(math.sqrt(var) / mean, 6)})


@dataclass(kw_only=True, eq=False)  # a Group is itself (identity): `None in groups` stays a pointer test
class Group:
    """One row's measurement: the row's names (size, count, type, redop, root) and one _Acc per placement."""

    line: int
    pre: dict[str, str]
    sides: list[_Acc | None]

    # fast-path rows not summed yet (Table.add_fast), their figures end to end: a flat list of floats holds
    # no object the cycle collector walks (a list per row made it run every few hundred rows)
    batch: list[float] = field(default_factory=list)

    def flush(self) -> None:
        """The batch summed into each placement (before any other row joins it, so samples keep their order)."""
        if not self.batch:
            return
        flat, self.batch = self.batch, []
        width = 4 * len(self.sides)
        for i, acc in enumerate(self.sides):
            assert acc is not None  # the fast path reads only rows whose every placement was read before
            acc.add_batch(flat[4 * i::width], flat[4 * i + 1::width], flat[4 * i + 2::width])

    def placements(self) -> list[Side | None]:
        self.flush()
        return [a.side() if a is not None else None for a in self.sides]


class Table:
    """The rows of one run's table, gathered by what they measured, in the order they first came."""

    def __init__(self) -> None:
        self.groups: dict[tuple, Group] = {}
        self.rows = 0
        self.skipped = 0  # rows of sizes past GROUPS_CAP
        self.unsummed = 0  # fast-path rows held in the groups' batches

    def __bool__(self) -> bool:
        return self.rows > 0

    def add(self, line: int, pre: dict[str, str], sides: list[Side | None]) -> Group | None:
        """Gather one row; its Group, or None when the cap left it out."""
        key = tuple(sorted(pre.items()))
        g = self.groups.get(key)
        if g is None:
            if len(self.groups) >= GROUPS_CAP:
                self.skipped += 1
                return None
            g = self.groups[key] = Group(line=line, pre=pre, sides=[None] * len(sides))
        g.flush()
        self.rows += 1
        for i, s in enumerate(sides[:len(g.sides)]):
            if s is None:
                continue
            if g.sides[i] is None:
                g.sides[i] = _Acc(first=s)
            g.sides[i].add(s)  # type: ignore[union-attr]
        return g

    def add_fast(self, g: Group, figures: list[float]) -> None:
        """A fast-path row of `g`: time, algbw, busbw, #wrong per placement (checked by the caller)."""
        self.add_fast_rows([g], [tuple(figures)])

    def add_fast_rows(self, groups: list[Group], rows: Iterable[tuple[float, ...]]) -> None:
        """add_fast for a block of rows in order: groups[i] gets rows' i-th."""
        for g, figures in zip(groups, rows):
            g.batch += figures
        self.rows += len(groups)
        self.unsummed += len(groups)
        if self.unsummed >= UNSUMMED:
            for x in self.groups.values():
                x.flush()
            self.unsummed = 0

    def first_line(self) -> int:
        return next(iter(self.groups.values())).line if self.groups else 0

    def __iter__(self):
        return iter(self.groups.values())

