"""The command and its library call take the same defaults and refuse the same values, read from the real
commands: `fabricbench scaling` and fabricbench.scaling(ScalingConfig()) sweep the same sizes (compare with
CompareConfig() and p2p with P2PConfig() alike, their counts in the same ranges), and each option of
`qualify` (`--fleet --fraction` included) takes the default and the range of its QualifyConfig or FleetConfig
field. Each check is shown to fail on a drift planted in one side only.

    python3 -m pytest -q -p no:xdist tests/cli/test_cli_library_drift.py
"""

from __future__ import annotations

import dataclasses

import click
import pytest

from fabricbench.cli.hints import command
from fabricbench.declare import OPTION, Declared, declared
from fabricbench.errors import UsageError
from fabricbench.measuring import compare_run, p2p_run, scaling_run
from fabricbench.measuring.child_sweeps import as_text
from fabricbench.measuring.config import SweepConfig
from fabricbench.cli.declared import shown_default
from fabricbench.importing.api import ImportConfig
from fabricbench.qualifying.config import FleetConfig, QualifyConfig
from fabricbench.relating.relate_run import RelateConfig
from fabricbench.sizes import parse_size
from fabricbench.studying.config import StudyConfig

# command -> the config its library call takes when the caller builds it with no arguments (its child sweep a
# SweepConfig template: the command's sweep options are that template's fields)
LIBRARY_CONFIGS = {
    "scaling": lambda: scaling_run.ScalingConfig(),
    "compare": lambda: compare_run.CompareConfig(),
    "p2p": lambda: p2p_run.P2PConfig(),
}
# values around the edges of a fraction's range, and inside it
FRACTIONS = (-0.1, 0.0, 1e-9, 0.5, 0.9, 1.0, 1.0 + 1e-9, 2.0)


def _param(cmd: click.Command, name: str) -> click.Parameter:
    return next(p for p in cmd.params if p.name == name)


def _same(value):
    """A default as the child sweep's argv gets it: a list as its comma text, a SizeSweep as written."""
    value = getattr(value, "spec", value)
    return as_text(value) if isinstance(value, (list, tuple)) else value


def _fields(config) -> list[tuple[str, object, object]]:
    """(field, its value in this config, its declaration or None) of a config and of its child sweep."""
    table = declared(type(config))
    out = [(f.name, getattr(config, f.name), table.get(f.name, (None,))[0]) for f in dataclasses.fields(config)
           if f.name != "sweep"]
    sweep = getattr(config, "sweep", None)
    if sweep is not None:
        table = declared(SweepConfig)
        out += [(f.name, getattr(sweep, f.name), table.get(f.name, (None,))[0]) for f in dataclasses.fields(sweep)]
    return out


def _refuses(cmd: click.Command, p: click.Parameter, value) -> bool:
    try:
        p.type.convert(str(value), p, click.Context(cmd))
        return False
    except click.BadParameter:
        return True


def sweep_drifts(name: str) -> list[str]:
    """Each option whose default the command and its library call give differently (the library's config
    built with no arguments, its child sweep included), and each count option whose range they draw
    differently (a value one side takes and the other refuses)."""
    cmd, lib = command(name), LIBRARY_CONFIGS[name]()
    out = []
    for field, ours, d in _fields(lib):
        p = next((p for p in cmd.params if p.name == field and not getattr(p, "hidden", False)), None)
        if p is None or d is None:
            continue
        theirs = p.default
        if d.kind == "size":  # "256M" on the command line, its bytes in the built config
            ours, theirs = parse_size(str(ours)), parse_size(str(theirs))
        if d.kind != "flag" and _same(ours) != _same(theirs):
            out.append(f"{name} {p.opts[0]}: the command's default {_same(theirs)!r}, the library's {_same(ours)!r}")
        if d.kind == "count":  # the ends of both sides' ranges, and just outside them
            ends = {*(int(x) for x in d.bounds()), p.type.lo, p.type.hi}
            for value in sorted({v + k for v in ends for k in (-1, 0, 1)}):
                cli = _refuses(cmd, p, value)
                if cli != (d.refusal(value) is not None):
                    out.append(f"{name} {p.opts[0]} {value}: the command {'refuses' if cli else 'takes'} it, "
                               f"the library {'takes' if cli else 'refuses'} it")
    return out


