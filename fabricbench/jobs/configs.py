"""Typed jobs: a frozen config per job kind, whose child argv and resume key come from the type itself.

    from fabricbench.jobs.configs import SweepJob, to_argv, job_key
    job = SweepJob(ops="all_reduce", sizes="1M-1G:x4", dtype="float32", iters=20, warmup=5, engine="native")
    job.argv()          # ["--ops", "all_reduce", "--sizes", "1M-1G:x4", ..., "--engine", "native"]
    job.key             # stable across processes and runs: the same job, the same key
    to_argv(sweep_config)   # any config dataclass the same way (measuring.config.SweepConfig)

A field becomes `--name-with-dashes VALUE` (None: left out; a bool: the bare flag when true; a tuple: a
comma list; a float: its shortest exact text). A field says otherwise in its own metadata (argv_field):
another flag name (`timeout_s` -> `--timeout`), its value as the flag (`inplace` -> `--both`), or left to
the caller (`fabric`, which a job carries by name: fabrics.env.carry). A new option is one field: its
flag follows, and tests/test_fabric_apply.py fails for a field that the child command does not accept.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

ARGV = "fabricbench.argv"  # the key in a dataclass field's metadata


def argv_field(*, flag: str | None = None, choice: bool = False, skip: bool = False) -> dict[str, Any]:
    """Metadata for a config field: `flag` its option's name, `choice` the value is the flag itself
    (inplace="both" -> --both), `skip` the caller adds it (or it is not an option)."""
    return {ARGV: {"flag": flag, "choice": choice, "skip": skip}}


def _text(v: Any) -> str:
    if isinstance(v, float):
        short = format(v, "g")
        return short if float(short) == v else repr(v)
    if isinstance(v, (tuple, list)):
        return ",".join(_text(x) for x in v)
    return str(v)  # SizeSweep's str is its spec ("1M-1G:x4", "1K,4K")


def to_argv(config: Any) -> list[str]:
    """The options that rebuild `config` in a child command, one per field, in field order."""
    args: list[str] = []
    for f in dataclasses.fields(config):
        meta = f.metadata.get(ARGV) or {}
        v = getattr(config, f.name)
        if meta.get("skip") or v is None:
            continue
        if meta.get("choice"):
            args.append(f"--{v}")
        elif isinstance(v, bool):
            if v:
                args.append(meta.get("flag") or "--" + f.name.replace("_", "-"))
        else:
            args += [meta.get("flag") or "--" + f.name.replace("_", "-"), _text(v)]
    return args


def job_key(config: Any) -> str:
    """A stable key: the config's kind and every field, hashed (the same in every process and run)."""
    def plain(v: Any) -> Any:
        if isinstance(v, (tuple, list)):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        return v if isinstance(v, (int, float, str, bool)) or v is None else str(v)

    doc = {f.name: plain(getattr(config, f.name)) for f in dataclasses.fields(config)}
    doc["kind"] = type(config).__name__
    return hashlib.sha1(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


class Job:
    """What every job kind shares: its child argv and its resume key, both from its fields."""

    def argv(self) -> list[str]:
        return to_argv(self)

    @property
    def key(self) -> str:
        return job_key(self)


@dataclass(frozen=True, kw_only=True)
class SweepJob(Job):
    """A child `fabricbench sweep`, as compare, scaling and qualify start one per fabric or GPU set."""

    ops: str  # comma list of collectives
    sizes: str  # a size spec ("1M-1G:x4", "64K,1M")
    dtype: str
    iters: int
    warmup: int
    engine: str
    backend: str | None = None
    gpus: tuple[int, ...] | None = None  # None: the child's default (all visible); gloo ranks drive none
    nprocs: int | None = None
    timeout_s: float | None = field(default=None, metadata=argv_field(flag="--timeout"))

    def __post_init__(self) -> None:
        if self.engine == "torch" and self.backend == "gloo" and self.gpus is not None:
            object.__setattr__(self, "gpus", None)  # gloo ranks drive no GPU: the sweep would ignore --gpus
        if self.nprocs == 0:
            object.__setattr__(self, "nprocs", None)


@dataclass(frozen=True, kw_only=True)
class CopyJob(Job):
    """A child `fabricbench p2p` (the copy matrix), as qualify's copy checks start it."""

    gpus: str | None = None
    size: str = "256M"
    iters: int = 20
    warmup: int = 5
    no_host: bool = False
    no_peer: bool = False


@dataclass(frozen=True, kw_only=True)
class TrainJob(Job):
    """A child `fabricbench train` of one strategy, as study and qualify start one."""

    strategy: str
    model: str | None = None
    model_config: str | None = None
    device: str = "cuda"
    gpus: str | None = None
    nprocs: int | None = None
    steps: int = 8
    warmup_steps: int = 3
    batch_size: int = 8
    seq_len: int | None = None
    image_size: int | None = None
    precision: str | None = None
    trace_steps: int | None = None
    repeats: int | None = 1  # a smoke test: one run (train repeats 3+ times by default, issue 19)
    target_ci: float | None = 0.0  # exactly `steps` steps (0: no stepping on until the median's CI is tight)
    fabric: str | None = None  # by name (a custom fabric's values travel in the environment)
    timeout_s: float | None = field(default=None, metadata=argv_field(flag="--timeout"))
