"""Apply a fabric to the processes that measure: the one place a fabric becomes an environment and a place.

    from fabricbench.fabrics import get_fabric
    from fabricbench.fabrics.apply import applied
    with applied(get_fabric("shaped:200mbit"), env, log_dir=tmp) as launch:   # jobs.run does this
        procs.spawn(launch.argv([sys.executable, "-m", "fabricbench", "sweep", ...]), env=launch.env)
        record.update(launch.facts)

Every child run goes through the one child runner, which applies its fabric here: jobs.run(argv,
fabric=...) (fabricbench/jobs/runner.py); nothing else calls `applied` to start a child.

`applied` gives
- `env`: the child's environment (fabric_env: the user's variables, the fabric's on top with a warning
  where they differ, NCCL_NVLS_ENABLE never set; with `log_dir`, NCCL's INFO log goes there to read the
  transport) plus FABRICBENCH_FABRIC_APPLIED=<name>, which tells a `fabricbench sweep` started in it that
  the fabric is already in force (runner.run_sweep then measures in place instead of starting a child);
- `argv(cmd)`: the command, prefixed with `ip netns exec NS` when the fabric has a namespace (shaped:RATE);
- `facts`: what records carry: fabric, fabric_env (values outside NCCL_*/GLOO_*/CUDA_* as "***"),
  shaped_rate_bps, netns.
A fabric that cannot be applied here raises FabricWaived before anything starts; one that names a network
interface this host lacks raises the user's error (UsageError) then too. Whatever the fabric set
up (a namespace) is removed on the way out: normal exit, exception, Ctrl-C, SIGTERM (procs.Terminated,
raised from the signal while the fabric is applied, as in every command).
A custom fabric's definition travels in the child's environment (fabrics.env.carry), so the child's argv
names it by its name alone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from fabricbench import procs
from fabricbench.errors import FabricWaived
from fabricbench.fabrics import get_fabric
from fabricbench.fabrics.env import carry, check_interfaces, fabric_env
from fabricbench.fabrics.model import Fabric

MARKER = "FABRICBENCH_FABRIC_APPLIED"


@dataclass(kw_only=True)
class Launch:
    """How to start a child under a fabric; `fabric` None: nothing applied (the caller's environment, no
    prefix, no facts), for callers whose children may run with or without one (study units)."""

    fabric: Fabric | None
    env: dict[str, str]
    netns: str | None = None
    log_dir: str | None = None  # where NCCL's INFO log goes; None when fabricbench does not capture it
    warnings: list[str] = field(default_factory=list)  # already masked

    def argv(self, argv: Sequence[str]) -> list[str]:
        if self.netns is None:
            return list(argv)
        # By its full path: the child's environment may have a PATH without /usr/sbin.
        return [shutil.which("ip") or "ip", "netns", "exec", self.netns, *argv]

    @property
    def facts(self) -> dict[str, Any]:
        if self.fabric is None:
            return {}
        return {"fabric": self.fabric.name, "fabric_env": self.fabric.public_variables,
                "shaped_rate_bps": self.fabric.rate_bps, "netns": self.netns}


@contextlib.contextmanager
def applied(fabric: Fabric, base_env: dict[str, str] | None = None,
            log_dir: str | None = None) -> Iterator[Launch]:
    """The environment and command prefix that run processes under `fabric`; see the module docstring."""
    why = fabric.unavailable()
    if why:
        raise FabricWaived(f"fabric {fabric.name} is waived here: {why}")
    fenv = fabric_env(fabric, base_env, log_dir=log_dir)
    env = dict(fenv.env)
    env[MARKER] = fabric.name
    carry(fabric, env)  # the child's argv names a custom fabric by its name alone
    with procs.terminated_as_interrupt(), fabric.isolation() as netns:
        if netns is None:  # in a namespace of its own the fabric names that place's interfaces
            check_interfaces(env)
        yield Launch(fabric=fabric, env=env, netns=netns, log_dir=fenv.log_dir, warnings=fenv.warnings)


def in_force(spec: str, environ: dict[str, str] | None = None) -> bool:
    """Whether this process already runs under the fabric `spec` names (or it has nothing to apply)."""
    env = os.environ if environ is None else environ
    marker = env.get(MARKER)
    if marker is not None and marker == spec:
        return True

    fabric = get_fabric(spec)
    if fabric.plain:
        return True
    # The name alone could be another definition of a custom fabric: its values must be in force too.
    return marker == fabric.name and all(env.get(k) == v for k, v in fabric.env)


def stamp(record: dict[str, Any], fabric: Fabric) -> dict[str, Any]:
    """A record measured in a process a parent already put under `fabric` (study and qualify units run
    `fabricbench sweep --fabric X` inside the applied fabric) gets the facts a delegating sweep would have
    written: `shaped_rate_bps` and the masked variables in `extra.fabric_env`. The transport NCCL used is
    read from its log only by the process that captures that log (measuring/child.py)."""
    if fabric.plain:
        return record
    if record.get("shaped_rate_bps") is None:
        record["shaped_rate_bps"] = fabric.rate_bps
    record["extra"] = {**(record.get("extra") or {}), "fabric_env": fabric.public_variables}
    return record
