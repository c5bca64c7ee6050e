"""Typed jobs: a frozen config per job kind, whose child argv and resume key come from the type itself.

    from fabricbench.jobs.configs import ReportJob, SweepDelivery, job_key, sweep_command, to_argv
    job = ReportJob(out_dir="run", as_json=True)
    job.argv()          # ["run", "--json"]
    job.key             # stable across processes and runs: the same job, the same key
    to_argv(sweep_config), job_key(sweep_config)   # any config dataclass the same way (measuring's SweepConfig)
    sweep_command(sweep_config, SweepDelivery(fabric="p2p-off", out="o.jsonl"))   # a whole child sweep

A field becomes `--name-with-dashes VALUE` (None or (): left out; a bool: the bare flag when true; a tuple: a
comma list; a float: its shortest exact text). A field says otherwise in its own metadata (argv_field):
another flag name (`timeout_s` -> `--timeout`), its value as the flag (`inplace` -> `--both`), an
argument without a flag (`positional`: a report's folder, relate's files, before the options), or left
to the caller (`fabric`, which a job carries by name: fabrics.env.carry). A new option is one field: its
flag follows, and tests/e2e/test_fabric_apply.py (SweepConfig) and tests/unit/test_jobs.py (every job kind) fail
for a field that the child command does not accept. Each kind names its child program (PROGRAM); study's
units and qualify's checks build their children from these kinds, never from flag lists of their own. A
child sweep is the library's own SweepConfig (this layer lies below measuring, so it takes any config
dataclass) plus what the parent adds under a fabric (SweepDelivery): sweep_command; a child p2p or train
is measuring's P2PConfig or training's TrainConfig itself (child_command, then `--out`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from fabricbench.fabrics import get_fabric
from fabricbench.fabrics.env import carry, known
from fabricbench.fabrics.model import shown

ARGV = "fabricbench.argv"  # the key in a dataclass field's metadata


def argv_field(*, flag: str | None = None, choice: bool = False, skip: bool = False,
               positional: bool = False, fabric: bool = False, keyed: bool = True) -> dict[str, Any]:
    """Metadata for a config field: `flag` its option's name, `choice` the value is the flag itself
    (inplace="both" -> --both), `skip` the caller adds it (or it is not an option), `positional` an
    argument without a flag (a tuple: one argument per item), `fabric` a fabric spec, written by its name
    alone (a custom fabric's values travel in the child's environment: environment()), `keyed` False
    for a field that does not change what is measured (a time limit, where records go), so that the resume
    key stays the same when it changes (job_key)."""
    return {ARGV: {"flag": flag, "choice": choice, "skip": skip, "positional": positional, "fabric": fabric,
                   "keyed": keyed}}


FABRIC = argv_field(fabric=True)


def _text(v: Any) -> str:
    if isinstance(v, float):
        short = format(v, "g")
        return short if float(short) == v else repr(v)
    if isinstance(v, (tuple, list)):
        return ",".join(_text(x) for x in v)
    return str(v)  # SizeSweep's str is its spec ("1M-1G:x4", "1K,4K")


def to_argv(config: Any, *, leave_out: frozenset[str] = frozenset()) -> list[str]:
    """The arguments that rebuild `config` in a child command: positional ones first, then one option
    per field, in field order; the fields named in `leave_out` are not written (the child's default)."""
    args: list[str] = []
    for f in dataclasses.fields(config):
        meta = f.metadata.get(ARGV) or {}
        if meta.get("positional"):
            v = getattr(config, f.name)
            args += [_text(x) for x in v] if isinstance(v, (tuple, list)) else [_text(v)]
    for f in dataclasses.fields(config):
        meta = f.metadata.get(ARGV) or {}
        v = getattr(config, f.name)
        if meta.get("skip") or meta.get("positional") or v is None or v == () or f.name in leave_out:
            continue  # (): nothing given (no GPUs named)
        if meta.get("fabric") and "=" in str(v):  # a custom fabric's spec: its name alone, never its values
            v = get_fabric(v).name  # (argv is visible to every user: ps)
        if meta.get("choice"):
            args.append(f"--{v}")
        elif isinstance(v, bool):
            if v:
                args.append(meta.get("flag") or "--" + f.name.replace("_", "-"))
        else:
            args += [meta.get("flag") or "--" + f.name.replace("_", "-"), _text(v)]
    return args


def job_key(config: Any) -> str:
    """A stable resume key, "KIND-HASH": the config's kind and every field that changes what is measured,
    hashed (the same in every process and run). Fields marked keyed=False (time limits, --out) are left
    out, so a run resumed with more time finds what it measured before. A custom fabric enters as it is
    shown (fabrics.model.shown: values outside NCCL_*/GLOO_*/CUDA_* masked): keys are written into records,
    and a hash of a short credential can be reversed by trying values. So two runs under one custom
    fabric name that differ only in a masked value share their keys."""
    def plain(v: Any) -> Any:
        if isinstance(v, (tuple, list)):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        return v if isinstance(v, (int, float, str, bool)) or v is None else str(v)

    doc: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        meta = f.metadata.get(ARGV) or {}
        if not meta.get("keyed", True):
            continue
        v = getattr(config, f.name)
        doc[f.name] = shown(v) if meta.get("fabric") and isinstance(v, str) else plain(v)
    program = getattr(config, "PROGRAM", ())
    kind = program[-1] if program else type(config).__name__.lower()
    doc["kind"] = kind
    return f"{kind}-{hashlib.sha1(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:12]}"


def child_command(config: Any, *, leave_out: frozenset[str] = frozenset()) -> list[str]:
    """The whole child command of a config that names its program (PROGRAM: a Job, or a library config such
    as measuring's P2PConfig), run with this interpreter; `leave_out`: as to_argv."""
    return [sys.executable, "-m", *config.PROGRAM, *to_argv(config, leave_out=leave_out)]


def environment(spec: str | None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A child's environment: `base` (this process's) with the custom fabric `spec` names carried in it
    (fabrics.env.carry), since a child's argv names a fabric by its name alone."""
    env = dict(os.environ if base is None else base)
    fabric = (get_fabric(spec) if "=" in spec else known(spec)) if spec else None
    if fabric is not None:  # a custom fabric given whole, or one this process knows by name
        carry(fabric, env)
    return env


class Job:
    """What every job kind shares: its child argv and its resume key, both from its fields."""

    PROGRAM: ClassVar[tuple[str, ...]] = ()  # `python -m` what: ("fabricbench", "sweep"), or a module

    def argv(self) -> list[str]:
        return to_argv(self)

    def command(self) -> list[str]:
        """The whole child command, run with this interpreter."""
        return child_command(self)

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The child's environment: `base` (this process's) with the custom fabric the job names carried
        in it (fabrics.env.carry), since its argv names that fabric by its name alone."""
        return environment(getattr(self, "fabric", None), base)

    @property
    def key(self) -> str:
        return job_key(self)


@dataclass(frozen=True, kw_only=True)
class SweepDelivery:
    """What a parent adds to a child sweep it runs under a fabric: the fabric (by name), where the child
    writes, and whether it resumes from what that file already holds."""

    fabric: str = field(metadata=FABRIC)
    out: str
    quiet: bool = True
    resume: bool = False

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The child's environment, with the values of the custom fabric it names (argv has its name only)."""
        return environment(self.fabric, base)


