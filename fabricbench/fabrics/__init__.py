"""Fabrics: named NCCL environments a measurement reruns under, and the transport NCCL really used.

    fabricbench fabrics [--json]
    fabricbench compare --fabrics default,p2p-off,net --gpus 0,1

A fabric is a built-in (FABRICS below), one of a family (FAMILIES: `shaped:200mbit`, an emulated link
of known speed, fabricbench/fabrics/shaped.py) or a custom `name:VAR=VAL,VAR=VAL` from the command line.
fabricbench/fabrics/apply.py applies any of them to the processes that measure.
"""

from __future__ import annotations

from fabricbench.errors import UsageError
from fabricbench.fabrics.builtin import DEFAULT, NET, P2P_OFF
from fabricbench.fabrics.env import FabricEnv, fabric_env, known
from fabricbench.fabrics.model import Fabric, FabricFamily, parse_custom
from fabricbench.fabrics.shaped import FAMILY as SHAPED
from fabricbench.masking import shown_spec
from fabricbench.registry import Registry

FABRICS: Registry[Fabric] = Registry("fabric")
FABRICS.register("default", DEFAULT)
FABRICS.register("p2p-off", P2P_OFF)
FABRICS.register("net", NET)

FAMILIES: Registry[FabricFamily] = Registry("fabric family")
FAMILIES.register("shaped", SHAPED)


def get_fabric(spec: str) -> Fabric:
    """A built-in name, a family member 'shaped:200mbit', or a custom 'name:VAR=VAL,VAR=VAL'."""
    spec = spec.strip()
    family = spec.partition(":")[0].strip()
    if ":" in spec and family in FAMILIES:
        return FAMILIES.get(family).make(spec)
    if ":" not in spec:
        if spec in FABRICS:
            return FABRICS.get(spec)
        carried = known(spec)  # a custom fabric parsed once (here or by a parent), named by its name alone
        if carried is not None:
            return carried
        raise UsageError(f"unknown fabric {spec!r}; choose from {', '.join(FABRICS.names())}, "
                         f"{', '.join(f.syntax for f in FAMILIES)} or define one as name:VAR=VAL[,VAR=VAL]")
    return parse_custom(spec, FABRICS.names())


def parse_fabric_list(text: str) -> list[Fabric]:
    """'default,p2p-off,lo:A=1,B=2' -> fabrics; a VAR=VAL item continues the custom fabric before it."""
    fabrics = [get_fabric(s) for s in split_fabric_list(text)]
    names = [f.name for f in fabrics]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise UsageError(f"--fabrics names {', '.join(dups)} more than once")
    return fabrics


def split_fabric_list(text: str) -> list[str]:
    """'default,lo:A=1,B=2' -> ['default', 'lo:A=1,B=2']: a custom fabric is one item however many
    variables it sets (a VAR=VAL item continues the custom fabric before it)."""
    if text is None or not text.strip():
        raise UsageError(f"--fabrics is empty; choose from {', '.join(FABRICS.names())}")
    specs: list[str] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise UsageError(f"--fabrics {_shown_list(text)!r} has an empty item")
        if "=" in item and ":" not in item:
            if not specs or ":" not in specs[-1]:
                raise UsageError(f"--fabrics {_shown_list(text)!r}: {_shown_list(item)!r} belongs to no custom fabric; "
                                 f"write name:VAR=VAL[,VAR=VAL]")
            specs[-1] += "," + item
        else:
            specs.append(item)
    return specs


def listing() -> list[dict]:
    """`fabricbench fabrics`: each built-in as its dict, then each family as an example member's dict under
    the family's syntax and description, with whether it can be applied here (waived_here)."""
    rows = [f.to_dict() for f in FABRICS]
    for fam in FAMILIES:
        example = fam.make(f"{fam.name}:{fam.example}").to_dict()
        rows.append({**example, "name": fam.syntax, "description": fam.description,
                     "waived_here": fam.make(f"{fam.name}:{fam.example}").unavailable()})
    return rows


def _shown_list(text: str) -> str:
    """A --fabrics list as it may be printed (masking.shown_spec: the one rule)."""
    return shown_spec(text)


__all__ = ["FABRICS", "FAMILIES", "Fabric", "FabricEnv", "FabricFamily", "fabric_env", "get_fabric", "listing",
           "parse_fabric_list", "split_fabric_list"]
