"""What a fabric's variable may look like outside the process that needs it: the one masking rule, and
the one place that formats any text that may hold a fabric spec.

    fabricbench compare --fabrics default,x:SOME_TOKEN=abc     (shown and recorded as x:SOME_TOKEN=***)

A custom fabric's variables are shown by name everywhere, but their values only when the name is
NCCL_*, GLOO_* or CUDA_*; any other value (it can be a credential) is written as MASK. A value may hold
a comma (`x:TOKEN=a,b`): an item after a VAR=VALUE that is not itself VAR=VALUE continues that value, so
it is masked with it, and it is never echoed on its own (not even in "is not VAR=VALUE"). This module
sits below fabrics/ and results/ (it imports nothing of fabricbench), so every layer uses the same rule:
- `shown_spec`: a spec or a comma list of specs as it may be printed or recorded;
- `secret_values`: the values to hide, from specs (or a whole argv);
- `redact`: any text (an error, a warning, a progress line, an argv, a record's message) with them hidden.
"""

from __future__ import annotations

import re
from typing import Iterable

# A fabric's variable whose value may be printed and recorded; any other is shown by name as MASK.
PUBLIC_PREFIXES = ("NCCL_", "GLOO_", "CUDA_")
MASK = "***"
_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


def public_value(var: str, value: str) -> str:
    """The value as it may appear in a record or on screen: itself for NCCL_*/GLOO_*/CUDA_*, else MASK."""
    return value if var.startswith(PUBLIC_PREFIXES) else MASK


def public_env(variables: dict[str, str]) -> dict[str, str]:
    return {k: public_value(k, v) for k, v in variables.items()}


def _items(text: str) -> list[tuple[str, str | None, str | None]]:
    """'d,x:A=1,2,B=3' -> (prefix, var, value) per VAR=VALUE (a following plain item after a VAR=VALUE
    is part of its value: 'A' gets '1,2'), or (item, None, None) for an item that is no assignment."""
    out: list[tuple[str, str | None, str | None]] = []
    for item in str(text).split(","):
        colon_at, eq_at = item.find(":"), item.find("=")
        colon = colon_at != -1 and (eq_at == -1 or colon_at < eq_at)  # 'TOKEN=http://h' has no name
        head, rest = (item[:colon_at], item[colon_at + 1:]) if colon else ("", item)
        body = rest
        var, eq, val = body.partition("=")
        if eq:
            out.append((head + ":" if colon else "", var, val))
        elif out and out[-1][1] is not None and not colon:  # continues the value before it
            prefix, v, value = out[-1]
            out[-1] = (prefix, v, f"{value},{item}")
        else:
            out.append((item, None, None))
    return out


def shown_spec(text: str) -> str:
    """A fabric spec, or a comma list of them, as it may be printed: 'x:SOME_TOKEN=abc' ->
    'x:SOME_TOKEN=***'; 'x:TOKEN=a,b' -> 'x:TOKEN=***'; a malformed 'VAR=VALUE' (VAR not a name) -> '***'."""
    parts = []
    for prefix, var, value in _items(text):
        if var is None:
            parts.append(prefix)
        elif "=" in prefix or not _VAR.fullmatch(var.strip()):
            parts.append(MASK)  # no name we could judge: the whole item may be a secret
        else:
            parts.append(f"{prefix}{var}={public_value(var.strip(), value or '')}")
    return ",".join(parts)


def secret_values(texts: Iterable[str]) -> list[str]:
    """The values that must not be shown, from fabric specs or any argv: each VAR=VALUE whose VAR is not
    public (the whole value with its commas, and each comma part of it), longest first."""
    out: set[str] = set()
    for text in texts:
        for _, var, value in _items(str(text)):
            if var is None or not value or not value.strip():
                continue
            if _VAR.fullmatch(var.strip()) and public_value(var.strip(), value) != MASK:
                continue
            out.add(value.strip())
            out.update(p.strip() for p in value.split(",") if p.strip())
    return sorted(out, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret value replaced by MASK, where it stands as a whole word (so a short value
    does not mangle the words around it)."""
    for value in secrets:
        if value:
            text = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(value)}(?![A-Za-z0-9_])", MASK, text)
    return text