def sweep_command(sweep: Any, delivery: SweepDelivery) -> list[str]:
    """The child `fabricbench sweep` for `sweep` (the library's SweepConfig: this layer cannot name it)
    delivered as `delivery` says: every option from the two types, none written by hand."""
    written = {f.name for f in dataclasses.fields(sweep) if not (f.metadata.get(ARGV) or {}).get("skip")
               and getattr(sweep, f.name) not in (None, False)}
    twice = written & {f.name for f in dataclasses.fields(delivery)}  # the child would get them twice
    if twice:
        raise ValueError(f"sweep_command: {sorted(twice)} come from the delivery, not the sweep")
    return [*child_command(sweep), *to_argv(delivery)]  # SweepConfig.PROGRAM names `fabricbench sweep`


@dataclass(frozen=True, kw_only=True)
class ScalingJob(Job):
    """A child `fabricbench scaling` (busbw inside and across NVLink islands), as study starts one."""

    PROGRAM = ("fabricbench", "scaling")
    gpus: tuple[int, ...] | None = None
    ops: str = "all_reduce"
    sizes: str = "1G"
    fabric: str | None = field(default=None, metadata=FABRIC)  # by name; values in environment()
    iters: int | None = None
    warmup: int | None = None
    out: str | None = None
    as_json: bool = field(default=False, metadata=argv_field(flag="--json"))


@dataclass(frozen=True, kw_only=True)
class EstimateJob(Job):
    """A child `fabricbench estimate` (model-state bytes per GPU per strategy), as study starts one."""

    PROGRAM = ("fabricbench", "estimate")
    model: str | None = None
    model_config: str | None = None
    num_gpus: int = field(metadata=argv_field(flag="--gpus"))  # estimate's --gpus is a count (once --num-gpus)
    batch_size: int | None = None
    seq_len: int | None = None  # None: the child's default
    image_size: int | None = None
    as_json: bool = field(default=False, metadata=argv_field(flag="--json"))


@dataclass(frozen=True, kw_only=True)
class RelateJob(Job):
    """A child `fabricbench relate FILES...` (predicted against observed slowdown), as study starts one."""

    PROGRAM = ("fabricbench", "relate")
    files: tuple[str, ...] = field(metadata=argv_field(positional=True))
    reference: str | None = None
    as_json: bool = field(default=False, metadata=argv_field(flag="--json"))


@dataclass(frozen=True, kw_only=True)
class ReportJob(Job):
    """A child `fabricbench report DIR` (a study's rankings and slowdowns), as study's summary starts one."""

    PROGRAM = ("fabricbench", "report")
    out_dir: str = field(metadata=argv_field(positional=True))
    as_json: bool = field(default=False, metadata=argv_field(flag="--json"))
