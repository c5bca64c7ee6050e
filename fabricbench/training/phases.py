"""A train run's fixed cost, phase by phase: where the seconds between the command and its record go.

    fabricbench train --strategies ddp --model tiny-mistral --device cpu --nprocs 2 --verbose
    python3 benchmarks/startup/phases.py --runs 5          (the breakdown over fresh runs, median and range)

Each rank stamps its own wall clock (time.time()) as it ends each phase (`Marks`, written into its rank
file); the launcher stamps when it spawned the ranks and when they were gone. `join` turns the stamps into
seconds per phase: a phase ends when the last rank of this node has ended it, and the parent's stamps and
the ranks' share one host clock. Ranks of other nodes are left out: their clocks are not this host's.
A run's phases begin where the user's wait for it began: the command's own process start for its first
run (`fabricbench train` passes process_start()), the previous record's write for a later one, so that
the records' totals add up to the wall a user waits for the command.

Phases, in order (a rank's step phases are the same as the record's steps, so `first_step + warmup` is the
untimed start of the steps and `timed` is what the figures are made of):
- prepare: the command's own process before the spawn: for the first run its start (the interpreter,
  fabricbench's imports, the config's checks, the model's numbers), then the spec and the fabric;
- launch: the spawn until the last rank's interpreter started (torchrun's agent, where it is used);
- imports: torch, the strategy's stack (Accelerate; DeepSpeed for ZeRO only), transformers;
- init: CUDA and the process group;
- build: the model, on its device;
- wrap: the strategy's wrap / engine init (Accelerate's prepare, DeepSpeed's engine), the optimizer;
- first_step: the first step (it builds the optimizer's state and the allocator's pools);
- warmup: the other untimed steps;
- timed: the timed steps (the measurement);
- trace: the profiled steps of the communication trace (trace.py), and the profile read back;
- teardown: the last rank's trace until the launcher saw every rank gone (its last write, its exit);
- join: the rank files joined into the record.
"""

from __future__ import annotations

import time
from typing import Any

RANK_PHASES = ("imports", "init", "build", "wrap", "first_step", "warmup", "timed", "trace", "end")
PHASES = ("prepare", "launch", "imports", "init", "build", "wrap", "first_step", "warmup", "timed", "trace",
          "teardown", "join")
STARTUP = ("prepare", "launch", "imports", "init", "build", "wrap")  # before the first step starts


def process_start() -> float:
    """This process's start on the wall clock (Linux /proc; now where that cannot be read)."""
    from fabricbench import procs

    return time.time() - procs.age_s()


class Marks:
    """One rank's stamps: `Marks()` at its start (the process's own start time is read back from /proc),
    then `mark(phase)` as each phase of RANK_PHASES ends."""

    def __init__(self) -> None:
        self.stamps: dict[str, float] = {"start": process_start()}

    def mark(self, phase: str) -> None:
        assert phase in RANK_PHASES, phase
        self.stamps[phase] = time.time()

    def as_dict(self) -> dict[str, float]:
        return dict(self.stamps)


def join(ranks: list[dict[str, Any]], *, begun: float, spawned: float, gone: float,
         joined: float | None = None) -> dict[str, float] | None:
    """The rank files' stamps and the launcher's -> seconds per phase (PHASES; a phase no rank reached is
    absent), with "total" (begun to joined). None when no rank stamped anything (an old worker)."""
    stamps = [r["phases"] for r in ranks if isinstance(r.get("phases"), dict) and r["phases"].get("start")]
    if not stamps:
        return None
    joined = time.time() if joined is None else joined
    out: dict[str, float] = {"prepare": spawned - begun}
    prev = spawned
    for name, key in (("launch", "start"), *((p, p) for p in RANK_PHASES)):
        ends = [s[key] for s in stamps if isinstance(s.get(key), (int, float))]
        if len(ends) < len(stamps):  # a rank did not get there: the phases after it say nothing
            break
        if name == "end":  # the rank's last write and exit are the teardown's: the phases add up to the total
            break
        end = max(ends)
        out[name] = max(0.0, end - prev)
        prev = max(prev, end)
    out["teardown"] = max(0.0, gone - prev)
    out["join"] = max(0.0, joined - gone)
    out["total"] = joined - begun
    return {k: round(v, 4) for k, v in out.items()}


def startup_s(phases: dict[str, float]) -> float:
    """Seconds before the first step began: what a run costs whatever it measures."""
    return sum(phases.get(p, 0.0) for p in STARTUP)


def lines(phases: dict[str, float] | None) -> list[str]:
    """`train --verbose`: one line per phase, with its share of the run's wall time."""
    if not phases:
        return ["phases: not recorded (a rank stamped nothing)"]
    total = phases.get("total") or sum(v for k, v in phases.items() if k != "total") or 1.0
    out = [f"  {p:<11} {phases[p]:7.2f} s {phases[p] / total:6.1%}" for p in PHASES if p in phases]
    timed = phases.get("timed", 0.0)
    out.append(f"  {'total':<11} {total:7.2f} s   timed steps {timed / total:.1%} of it, start-up "
               f"{startup_s(phases):.2f} s")
    return out