EDGES = {"fraction": FRACTIONS, "count": (-1, 0, 1, 2, 3, 4, 10_000_001)}  # by declared kind
# qualify's configs, each with the fields it needs besides the one tried (never read: a config reads no file)
QUALIFY_CONFIGS = {QualifyConfig: {"spec": "builtin:cpu-lab"}, FleetConfig: {"inputs": ("node1/", "node2/")}}


def _config_refuses(config: type, name: str, value) -> bool:
    """Whether `config` refuses `value` for its field `name` (its range check; any other refusal fails)."""
    flag = declared(config)[name][0].flag
    try:
        config(**QUALIFY_CONFIGS[config], **{name: value})
    except UsageError as e:
        assert str(e).startswith(f"{flag} "), e
        return True
    return False


def qualify_drifts() -> list[str]:
    """Where `qualify`'s options and its configs' fields differ: a default, or a value around the edges of a
    declared range that one side accepts and the other refuses."""
    cmd = command("qualify")
    ctx = click.Context(cmd)
    out = []
    for config in QUALIFY_CONFIGS:
        for name, (d, default) in declared(config).items():
            p = _param(cmd, name)
            if p.default != shown_default(default):
                out.append(f"{d.flag}: the command's default {p.default!r}, {config.__name__}'s {default!r}")
            for value in EDGES.get(d.kind, ()):
                try:
                    p.type.convert(str(value), p, ctx)
                    cli_refuses = False
                except click.BadParameter:
                    cli_refuses = True
                if cli_refuses != _config_refuses(config, name, value):
                    out.append(f"{d.flag} {value}: the command {'refuses' if cli_refuses else 'accepts'} it, "
                               f"{config.__name__} {'accepts' if cli_refuses else 'refuses'} it")
    return out


@pytest.mark.parametrize("name", sorted(LIBRARY_CONFIGS))
def test_the_command_and_its_library_call_sweep_the_same(name):
    assert sweep_drifts(name) == []


def test_scaling_sweeps_the_bus_bandwidth_plateau_by_default():
    assert _param(command("scaling"), "sizes").default == scaling_run.SIZES == \
        str(scaling_run.ScalingConfig().sweep.sizes)


def test_a_planted_sizes_drift_fails(monkeypatch):
    monkeypatch.setattr(scaling_run, "SIZES", "1M-1G:x4")  # the library's side only: the command keeps 1G
    assert sweep_drifts("scaling") == ["scaling --sizes: the command's default '1G', the library's '1M-1G:x4'"]


def test_a_planted_compare_drift_fails(monkeypatch):
    monkeypatch.setattr(compare_run, "OPS", ("all_gather",))  # the library's side only: the command keeps all_reduce
    assert sweep_drifts("compare") == ["compare --ops: the command's default 'all_reduce', the library's 'all_gather'"]


def test_a_planted_p2p_range_drift_fails(monkeypatch):
    narrower = dataclasses.replace(declared(p2p_run.P2PConfig)["iters"][0], hi=1_000_000)  # the library's side only
    field = p2p_run.P2PConfig.__dataclass_fields__["iters"]
    monkeypatch.setattr(field, "metadata", {**field.metadata, OPTION: narrower})
    assert sweep_drifts("p2p") == [f"p2p --iters {n}: the command takes it, the library refuses it"
                                   for n in (1_000_001, 9_999_999, 10_000_000)]


def test_qualify_options_one_range_one_default():
    assert qualify_drifts() == []
    assert not _config_refuses(FleetConfig, "fraction", 1.0) and _config_refuses(FleetConfig, "fraction", 0.0)
    assert _config_refuses(FleetConfig, "fraction", float("nan"))
    assert _config_refuses(QualifyConfig, "tolerance", 1.0) and not _config_refuses(QualifyConfig, "tolerance", 0.0)
    assert _config_refuses(QualifyConfig, "level", 4) and not _config_refuses(QualifyConfig, "level", 3)


