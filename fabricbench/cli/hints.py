"""A library error's suggestion, said in the flags of the command that printed it: the one mapping from
library arguments to flags.

    fabricbench p2p            (no GPU: "gpus ...: no CUDA GPU is visible here", and no hint: p2p has no
                                --engine, so the CPU-ranks suggestion that sweep prints is left out)
    fabricbench sweep          ("...; on CPU, run with `fabricbench sweep --engine torch --backend gloo
                                --nprocs 2`")

The library writes a hint in its own argument names (errors.UsageError.hint: {"engine": "torch"}), as a
caller of fabricbench.sweep(...) would type it. Here each argument becomes the option of the printing
command whose parameter has that name; an alternative naming an argument the command has no option for
is left out, so no hint names a flag that its command lacks (tests/cli/test_cli_hints.py parses every one).
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from fabricbench.cli.commands import COMMANDS


def command(name: str | None) -> click.Command | None:
    if name not in COMMANDS:
        return None
    module, _, attr = COMMANDS[name][0].partition(":")
    return getattr(importlib.import_module(module), attr)


def flags(cmd: click.Command, args: dict[str, Any]) -> list[str] | None:
    """The options of `cmd` that set `args` (library names), or None when one has no option there."""
    out: list[str] = []
    for name, value in args.items():
        opt = next((p for p in cmd.params if isinstance(p, click.Option) and p.name == name), None)
        if opt is None:
            return None
        if opt.is_flag:
            if value:
                out.append(opt.opts[0])
        else:
            out += [opt.opts[0], str(value)]
    return out


def to_flags(error: Exception, name: str | None) -> str:
    """The error's message with its hint (if any) as command lines of command `name`."""
    hints = getattr(error, "hints", None)
    if not hints:
        return str(error)
    cmd = command(name)
    lines = []
    for h in hints:
        f = flags(cmd, h) if cmd is not None else None
        if f is not None:
            lines.append("`" + " ".join(["fabricbench", name, *f]) + "`")
    return error.message + (f"; {error.hint_text} {' or '.join(lines)}" if lines else "")
