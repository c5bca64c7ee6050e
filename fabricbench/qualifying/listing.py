"""What `fabricbench qualify --list-specs | --list-kinds | --list-codes` prints: the built-in specs, the check
kinds with their keys, and the finding codes with their actions (library code; the CLI only maps flags).

    fabricbench qualify --list-kinds
"""

from __future__ import annotations

from fabricbench.qualifying.checks import CHECKS
from fabricbench.qualifying.codes import CODES
from fabricbench.qualifying.spec import builtin_names, load_spec


def spec_lines() -> list[str]:
    out = []
    for n in builtin_names():
        s = load_spec(f"builtin:{n}")
        out.append(f"builtin:{n:18s} {len(s.checks):2d} checks  {s.description or s.name}")
    return out


def kind_lines() -> list[str]:
    out = []
    for k in CHECKS:
        out.append(f"{k.name:12s} {k.description}")
        for key, f in k.fields.items():
            out.append(f"    {key:24s} {f.expects}{' (required)' if f.required else ''}: {f.doc}")
    return out


def code_lines() -> list[str]:
    out = []
    for c in CODES:
        out.append(f"{c.code:24s} {c.kind}/{c.criterion}: {c.meaning}")
        if c.action:
            out.append(f"{'':24s} action: {c.action}")
    return out
