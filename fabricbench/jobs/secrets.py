"""Secrets never leave: a custom fabric's values outside NCCL_*, GLOO_* and CUDA_* reach a child only
through its environment (fabrics.env.carry: the child's argv names the fabric by its name) or a 0600 file.

    fabricbench sweep --fabric sec:MY_TOKEN=abc ...   (the child runs `fabricbench sweep --fabric sec`)
    write_private(ws / "spec.json", text)             (a file only this user can read)
    mask(text, ["sec:MY_TOKEN=abc"])                  ("sec:MY_TOKEN=***": for what is shown or written)

Everything shown or written (records, logs, reports, JUnit, specs copied to the output, stdout,
--dry-run) names fabrics through Fabric.name, Fabric.public_variables or fabrics.model.shown().
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from fabricbench.fabrics.model import shown
from fabricbench import masking
from fabricbench.outputs import open_output


def write_private(path: str | os.PathLike, text: str) -> Path:
    """Write `text` to a file only this user may read (0600 from its creation, never wider)."""
    path = Path(path)
    with open_output(path, "wb", perm=0o600, what="private file") as fh:  # never through a link (outputs.py)
        os.fchmod(fh.fileno(), 0o600)
        fh.write(text.encode())
    return path


def secret_values(specs: Iterable[str]) -> list[str]:
    """The values in fabric specs ('x:A=1,B=2') that are not public (masking.secret_values: the one rule,
    a value with commas whole and in parts)."""
    return masking.secret_values(specs)


def mask(text: str, specs: Iterable[str]) -> str:
    """`text` with every fabric spec of `specs` shown masked, and any secret value left in it as ***."""
    specs = list(specs)
    for spec in sorted(specs, key=len, reverse=True):
        text = text.replace(spec, shown(spec))
    return masking.redact(text, secret_values(specs))
