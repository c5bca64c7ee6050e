"""No option drifts between commands: read from the real commands, an option offered by two
commands has one range (its click type and the range it states), and one default where it means the same
thing. The differences made on purpose are listed below, each with why, and the list is exact: a command
that moves into or out of a listed difference fails too. The library refuses what the declaration refuses
(declare.check), and a deprecated name warns and maps onto the one name (docs/options.md).

    python3 -m pytest -q tests/cli/test_cli_drift.py
"""

from __future__ import annotations

import dataclasses

import click
import pytest

from fabricbench.cli import COMMANDS
from fabricbench.cli.declared import declared_option
from fabricbench.cli.hints import command
from fabricbench.declare import OPTION, declared
from fabricbench.errors import UsageError
from fabricbench.studying.config import StudyConfig
from fabricbench.training.config import TrainConfig
from clirun import refused

REQUIRED = "(required)"
# flag -> (the commands whose range differs from the rest, grouped as they agree; why)
RANGES_ON_PURPOSE = {
    "--out": ({"study", "qualify"}, "a study and a qualify run write a folder (records, report); the rest one file"),
    "--fabric": ({"import", "jobfit", "export"}, "a label to pick or give records, never applied: any name"),
    "--gpus": ({"estimate"}, "estimate touches no GPU: its --gpus is how many (a count, or a list counted)"),
    "--master-port": ({"study"}, "a study's units meet on the next port, so the study's own stops at 65534"),
    "--num-gpus": ({"scaling"}, "scaling measures several counts (2,4,8); advise picks one"),
}
# flag -> ({command: default} for every command that offers it; why they differ)
DEFAULTS_ON_PURPOSE = {
    "--batch-size": ({"train": 8, "estimate": None, "study": None, "advise": 1},
                     "train measures 8; study picks it on GPUs; estimate leaves activations out unless given; "
                     "advise sizes the smallest job"),
    "--fabric": ({"sweep": "default", "scaling": "default", "train": "default", "qualify": None, "import": None,
                  "jobfit": None, "export": None, "exec": "default"},
                 "qualify runs each check under the spec's fabric; the labels default to what the records hold"),
    "--fabrics": ({"compare": "default,p2p-off", "study": None}, "a study's default depends on --device"),
    "--iters": ({"sweep": 20, "compare": 20, "scaling": 20, "p2p": 20, "study": None},
                "a study sweeps fewer iterations on CPU (5) than on GPUs (20)"),
    "--warmup": ({"sweep": 5, "compare": 5, "scaling": 5, "p2p": 5, "study": None},
                 "a study warms up less on CPU (2) than on GPUs (5)"),
    "--nprocs": ({"sweep": None, "compare": None, "train": None, "study": 2},
                 "a study's ranks are CPU ranks (2, the fewest that exchange); elsewhere one per GPU"),
    "--ops": ({"sweep": "all_reduce,all_gather,reduce_scatter", "compare": "all_reduce", "scaling": "all_reduce"},
              "a sweep maps every collective; compare and scaling ask one question of one"),
    "--sizes": ({"sweep": "8-8G:x4", "compare": "1M-1G:x4", "scaling": "1G", "study": None},
                "sweep spans latency to bandwidth; compare the sizes where fabrics differ; scaling the bus "
                "bandwidth plateau; study what the strategies' traces sent"),
    "--size": ({"p2p": "256M", "export": None}, "p2p copies a buffer; export picks one of the recorded sizes"),
    "--timeout": ({"sweep": 300.0, "compare": 300.0, "scaling": 300.0, "train": 1800.0, "exec": None},
                  "a sweep's hung step against a train rank without progress (start-up, a model step); exec's "
                  "whole command, unbounded unless given (a user's training job runs as long as it runs)"),
}


def table(cmds: dict[str, click.Command]) -> dict[str, dict[str, tuple[tuple[str, str], object]]]:
    """flag -> {command: ((type, stated range), default)} over every visible option of every command."""
    out: dict[str, dict] = {}
    for name, cmd in cmds.items():
        for p in cmd.params:
            if not isinstance(p, click.Option) or p.hidden or p.name == "help":
                continue
            t = p.type
            rng = (type(t).__name__, t.describe() if hasattr(t, "describe") else "")
            if p.is_flag:
                default = bool(p.default) if p.default not in (None, click.core.UNSET) else False
            elif p.required:
                default = REQUIRED
            else:
                default = None if p.default is click.core.UNSET else p.default
            out.setdefault(p.opts[0], {})[name] = (rng, default)
    return out


def drift(cmds: dict[str, click.Command]) -> list[str]:
    """Every disagreement between commands not listed on purpose, in words."""
    bad = []
    for flag, uses in table(cmds).items():
        if len(uses) < 2:
            continue
        groups: dict[tuple, set[str]] = {}
        for name, (rng, _) in uses.items():
            groups.setdefault(rng, set()).add(name)
        if len(groups) > 1:
            listed = RANGES_ON_PURPOSE.get(flag, (set(), ""))[0]
            if {frozenset(g) for g in groups.values()} != {frozenset(listed), frozenset(set(uses) - listed)}:
                bad.append(f"{flag}: ranges differ: " + "; ".join(f"{sorted(g)} {r[1]}" for r, g in groups.items()))
        defaults = {name: d for name, (_, d) in uses.items() if d != REQUIRED}  # required: none to differ
        if len({repr(d) for d in defaults.values()}) > 1 and defaults != DEFAULTS_ON_PURPOSE.get(flag, ({},))[0]:
            bad.append(f"{flag}: defaults differ: {defaults}")
    for flag, (listed, _) in DEFAULTS_ON_PURPOSE.items():  # a listed difference that is gone: the list is stale
        now = {name: d for name, (_, d) in table(cmds).get(flag, {}).items() if d != REQUIRED}
        if now != listed:
            bad.append(f"{flag}: listed on purpose as {listed}, now {now}")
    return bad


