"""A package's names loaded on first use (PEP 562's module __getattr__): `import fabricbench` and
`import fabricbench.jobs.channel` (in every training rank) stay free of what the names' modules import.

    __getattr__ = lazy.attributes(__name__, {"run": "fabricbench.jobs.runner", ...})

A leaf module: the standard library only.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def attributes(package: str, table: dict[str, str]) -> Callable[[str], Any]:
    """The module __getattr__ of `package` serving each name of `table` (name -> the module defining it)."""
    def get(name: str) -> Any:
        if name in table:
            value = getattr(importlib.import_module(table[name]), name)
            setattr(sys.modules[package], name, value)  # found there from now on, without this call
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return get
