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
from fabricbench.declare import OPTION, WORDS, Declared, declared, shared

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
    "count list": lambda d: T.CountList(*map(int, d.bounds())),
    "GPU count": lambda d: T.GpuCount(),
    "size": lambda d: T.Size(),
    "size list": lambda d: T.SizeList(),
    "GPU list": lambda d: T.GpuList(),
    "fabric": lambda d: T.FabricSpec(),
    "fabric list": lambda d: T.FabricSpec(many=True),
    "strategy list": lambda d: T.NameList(T.STRATEGY_REGISTRY, "strategy", allow_all=True),
    "op list": lambda d: T.NameList(T.OP_REGISTRY, "collective"),
    "check list": lambda d: T.NameList(what="check"),  # a spec's check names: the spec is read by the call
    "text": lambda d: T.Text() if d.hi is None else T.Text(int(d.hi)),
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
    f = next(f for f in dataclasses.fields(config) if f.name == name)
    required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    default = override.pop("default", default)  # a command that leaves the field's default to its library
    return option(d, name, default, **{"required": required, **override})


def option(d: Declared, name: str, default: Any = None, *, required: bool = False, **override: Any) -> Callable:
    """The click option of a declaration (a config field's, or a CLI-only one of cli/options.py), with a
    hidden option per deprecated alias that maps to the same name and warns when used. `override` holds
    click keywords, and the words a command may say its own way (help, default_by: declare.shared)."""
    words = {k: override.pop(k) for k in WORDS if k in override}
    if words:
        d = shared(d, **words)[OPTION]
    if d.kind == "flag choice":
        return _flag_choice(d, name, default)
    default = shown_default(default)
    kw: dict[str, Any] = {"help": help_text(d, default)}
    if required and d.aliases:  # click would refuse the option's own slot before an alias fills it
        kw["callback"] = _required_or_alias(d)
    elif required:
        kw["required"] = True
    if d.kind == "flag":
        kw.update(is_flag=True, default=bool(default))
    else:
        kw.update(type=TYPES[d.kind](d), show_default=default is not None)
        # click (8.5) takes a given default=None as the value of a required option and never says it is
        # missing; where an alias may fill it, the callback says so and wants that None
        if default is not None or not required or d.aliases:
            kw["default"] = default
    kw.update(override)
    main = click.option(d.flag, name, **kw)
    hidden = [alias(a, name, d.flag, kw.get("type")) for a in d.aliases if d.kind != "flag"]

    def apply(f: Callable) -> Callable:
        for deco in (*hidden, main):
            f = deco(f)
        return f

    return apply


def _flag_choice(d: Declared, name: str, default: Any) -> Callable:
    """A "flag choice" field's flags (--inplace, --out-of-place, --both): each sets the field to its choice,
    and the default's flag is on when none is given."""
    flags = [click.option(f"--{c}", name, flag_value=c, help=h, **({"default": True} if c == default else {}))
             for c, h in zip(d.choices, d.each)]

    def apply(f: Callable) -> Callable:
        for deco in reversed(flags):  # the first choice outermost: --help lists them in the declared order
            f = deco(f)
        return f

    return apply


def _required_or_alias(d: Declared) -> Callable:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is None and ctx.params.get(param.name) is None:  # neither the flag nor an alias was given
            raise click.MissingParameter(ctx=ctx, param=param)
        return value if value is not None else ctx.params[param.name]

    return callback


DEPRECATED = "deprecated alias of"  # a hidden alias option's help, then the flag it maps onto


def alias(flag: str, name: str, new: str, type: click.ParamType, *, convert: Callable | None = None) -> Callable:
    """A deprecated flag kept for one release, hidden, mapped onto `name` (an option whose flag is
    `new`), that warns when used; `convert` turns its value into the new option's (e.g. a count list)."""
    own = f"{name}__{flag.lstrip('-').replace('-', '_')}"  # its own slot: click tells which flag was given

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is None or value == ():
            return
        click.echo(f"warning: {flag} is a deprecated name of {new}, accepted until the next release; "
                   f"write {new}", err=True)
        ctx.params[name] = convert(value) if convert else value  # the new option, processed later, keeps it
        ctx.set_parameter_source(name, click.core.ParameterSource.COMMANDLINE)

    return click.option(flag, own, type=type, hidden=True, expose_value=False, callback=callback,
                        help=f"{DEPRECATED} {new}")  # hidden: read by docs/options.md's test, not shown


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
