"""What every kind of study unit shares: the unit (Unit), what its command may depend on (Context), what
it ends with (Outcome), the kind's row (UnitKind), and the helpers the kinds read children's output with.
Each kind lives in a file of its own beside this one (machine.py, estimate.py, ...); units/__init__.py
registers them in UNIT_KINDS.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from fabricbench.results.status import Status
from fabricbench.results.writer import read_results
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.nodes import NODE_DIR

INTRA = "intra-node sweep"  # across nodes: the name of a fabric's sweep inside node 0 (plan.py, the report)

# Unit statuses. A unit recorded with one of DONE is not run again by --resume: "oom" and "flagged" are
# measured outcomes (rerunning would measure the same); error, timeout, waived and interrupted rerun.
DONE = (Status.OK, Status.OOM, Status.FLAGGED)
STATUSES = (Status.OK, Status.OOM, Status.FLAGGED, Status.WAIVED, Status.ERROR, Status.TIMEOUT, Status.INTERRUPTED)


@dataclass(frozen=True, kw_only=True)
class Unit:
    name: str  # stable key in results.jsonl: "train ddp @ default"
    kind: str  # a UNIT_KINDS name
    fabric: str | None = None  # the fabric it runs under; None: no collective runs (machine, estimate, relate)
    strategy: str | None = None  # train units
    repeat: int = 1  # train units: the round (1: the first run of this strategy on this fabric)
    estimate_s: float = 0.0  # rough expected duration (for --dry-run and the progress bar)
    span: bool = False  # across nodes: one job of every node's ranks (studying/nodes.py); else node 0's alone
    waived: str | None = None  # why it cannot measure anything here (studying/plan.py decides): recorded, not run

    @property
    def slug(self) -> str:
        """The unit's file name stem under DIR/units/."""
        return "".join(c if c.isalnum() or c in "-_." else "_" for c in self.name.replace(" @ ", "@")).strip("_")


@dataclass(kw_only=True)
class Context:
    """What a unit's command may depend on: the study, its directory and the records measured so far."""

    config: StudyConfig
    out_dir: Path
    records: list[dict[str, Any]] = field(default_factory=list)  # latest attempt of every finished unit
    started: float = field(default_factory=time.monotonic)  # when this run of the study began (repeat budget)
    node: int = 0  # whose command is built: node 0's, or a follower's share of a spanning unit

    def unit_file(self, unit: Unit, suffix: str = ".jsonl") -> Path:
        return self.out_dir / "units" / f"{unit.slug}{suffix}"

    def for_node(self, node: int) -> "Context":
        """This context as node `node` sees it: its files in its own folder (NODE_DIR, which the follower
        makes its temporary one), the records node 0 holds (the commands depend on them)."""
        return dataclasses.replace(self, node=node, out_dir=Path(NODE_DIR) if node else self.out_dir)


@dataclass(kw_only=True)
class Outcome:
    status: str
    records: list[dict[str, Any]]
    message: str | None = None
    details: dict[str, Any] = field(default_factory=dict)  # stored in the unit record (e.g. resolved sizes)


@dataclass(frozen=True, kw_only=True)
class UnitKind:
    name: str
    description: str
    # -> list of argv lists (one child each, run in order under the unit's fabric), plus details to record
    commands: Callable[[Unit, Context], tuple[list[list[str]], dict[str, Any]]]
    # (unit, ctx, children: [(returncode, stdout, stderr, timed_out)]) -> Outcome
    collect: Callable[[Unit, Context, list[tuple[int | None, str, str, bool]]], Outcome]
    timeout_s: Callable[[StudyConfig], float]
    each_node: bool = False  # across nodes: every node runs it for itself and node 0 keeps each one's output
    # computed from the units run before it (relate, summary): --resume runs it again, though recorded ok,
    # whenever one of those ran again, so that what it stored matches what they hold now
    derived: bool = False


def shown(argv: list[str]) -> str:
    """The command as a person types it: `fabricbench ...` instead of `/usr/bin/python3 -m fabricbench ...`."""
    if argv[:3] == [sys.executable, "-m", "fabricbench"]:
        argv = ["fabricbench", *argv[3:]]
    elif argv[:2] == [sys.executable, "-m"]:
        argv = ["python3", "-m", *argv[2:]]
    return shlex.join(argv)


def placement(c: StudyConfig) -> dict[str, Any]:
    """The child's flags for where it runs: CPU ranks, or the study's GPUs."""
    return {"device": "cpu", "nprocs": c.nprocs} if c.device == "cpu" else {"gpus": ",".join(map(str, c.gpus))}


def model_args(c: StudyConfig) -> dict[str, str]:
    """The child's model flag: a builtin's name, or the config file's absolute path."""
    return {"model": c.model} if c.model else {"model_config": os.path.abspath(str(c.model_config))}


def last_json(stdout: str) -> dict[str, Any] | None:
    """The JSON document a child printed (the whole stdout, else its last line that parses)."""
    text = stdout.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        for line in reversed(text.splitlines()):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return None


def failure(children, what: str) -> Outcome:
    """The Outcome of a child that failed or timed out, with its last error line."""
    rc, out, err, timed_out = children[-1]
    if timed_out:
        return Outcome(status=Status.TIMEOUT, records=[], message=f"{what} did not finish in time")
    lines = [l.strip() for l in (err or "").splitlines() if l.strip()]
    errs = [l for l in lines if "Error" in l]
    return Outcome(status=Status.ERROR, records=[], message=f"{what} exit {rc}: " + ((errs or lines or ["no output"])[-1])[:400])


def file_records(path: Path, kind: str | None = None) -> list[dict[str, Any]]:
    """The records a child wrote to `path` (of `kind`), none if it wrote nothing."""
    return list(read_results(path, kind=kind)) if path.exists() else []


def batch_of(ctx: Context) -> int:
    """The per-GPU batch: the study's --batch-size, else the one the batch unit picked (8 if it failed)."""
    if ctx.config.batch_size is not None:
        return int(ctx.config.batch_size)
    picked = [r for r in ctx.records if r.get("kind") == "batch" and isinstance(r.get("chosen"), int)]
    return picked[-1]["chosen"] if picked else FALLBACK_BATCH


FALLBACK_BATCH = 8
