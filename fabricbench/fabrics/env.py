"""The environment a child process runs a fabric under, and where NCCL's log for it goes.

    fabricbench compare --fabrics default,p2p-off     (one child `fabricbench sweep` per fabric)

Precedence: the user's NCCL_* variables stay unless the fabric names the same variable (then a warning
says whose value wins). NCCL_NVLS_ENABLE is never set. To observe the transport, NCCL_DEBUG=INFO with
the INIT,P2P,SHM,NET subsystems is added and the log goes to files under `log_dir` (one per process:
NCCL expands %h and %p) — unless the user set NCCL_DEBUG, whose logging is then left alone (it reaches
the child's stdout, which is read instead).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from fabricbench.fabrics.model import NEVER_SET, Fabric
from fabricbench.masking import public_value

DEBUG_SUBSYS = "INIT,P2P,SHM,NET"


@dataclass(kw_only=True)
class FabricEnv:
    env: dict[str, str]
    warnings: list[str] = field(default_factory=list)
    log_dir: str | None = None  # where NCCL_DEBUG_FILE points, when fabricbench chose it


def fabric_env(fabric: Fabric, base_env: dict[str, str] | None = None, *,
               log_dir: str | None = None) -> FabricEnv:
    base = dict(os.environ if base_env is None else base_env)
    env = dict(base)
    warnings = []
    for var, val in fabric.env:
        assert var not in NEVER_SET
        if var in base and base[var] != val:
            warnings.append(f"fabric {fabric.name} sets {var}={public_value(var, val)}, overriding your "
                            f"{var}={public_value(var, base[var])}")
        env[var] = val
    chosen_dir = None
    if log_dir is not None and "NCCL_DEBUG" not in base:
        env["NCCL_DEBUG"] = "INFO"
        env.setdefault("NCCL_DEBUG_SUBSYS", DEBUG_SUBSYS)
        if "NCCL_DEBUG_FILE" not in base:
            env["NCCL_DEBUG_FILE"] = os.path.join(log_dir, "nccl.%h.%p.log")
            chosen_dir = log_dir
    for var in NEVER_SET:  # belt and braces: exactly what the user had, or absent
        if var in base:
            env[var] = base[var]
        else:
            env.pop(var, None)
    return FabricEnv(env=env, warnings=warnings, log_dir=chosen_dir)
