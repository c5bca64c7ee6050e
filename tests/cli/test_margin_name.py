"""`margin` is one number only: ±δ, the equivalence margin of a paired comparison (statistics/comparison.py).
Every config the CLI is made from is read through its declarations (fabricbench/declare.declared), and
every option of every command through click: no other field, flag or alias says "margin". The batch
picker's distance from --gain is its `clearance`, advise's spare GPU memory its `headroom_bytes`.

    python3 -m pytest -q tests/cli/test_margin_name.py
"""

from __future__ import annotations

import dataclasses
import sys

import click
import pytest

from fabricbench.cli.commands import COMMANDS
from fabricbench.cli.hints import command
from fabricbench.declare import OPTION, Declared, declared
from fabricbench.statistics.comparison import MARGIN
from clirun import refused

# the commands whose --margin is the comparison's ±δ, and the configs whose `margin` field it is
COMPARING = {"train", "study"}


def _all_commands() -> dict[str, click.Command]:
    out = {}
    for name in COMMANDS:
        cmd = command(name)
        assert cmd is not None, name
        out[name] = cmd
    return out


def _configs() -> list[type]:
    """Every declared config class loaded once every command is: the ones the CLI is made from."""
    _all_commands()
    found: dict[str, type] = {}
    for mod in list(sys.modules.values()):
        if not getattr(mod, "__name__", "").startswith("fabricbench"):
            continue
        for obj in list(vars(mod).values()):
            if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__.startswith("fabricbench") \
                    and any(OPTION in f.metadata for f in dataclasses.fields(obj)):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


def _says_margin(d: Declared, name: str = "") -> bool:
    return "margin" in name.lower() or any("margin" in f.lower() for f in (d.flag, *d.aliases))


def test_the_configs_are_found():
    """The walk below reads the configs it should: if a config moved out of sight, this says so."""
    names = {c.__name__ for c in _configs()}
    assert {"SweepConfig", "TrainConfig", "StudyConfig", "ExecConfig"} <= names, names


def test_only_the_comparison_margin_is_a_margin_field():
    for config in _configs():
        for name, (d, default) in declared(config).items():
            if not _says_margin(d, name):
                continue
            assert name == "margin" and d.flag == "--margin" and not d.aliases, (config.__name__, name, d)
            assert d.kind == "fraction" and d.hi <= 0.5, (config.__name__, d)  # a ±δ, not a factor
            assert isinstance(default, float) and 0 < default < 0.5, (config.__name__, default)


def test_no_other_declaration_says_margin():
    """A Declared outside a config (a command's own option, such as qualify's --factor) is read too."""
    _all_commands()
    for mod in list(sys.modules.values()):
        if not getattr(mod, "__name__", "").startswith("fabricbench"):
            continue
        for attr, obj in list(vars(mod).items()):
            if isinstance(obj, Declared):
                assert not _says_margin(obj), f"{mod.__name__}.{attr}: {obj.flag} {obj.aliases}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_option_but_the_comparison_margin_is_named_margin(name):
    cmd = command(name)
    for p in cmd.params:
        said = [o for o in (*p.opts, *getattr(p, "secondary_opts", ())) if "margin" in o.lower()]
        if not said and "margin" not in (p.name or ""):
            continue
        assert name in COMPARING and p.opts == ["--margin"] and p.name == "margin" and not p.hidden, \
            (name, p.opts, p.name)


def test_the_comparison_margin_is_one_default():
    from fabricbench.studying.config import StudyConfig
    from fabricbench.training.config import TrainConfig

    assert declared(TrainConfig)["margin"][1] == MARGIN == declared(StudyConfig)["margin"][1]


def test_qualify_refuses_the_old_margin_alias(capsys):
    assert "--margin" in refused(["qualify", "--init", "x.toml", "--from", "r.jsonl", "--margin", "0.9"], capsys)