def test_a_planted_fraction_drift_fails(monkeypatch):
    field = FleetConfig.__dataclass_fields__["fraction"]
    narrower = dataclasses.replace(field.metadata[OPTION], hi_open=True)  # the library refuses 1.0 again
    assert isinstance(narrower, Declared)
    monkeypatch.setattr(field, "metadata", {OPTION: narrower})  # the library's side only: the command is built
    assert qualify_drifts() == ["--fraction 1.0: the command accepts it, FleetConfig refuses it"]
    monkeypatch.undo()
    monkeypatch.setattr(_param(command("qualify"), "fraction"), "default", 0.8)
    assert qualify_drifts() == ["--fraction: the command's default 0.8, FleetConfig's 0.9"]


def test_a_planted_tolerance_drift_fails(monkeypatch):
    p = _param(command("qualify"), "tolerance")
    monkeypatch.setattr(p.type, "hi_open", False)  # the command's side only: it takes 1.0 again
    assert qualify_drifts() == ["--tolerance 1.0: the command accepts it, QualifyConfig refuses it"]


# commands generated from one config: the config, with the fields it needs besides the one tried (never read)
GENERATED = {"study": (StudyConfig, {"out": "s", "model": "tiny-mistral"}),
             "relate": (RelateConfig, {"inputs": ("r.jsonl",)}),
             "import": (ImportConfig, {"files": ("a.log",)})}
GENERATED_EDGES = {"fraction": FRACTIONS}  # counts and seconds: each end of the declared range, and past it


def _cli_refuses(cmd: click.Command, name: str, value) -> bool:
    p = _param(cmd, name)
    try:
        p.type.convert(str(value), p, click.Context(cmd))
        return False
    except click.BadParameter:
        return True


def _range_refuses(config: type, base: dict, name: str, value) -> bool:
    """Whether `config` refuses `value` for `name` by its declared range (a cross-field refusal, such as
    --steps below --warmup-steps, is another check: not this one)."""
    try:
        config(**base, **{name: value})
    except UsageError as e:
        return str(e).endswith(f"({config.__name__}.{name})")
    return False


def generated_drifts(name: str) -> list[str]:
    """Where a command generated from its config and the config differ: a default, or a value around the ends
    of a declared range that one side takes and the other refuses."""
    config, base = GENERATED[name]
    cmd = command(name)
    out = []
    for field, (d, default) in declared(config).items():
        p = _param(cmd, field)
        given = None if p.default is click.core.UNSET else p.default  # a required option has no default at all
        if given != shown_default(default) and not (given in (None, ()) and default in (None, ())):
            out.append(f"{name} {d.flag}: the command's default {given!r}, {config.__name__}'s {default!r}")
        edges = GENERATED_EDGES.get(d.kind, ())
        if d.kind in ("count", "seconds"):
            lo, hi = d.bounds()
            step = 1 if d.kind == "count" else 0.5
            edges = tuple(type(step)(v) for v in (lo - step, lo, hi, hi + step))
        for value in edges:
            cli = _cli_refuses(cmd, field, value)
            if cli != _range_refuses(config, base, field, value):
                out.append(f"{name} {d.flag} {value}: the command {'refuses' if cli else 'takes'} it, "
                           f"{config.__name__} {'takes' if cli else 'refuses'} it")
    return out


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_a_generated_command_and_its_config_one_range_one_default(name):
    assert generated_drifts(name) == []


def test_a_planted_generated_drift_fails(monkeypatch):
    field = StudyConfig.__dataclass_fields__["max_repeats"]
    wider = dataclasses.replace(field.metadata[OPTION], hi=60)  # the library's side only: the command is built
    monkeypatch.setattr(field, "metadata", {**field.metadata, OPTION: wider})
    assert generated_drifts("study") == ["study --max-repeats 60: the command refuses it, StudyConfig takes it"]
    monkeypatch.undo()
    monkeypatch.setattr(_param(command("import"), "nranks"), "default", 8)  # the command's side only
    assert generated_drifts("import") == ["import --nranks: the command's default 8, ImportConfig's None"]
