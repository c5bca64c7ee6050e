"""The environment a child process runs a fabric under, and where NCCL's log for it goes.

    fabricbench compare --fabrics default,p2p-off     (one child `fabricbench sweep` per fabric)

Precedence: the user's NCCL_* variables stay unless the fabric names the same variable (then a warning
says whose value wins). NCCL_NVLS_ENABLE is never set. To observe the transport, NCCL_DEBUG=INFO with
the INIT,P2P,SHM,NET subsystems is added and the log goes to files under `log_dir` (one per process:
NCCL expands %h and %p) — unless the user set NCCL_DEBUG, whose logging is then left alone (it reaches
the child's stdout, which is read instead).
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, field

from fabricbench.errors import UsageError
from fabricbench.fabrics.model import NEVER_SET, Fabric, parse_custom
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


def no_interface(name: str) -> UsageError:
    """The user's error when a fabric names a network interface this host does not have."""
    return UsageError(f"no network interface {name!r} here (GLOO_SOCKET_IFNAME or NCCL_SOCKET_IFNAME names it); "
                      f"list this host's interfaces with `ip -br link` and name one of them in the fabric")


def check_interfaces(env: dict[str, str], have: list[str] | None = None) -> None:
    """Raise no_interface() when `env` names an interface this host lacks, before any rank starts (a rank
    would find it only after its start-up, and every rank and every run would fail alike).

    GLOO_SOCKET_IFNAME is a list of exact names, each of which gloo opens. NCCL_SOCKET_IFNAME is a list of
    prefixes of which one must match ("=name" exact; "^..." excludes, which cannot name a missing one)."""
    names = [n for _, n in socket.if_nameindex()] if have is None else have
    for want in (w.strip() for w in env.get("GLOO_SOCKET_IFNAME", "").split(",")):
        if want and want not in names:
            raise no_interface(want)
    nccl = env.get("NCCL_SOCKET_IFNAME", "").strip()
    if nccl and not nccl.startswith("^"):
        exact = nccl.startswith("=")
        wants = [w.strip() for w in nccl.lstrip("=").split(",") if w.strip()]
        if wants and not any((n == w) if exact else n.startswith(w) for w in wants for n in names):
            raise no_interface(wants[0] if len(wants) == 1 else ",".join(wants))


# -- a custom fabric travels to children by name, its values in their environment -------------------------
TRAVEL = "FABRICBENCH_FABRICS"  # JSON {name: [[VAR, VALUE], ...]}: the custom fabrics a parent applied


def carry(fabric: Fabric, env: dict[str, str]) -> None:
    """Put a custom fabric's definition into a child's environment, so that the child's argv can name it by
    its name alone (`--fabric sec`, never `--fabric sec:MY_TOKEN=...`: argv is visible to every user)."""
    if fabric.builtin:
        return
    known = _travelled(env)
    known[fabric.name] = [list(kv) for kv in fabric.env]
    env[TRAVEL] = json.dumps(known)


def travelled(name: str, environ: dict[str, str] | None = None) -> Fabric | None:
    """The custom fabric `name` a parent carried into this process's environment, or None."""
    pairs = _travelled(os.environ if environ is None else environ).get(name)
    if not isinstance(pairs, list):
        return None
    return parse_custom(f"{name}:" + ",".join(f"{k}={v}" for k, v in pairs), [])


def _travelled(environ: dict[str, str]) -> dict:
    try:
        v = json.loads(environ.get(TRAVEL) or "{}")
    except json.JSONDecodeError:
        return {}
    return v if isinstance(v, dict) else {}


_KNOWN: dict[str, Fabric] = {}  # custom fabrics parsed in this process (a qualify spec's), by name


def remember(fabric: Fabric) -> str:
    """Keep a custom fabric parsed once, so that what follows names it by its name alone; returns it."""
    if not fabric.builtin:
        _KNOWN[fabric.name] = fabric
    return fabric.name


def known(name: str) -> Fabric | None:
    """A custom fabric by name: carried into this process by a parent, or remembered by this one."""
    return travelled(name) or _KNOWN.get(name)


def mask_known(text: str) -> str:
    """`text` with every VAR=VALUE of a known custom fabric's secret variable shown as VAR=***."""
    for fabric in list(_KNOWN.values()) + [f for n in _travelled(os.environ) if (f := travelled(n))]:
        for var, val in fabric.env:
            if val and public_value(var, val) != val:
                text = text.replace(f"{var}={val}", f"{var}={public_value(var, val)}")
    return text
