"""The command and its library call take the same defaults and refuse the same values, read from the real
commands: `fabricbench scaling` and fabricbench.scaling() sweep the same sizes (and compare with
fabricbench.compare() alike), and each option of `qualify` (`--fleet --fraction` included) takes the default
and the range of its QualifyConfig or FleetConfig field. Each check is shown to fail on a drift planted in
one side only.

    python3 -m pytest -q -p no:xdist tests/test_cli_library_drift.py
"""

from __future__ import annotations

import dataclasses

import click
import pytest

from fabricbench.cli.hints import command
from fabricbench.declare import OPTION, Declared, declared
from fabricbench.errors import UsageError
from fabricbench.measuring import compare as compare_lib, scaling_run
from fabricbench.measuring.compare import SweepOptions, as_text
from fabricbench.measuring.config import SweepConfig
from fabricbench.cli.declared import shown_default
from fabricbench.qualifying.config import FleetConfig, QualifyConfig

# command -> the options its library call gives each child sweep when the caller gives none
LIBRARY_OPTIONS = {
    "scaling": lambda: scaling_run.default_options(),
    "compare": lambda: compare_lib.sweep_options(),
}
# values around the edges of a fraction's range, and inside it
FRACTIONS = (-0.1, 0.0, 1e-9, 0.5, 0.9, 1.0, 1.0 + 1e-9, 2.0)


def _param(cmd: click.Command, name: str) -> click.Parameter:
    return next(p for p in cmd.params if p.name == name)


def _same(value):
    """A default as the child sweep's argv gets it: a list as its comma text, a SizeSweep as written."""
    value = getattr(value, "spec", value)
    return as_text(value) if isinstance(value, (list, tuple)) else value


def sweep_drifts(name: str) -> list[str]:
    """Each child-sweep option whose default the command and its library call give differently (None in the
    library: the sweep's own default, SweepConfig's)."""
    cmd, lib = command(name), LIBRARY_OPTIONS[name]()
    sweep_defaults = {k: d for k, (_, d) in declared(SweepConfig).items()}
    out = []
    for f in dataclasses.fields(SweepOptions):
        p = next((p for p in cmd.params if p.name == f.name), None)
        if p is None:
            continue
        ours = getattr(lib, f.name)
        ours = sweep_defaults.get(f.name) if ours is None else ours
        theirs = p.default if p.default is not None else sweep_defaults.get(f.name)
        if _same(ours) != _same(theirs):
            out.append(f"{name} {p.opts[0]}: the command's default {_same(theirs)!r}, the library's {_same(ours)!r}")
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


@pytest.mark.parametrize("name", sorted(LIBRARY_OPTIONS))
def test_the_command_and_its_library_call_sweep_the_same(name):
    assert sweep_drifts(name) == []


def test_scaling_sweeps_the_bus_bandwidth_plateau_by_default():
    assert _param(command("scaling"), "sizes").default == scaling_run.SIZES == scaling_run.default_options().sizes


def test_a_planted_sizes_drift_fails(monkeypatch):
    monkeypatch.setattr(scaling_run, "SIZES", "1M-1G:x4")  # the library's side only: the command keeps 1G
    assert sweep_drifts("scaling") == ["scaling --sizes: the command's default '1G', the library's '1M-1G:x4'"]


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
