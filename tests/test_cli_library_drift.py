"""The command and its library call take the same defaults and refuse the same values, read from the real
commands: `fabricbench scaling` and fabricbench.scaling() sweep the same sizes (and compare with
fabricbench.compare() alike), and `qualify --fleet --fraction` accepts what fabricbench.qualifying.api.fleet
accepts. Each check is shown to fail on a drift planted in one side only.

    python3 -m pytest -q -p no:xdist tests/test_cli_library_drift.py
"""

from __future__ import annotations

import dataclasses
import inspect

import click
import pytest

from fabricbench.cli.hints import command
from fabricbench.declare import Declared, declared
from fabricbench.errors import UsageError
from fabricbench.measuring import compare as compare_lib, scaling_run
from fabricbench.measuring.compare import SweepOptions, as_text
from fabricbench.measuring.config import SweepConfig
from fabricbench.qualifying import api as qualify_api, fleet as fleet_lib

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


def _fleet_refuses(value: float) -> bool:
    try:
        fleet_lib.run_fleet([], fraction=value)  # no inputs: after the range check, it fails on those
    except UsageError as e:
        return str(e).startswith("--fraction")
    raise AssertionError("run_fleet([]) must refuse the empty fleet")


def fraction_drifts() -> list[str]:
    """Where `qualify --fraction` and the library's fleet differ: a value one accepts and the other refuses,
    or the default."""
    p = _param(command("qualify"), "fraction")
    ctx = click.Context(command("qualify"))
    out = []
    for value in FRACTIONS:
        try:
            p.type.convert(str(value), p, ctx)
            cli_refuses = False
        except click.BadParameter:
            cli_refuses = True
        if cli_refuses != _fleet_refuses(value):
            out.append(f"--fraction {value}: the command {'refuses' if cli_refuses else 'accepts'} it, "
                       f"the library {'accepts' if cli_refuses else 'refuses'} it")
    for call in (qualify_api.fleet, fleet_lib.run_fleet):
        default = inspect.signature(call).parameters["fraction"].default
        if default != p.default:
            out.append(f"--fraction: the command's default {p.default}, {call.__qualname__}'s {default}")
    return out


@pytest.mark.parametrize("name", sorted(LIBRARY_OPTIONS))
def test_the_command_and_its_library_call_sweep_the_same(name):
    assert sweep_drifts(name) == []


def test_scaling_sweeps_the_bus_bandwidth_plateau_by_default():
    assert _param(command("scaling"), "sizes").default == scaling_run.SIZES == scaling_run.default_options().sizes


def test_a_planted_sizes_drift_fails(monkeypatch):
    monkeypatch.setattr(scaling_run, "SIZES", "1M-1G:x4")  # the library's side only: the command keeps 1G
    assert sweep_drifts("scaling") == ["scaling --sizes: the command's default '1G', the library's '1M-1G:x4'"]


def test_qualify_fraction_one_range_one_default():
    assert fraction_drifts() == []
    assert not _fleet_refuses(1.0) and _fleet_refuses(0.0) and _fleet_refuses(float("nan"))


def test_a_planted_fraction_drift_fails(monkeypatch):
    narrower = dataclasses.replace(fleet_lib.FRACTION, hi_open=True)  # the library refuses 1.0 again
    assert isinstance(narrower, Declared)
    monkeypatch.setattr(fleet_lib, "FRACTION", narrower)
    assert fraction_drifts() == ["--fraction 1.0: the command accepts it, the library refuses it"]
    monkeypatch.undo()
    monkeypatch.setattr(_param(command("qualify"), "fraction"), "default", 0.8)
    assert len(fraction_drifts()) == 2  # both library signatures say 0.9