def real() -> dict[str, click.Command]:
    return {name: command(name) for name in COMMANDS}


def test_no_option_drifts_between_commands():
    assert drift(real()) == []


def test_every_difference_on_purpose_says_why():
    for flag, (cmds, why) in {**RANGES_ON_PURPOSE, **DEFAULTS_ON_PURPOSE}.items():
        assert cmds and len(why) > 20, flag


def _rebuilt(config: type, name: str) -> click.Command:
    """A command with the one option of `config`'s field `name`, built from its declaration now."""
    return declared_option(config, name)(click.command()(lambda **_: None))


def _patch(monkeypatch, config: type, name: str, **change) -> None:
    f = config.__dataclass_fields__[name]
    d = f.metadata[OPTION]
    monkeypatch.setattr(f, "metadata", {**f.metadata, OPTION: dataclasses.replace(d, **change)})


def test_a_range_broken_on_purpose_is_caught(monkeypatch):
    """study's --max-repeats back to its old 1-20 while train keeps 1-50: the test above would fail, and
    the library refuses 30 as the CLI would."""
    cmds = real()  # first: a command imported while the field is patched would keep the patch for good
    _patch(monkeypatch, StudyConfig, "max_repeats", hi=20)
    broken = _rebuilt(StudyConfig, "max_repeats")
    cmds["study"] = click.Command("study", params=[*[p for p in cmds["study"].params if p.name != "max_repeats"],
                                                   *broken.params])
    found = drift(cmds)
    assert len(found) == 1 and found[0].startswith("--max-repeats: ranges differ") and "1 to 20" in found[0], found
    with pytest.raises(UsageError, match=r"--max-repeats 30: outside 1 to 20"):
        StudyConfig(out="x", model="tiny-mistral", max_repeats=30)


def test_a_default_broken_on_purpose_is_caught(monkeypatch):
    """train's --margin default moved to 0.05 while study keeps 0.02: caught."""
    cmds = real()  # first: imported under the patch, the real train command would keep 0.05 in this worker
    f = TrainConfig.__dataclass_fields__["margin"]
    monkeypatch.setattr(f, "default", 0.05)
    cmds["train"] = click.Command("train", params=[*[p for p in cmds["train"].params if p.name != "margin"],
                                                   *_rebuilt(TrainConfig, "margin").params])
    found = drift(cmds)
    assert len(found) == 1 and found[0].startswith("--margin: defaults differ"), found


def test_a_stale_list_is_caught(monkeypatch):
    monkeypatch.setitem(DEFAULTS_ON_PURPOSE, "--steps", ({"train": 8, "study": 9}, "x" * 30))
    assert any(f.startswith("--steps: listed on purpose") for f in drift(real()))


@pytest.mark.parametrize("config", [TrainConfig, StudyConfig])
def test_library_refuses_what_the_declaration_refuses(config):
    base = {"strategies": ["ddp"]} if config is TrainConfig else {"out": "x"}
    for field, bad in (("repeat_budget_s" if config is StudyConfig else "time_budget_s", -5),
                       ("repeat_budget_s" if config is StudyConfig else "time_budget_s", 0),
                       ("max_repeats", 51), ("repeats", 0), ("stall_timeout_s", 1.0), ("margin", 0.5),
                       ("steps", 0), ("precision", "fp8")):
        with pytest.raises(UsageError) as e:
            config(**base, model="tiny-mistral", **{field: bad})
        d, _ = declared(config)[field]
        assert str(e.value).startswith(f"{d.flag} {bad}:"), str(e.value)
        assert "--time-budget" not in str(e.value)


@pytest.mark.parametrize("cmd", [["train", "--strategies", "ddp", "--device", "cpu", "--model", "tiny-mistral"],
                                 ["study", "--device", "cpu", "--model", "tiny-mistral", "--out", "never",
                                  "--dry-run"]])
def test_repeat_budget_zero_is_refused_by_its_name(cmd, capsys):
    line = refused([*cmd, "--repeat-budget", "0"], capsys)
    assert "--repeat-budget 0 is outside (0, 604800 (7 days)] s" in line and "--time-budget" not in line


def test_repeats_have_one_range_in_train_and_study():
    for flag in ("repeats", "max_repeats"):
        a, b = declared(TrainConfig)[flag][0], declared(StudyConfig)[flag][0]
        assert (a.lo, a.hi) == (b.lo, b.hi) == (1, 50)


def test_stall_timeout_is_declared_once():
    from fabricbench.jobs.heartbeat import STALL_TIMEOUT
    from fabricbench.measuring.config import SweepConfig

    for config in (SweepConfig, TrainConfig, StudyConfig):
        d = declared(config)["stall_timeout_s"][0]
        assert (d.flag, d.kind, d.lo, d.hi, d.unit) == (STALL_TIMEOUT.flag, "seconds", STALL_TIMEOUT.lo,
                                                         STALL_TIMEOUT.hi, "s")
