"""A fabric: a named NCCL environment under which a measurement reruns in a fresh process.

    fabricbench fabrics                                   (the built-in ones)
    fabricbench compare --fabrics default,p2p-off,lo:GLOO_SOCKET_IFNAME=lo

NCCL reads its variables once per process, so each fabric needs its own process. `forbidden` names the
transports whose appearance in NCCL's log means the label did not happen (p2p-off with "via P2P" lines).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabricbench.errors import UsageError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A fabric never touches these: NVLS (NVLink SHARP) stays whatever the user has.
NEVER_SET = ("NCCL_NVLS_ENABLE",)


@dataclass(frozen=True, kw_only=True)
class Fabric:
    name: str
    env: tuple[tuple[str, str], ...] = ()  # variables the fabric sets, in order
    description: str = ""
    expected: str = "any"  # the transport NCCL should use, in words
    forbidden: tuple[str, ...] = field(default=())  # transport families ("P2P", "SHM") that must not appear
    builtin: bool = True

    def __post_init__(self) -> None:
        for var, _ in self.env:
            assert var not in NEVER_SET, f"fabric {self.name} sets {var}"

    @property
    def variables(self) -> dict[str, str]:
        return dict(self.env)

    def to_dict(self) -> dict:
        return {"name": self.name, "env": self.variables, "description": self.description,
                "expected_transport": self.expected, "forbidden_transports": list(self.forbidden),
                "builtin": self.builtin}


def parse_custom(spec: str, known: list[str]) -> Fabric:
    """'name:VAR=VAL,VAR=VAL' -> Fabric. The expected transport follows from NCCL_P2P/SHM_DISABLE."""
    name, sep, body = spec.partition(":")
    name = name.strip()
    if not sep or not body.strip():
        raise UsageError(f"fabric {spec!r}: unknown fabric; choose from {', '.join(known)} "
                         f"or define one as name:VAR=VAL[,VAR=VAL]")
    if not _NAME.match(name):
        raise UsageError(f"fabric {spec!r}: name {name!r} must be letters, digits, '_', '-' or '.'")
    if name in known:
        raise UsageError(f"fabric {spec!r}: {name!r} is a built-in fabric; give yours another name")
    env: list[tuple[str, str]] = []
    for item in body.split(","):
        var, eq, val = item.partition("=")
        var = var.strip()
        if not eq or not _VAR.match(var):
            raise UsageError(f"fabric {spec!r}: {item.strip()!r} is not VAR=VALUE")
        if var in NEVER_SET:
            raise UsageError(f"fabric {spec!r}: a fabric never sets {var} (NVLS stays as you have it); "
                             f"export it yourself if you mean it")
        if any(v == var for v, _ in env):
            raise UsageError(f"fabric {spec!r}: {var} is given twice")
        env.append((var, val.strip()))
    d = dict(env)
    forbidden: tuple[str, ...] = ()
    expected = "any"
    if d.get("NCCL_P2P_DISABLE") == "1":
        forbidden, expected = ("P2P",), "SHM"
        if d.get("NCCL_SHM_DISABLE") == "1":
            forbidden, expected = ("P2P", "SHM"), "NET"
    return Fabric(name=name, env=tuple(env), description="custom: " + ", ".join(f"{k}={v}" for k, v in env),
                  expected=expected, forbidden=forbidden, builtin=False)
