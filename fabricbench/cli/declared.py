"""Click options generated from config fields (fabricbench/declare.py): one declaration per option.

    @declared_option(SweepConfig, "iters")          # --iters, Count(1, 10,000,000), default 20, its help
    @config_options(StudyConfig, exclude=("out",))  # every declared field of a config, in field order

The flag, the default, the range and the help come from the field; the type from its kind (TYPES, below,
the one mapping of kinds to option types). `given(ctx, names)` is what the user gave on the command line
(not defaults), for commands whose library fills its own defaults (study --resume takes stored settings).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable

import click

from fabricbench.cli import types as T
from fabricbench.declare import Declared, declared

def _real(d: Declared, cls=T.Real) -> click.ParamType:
    """The click type of a numeric declaration, its range from Declared.bounds() (one set of ends)."""
    lo, hi = d.bounds()
    if cls is T.Duration:
        return T.Duration(lo, hi, lo_open=d.lo_open)
    if cls is T.Fraction:
        return T.Fraction(lo, hi, lo_open=d.lo_open, hi_open=d.hi_open, zero=d.zero_off)
    return T.Real(lo, hi, lo_open=d.lo_open, hi_open=d.hi_open, zero=d.zero_off, unit=d.unit)


TYPES: dict[str, Callable[[Declared], click.ParamType]] = {
    "count": lambda d: T.Count(*map(int, d.bounds())),
    "seconds": lambda d: _real(d, T.Duration),
    "fraction": lambda d: _real(d, T.Fraction),
    "number": lambda d: _real(d),
    "size": lambda d: T.Size(),
    "size list": lambda d: T.SizeList(),
    "GPU list": lambda d: T.GpuList(),
    "fabric": lambda d: T.FabricSpec(),
    "fabric list": lambda d: T.FabricSpec(many=True),
    "strategy list": lambda d: T.NameList(T.STRATEGY_REGISTRY, "strategy", allow_all=True),
    "op list": lambda d: T.NameList(T.OP_REGISTRY, "collective"),
    "text": lambda d: T.Text(),
    "choice": lambda d: T.Choice(list(d.choices)),
    "input file": lambda d: T.InputPath(),
    "input file or folder": lambda d: T.InputPath(folder=True),
    "output file": lambda d: T.OutputFile(),
    "output folder": lambda d: T.OutputFolder(),
}


def help_text(d: Declared, default: Any) -> str:
    text = d.help
    if d.default_by and default in (None, ()):
        text += f" [default: {d.default_by}]"
    if d.aliases:
        text += f" ({', '.join(d.aliases)}: a deprecated alias, accepted until the next release.)"
    return text


def declared_option(config: type, name: str, **override: Any) -> Callable:
    """The click option of `config`'s field `name`, from its declaration (override: click keywords)."""
    d, default = declared(config)[name]
    default = shown_default(default)
    kw: dict[str, Any] = {"help": help_text(d, default)}
    f = next(f for f in dataclasses.fields(config) if f.name == name)
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
        kw["required"] = True
    if d.kind == "flag":
        kw.update(is_flag=True, default=bool(default))
    else:
        kw.update(type=TYPES[d.kind](d), default=default, show_default=default is not None)
    kw.update(override)
    return click.option(d.flag, *d.aliases, name, **kw)


def shown_default(default: Any) -> Any:
    """A field's default as its option's text: a tuple as a comma list, a SizeSweep as its spec."""
    if isinstance(default, (tuple, list)):
        return ",".join(map(str, default)) if default else None
    if default is not None and not isinstance(default, (bool, int, float, str)):
        return str(default)
    return default


def config_options(config: type, *, exclude: Iterable[str] = (), only: Iterable[str] | None = None) -> Callable:
    """Every declared field of `config` (or `only` these, in that order) as click options."""
    table = declared(config)
    names = list(only) if only is not None else [n for n in table if n not in set(exclude)]

    def apply(f: Callable) -> Callable:
        for name in reversed(names):
            f = declared_option(config, name)(f)
        return f

    return apply


def given(ctx: click.Context, names: Iterable[str]) -> dict[str, Any]:
    """The parameters among `names` that the command line set (not their defaults)."""
    return {n: ctx.params[n] for n in names
            if n in ctx.params and ctx.get_parameter_source(n) != click.core.ParameterSource.DEFAULT}


def fields_of(config: type) -> list[str]:
    return [f.name for f in dataclasses.fields(config)]
