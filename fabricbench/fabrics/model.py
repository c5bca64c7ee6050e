"""A fabric: a named NCCL environment under which a measurement reruns in a fresh process.

    fabricbench fabrics                                   (the built-in ones)
    fabricbench compare --fabrics default,p2p-off,lo:GLOO_SOCKET_IFNAME=lo

NCCL reads its variables once per process, so each fabric needs its own process. `forbidden` names the
transports whose appearance in NCCL's log means the label did not happen (p2p-off with "via P2P" lines).
A fabric may also need a place of its own to run in (shaped:RATE: a network namespace, see shaped.py):
`unavailable()` says why it cannot be applied here, `isolation()` sets that place up and tears it down.
fabricbench/fabrics/apply.py is the one entry that applies a fabric.

Values are shown and recorded through `public_variables`: a custom fabric's variable outside
NCCL_*/GLOO_*/CUDA_* (`x:SOME_TOKEN=...`) appears by name with the value "***".
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Callable, Iterator

from fabricbench.errors import UsageError
from fabricbench.masking import MASK, public_env, shown_spec

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
    rate_bps: int | None = None  # the emulated link's rate in bit/s (shaped:RATE), else None
    gloo_description: str = ""  # what it is under gloo ranks where NCCL's words do not apply ("" : description)

    def described(self, backend: str | None) -> str:
        """The description that fits the backend the ranks run: NVLink and P2P mean nothing to gloo."""
        return (self.gloo_description if backend == "gloo" and self.gloo_description else self.description) \
            or self.name

    def __post_init__(self) -> None:
        for var, _ in self.env:
            assert var not in NEVER_SET, f"fabric {self.name} sets {var}"

    @property
    def variables(self) -> dict[str, str]:
        """The real values: for the child's environment only, never for a record or the screen."""
        return dict(self.env)

    @property
    def public_variables(self) -> dict[str, str]:
        return public_env(self.variables)

    @property
    def plain(self) -> bool:
        """Nothing to apply: the current environment as it is (the default fabric)."""
        return not self.env and self.rate_bps is None

    def unavailable(self) -> str | None:
        """Why this fabric cannot be applied on this machine; None when it can."""
        return None

    def inert_without_nccl(self) -> str | None:
        """Why this fabric would change nothing for ranks that use no NCCL (gloo): it only sets NCCL_*
        variables and shapes no link. Measured anyway, it would be the default fabric under another name,
        and its "ratio" noise; the caller waives it with this reason. None when it can apply."""
        if self.plain or self.rate_bps is not None or any(not var.startswith("NCCL_") for var, _ in self.env):
            return None
        names = " ".join(f"{k}={v}" for k, v in self.public_variables.items())
        return (f"fabric {self.name} only sets NCCL variables ({names}) and gloo ranks use no NCCL, so it would "
                f"change nothing; it applies to --backend nccl (GPUs)")

    @contextlib.contextmanager
    def isolation(self) -> Iterator[str | None]:
        """Set up the place the fabric's processes run in; yields a network namespace name or None."""
        yield None

    def to_dict(self) -> dict:
        return {"name": self.name, "env": self.public_variables, "description": self.description,
                "expected_transport": self.expected, "forbidden_transports": list(self.forbidden),
                "builtin": self.builtin, "rate_bps": self.rate_bps}


@dataclass(frozen=True, kw_only=True)
class FabricFamily:
    """Fabrics made from a parameter, 'family:PARAM' (shaped:200mbit): one module and one row in FAMILIES."""

    name: str
    syntax: str  # e.g. "shaped:RATE"
    description: str
    make: Callable[[str], Fabric]  # the whole spec -> the fabric (raises UsageError on a bad parameter)
    example: str  # a parameter shown in `fabricbench fabrics`, e.g. "1gbit"

    def to_dict(self) -> dict:
        return {"name": self.syntax, "family": self.name, "description": self.description}


def shown(spec: str) -> str:
    """A fabric spec as it may be printed: 'x:SOME_TOKEN=abc' -> 'x:SOME_TOKEN=***' (masking.shown_spec, the
    one rule: a value with commas is masked whole)."""
    return shown_spec(spec)


def parse_custom(spec: str, known: list[str]) -> Fabric:
    """'name:VAR=VAL,VAR=VAL' -> Fabric. The expected transport follows from NCCL_P2P/SHM_DISABLE."""
    name, sep, body = spec.partition(":")
    spec = shown(spec)  # messages below never echo a value that may be a secret
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
            # after a VAR=VALUE the item may be the rest of that value (a comma in a secret): shown masked
            raise UsageError(f"fabric {spec!r}: {shown_spec(item.strip()) if not env else MASK!r} is not "
                             f"VAR=VALUE (a value cannot hold a comma)")
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
    described = ", ".join(f"{k}={v}" for k, v in public_env(d).items())
    return Fabric(name=name, env=tuple(env), description="custom: " + described,
                  expected=expected, forbidden=forbidden, builtin=False)
