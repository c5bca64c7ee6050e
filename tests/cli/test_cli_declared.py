"""Options declared once: each config field carries its flag, default, unit and help
(fabricbench/declare.py), the CLI takes its options from them (fabricbench/cli/declared.py), and nothing
drifts: a command's option has its field's flag, aliases, default and help, and two commands never give
one concept two names or two defaults.

    python3 -m pytest -q tests/cli/test_cli_declared.py
"""

from __future__ import annotations

import dataclasses

import click
import pytest

from fabricbench.cli.declared import TYPES, shown_default
from fabricbench.cli.hints import command
from fabricbench.declare import OPTION, Declared, concept, declared
from fabricbench.advising.config import AdviseConfig
from fabricbench.exporting.api import ExportConfig
from fabricbench.importing.api import ImportConfig
from fabricbench.jobs.command import ExecConfig
from fabricbench.measuring import compare_run, scaling_run
from fabricbench.measuring.compare_run import CompareConfig
from fabricbench.measuring.config import SweepConfig
from fabricbench.measuring.p2p_run import P2PConfig
from fabricbench.measuring.scaling_run import ScalingConfig
from fabricbench.measuring.topo_run import TopoConfig
from fabricbench.qualifying.config import FleetConfig, QualifyConfig
from fabricbench.relating.jobfit_run import JobfitConfig
from fabricbench.relating.relate_run import RelateConfig
from fabricbench.studying.config import StudyConfig
from fabricbench.training.estimate_run import EstimateConfig
from fabricbench.training.launch import TrainConfig
from roots import DATA

# command -> the config its options come from, and the fields it leaves to others (with the reason)
COMMANDS = {
    "sweep": (SweepConfig, {}),
    "train": (TrainConfig, {}),
    "study": (StudyConfig, {}),
    "exec": (ExecConfig, {}),
    "estimate": (EstimateConfig, {}),
    "export": (ExportConfig, {}),
    "topo": (TopoConfig, {}),
    "jobfit": (JobfitConfig, {}),
    "advise": (AdviseConfig, {}),
    "qualify": (QualifyConfig, {}),
    "relate": (RelateConfig, {}),
    "import": (ImportConfig, {}),
    "compare": (SweepConfig, {f: "a library caller may set it in CompareConfig.sweep; the command keeps the sweep's"
                              for f in ("adaptive", "max_iters", "inplace", "graph", "graph_iters", "check",
                                        "nccl_lib", "seed", "buffers", "timing", "alloc", "stall_timeout_s")}
                | {"fabric": "each of --fabrics in turn (CompareConfig.fabrics)",
                   "gap_s": "a gapped sweep measures relate's link credit, never a comparison's prices"}),
    "scaling": (SweepConfig, {f: "a library caller may set it in ScalingConfig.sweep; the command keeps the sweep's"
                              for f in ("adaptive", "max_iters", "inplace", "graph", "graph_iters", "check",
                                        "nccl_lib", "seed", "buffers", "timing", "alloc", "stall_timeout_s")}
                | {"nprocs": "each GPU count's (CPU ranks: the count itself)",
                   "gap_s": "a gapped sweep measures relate's link credit, never a scaling's prices"}),
    "p2p": (P2PConfig, {}),
}
# a command whose SweepConfig options vary a template: the template's values are the options' defaults
TEMPLATES = {"compare": compare_run.default_sweep, "scaling": scaling_run.default_sweep}
# options a command words its own way (declare.shared: only the words, never the kind, range or default)
OWN_WORDS = {"compare": {"gpus", "ops", "nprocs"}, "scaling": {"gpus", "fabric"}}
# a command's own config beside the SweepConfig template it varies
OWN_CONFIGS = {"compare": CompareConfig, "scaling": ScalingConfig}
CONFIGS = (SweepConfig, TrainConfig, StudyConfig, ExecConfig, CompareConfig, ScalingConfig, P2PConfig)
# One flag, two ideas, each with its own default: said in each --help, and listed here on purpose.
SHARED_FLAGS = {"--timeout": {"step_timeout_s", "progress_timeout_s", "job_timeout_s"}}


def option_of(cmd: click.Command, name: str) -> click.Option | None:
    return next((p for p in cmd.params if isinstance(p, click.Option) and p.name == name), None)


def _parts(name: str):
    """(config, fields left to others, the instance whose values are the defaults or None, own words) of a
    command: its config, and the template's own config beside it."""
    config, left = COMMANDS[name]
    yield config, left, TEMPLATES[name]() if name in TEMPLATES else None, OWN_WORDS.get(name, set())
    if name in OWN_CONFIGS:
        yield OWN_CONFIGS[name], {}, None, set()


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_option_is_its_field(name):
    for config, left, template, words in _parts(name):
        _each_option_is_its_field(name, config, left, template, words)


def _each_option_is_its_field(name, config, left, template, words):
    cmd = command(name)
    for field, (d, default) in declared(config).items():
        default = getattr(template, field) if template is not None else default
        opt = option_of(cmd, field)
        if field in left:
            assert opt is None or opt.opts[0] == d.flag, f"{name} {field}: {opt.opts} against {d.flag}"
            continue
        assert opt is not None, f"{name} has no option for {config.__name__}.{field} ({d.flag})"
        if d.kind == "flag choice":  # a flag per choice, in the declared order, the default's on
            flags = [p for p in cmd.params if isinstance(p, click.Option) and p.name == field]
            assert [(p.opts, p.flag_value) for p in flags] == [([f"--{c}"], c) for c in d.choices], (name, field)
            assert [p.opts[0] for p in flags if p.default is True] == [f"--{default}"], (name, field)
            continue
        assert opt.opts == [d.flag], (name, field, opt.opts)
        hidden = {p.opts[0] for p in cmd.params if isinstance(p, click.Option) and p.hidden}
        assert set(d.aliases) <= hidden, f"{name} {d.flag}: aliases {d.aliases} are not all offered"
        if d.kind == "flag":
            assert opt.is_flag and opt.default is bool(default), (name, field)
            continue
        required = opt.required and default is None
        assert required or opt.default == shown_default(default), \
            f"{name} {d.flag}: default {opt.default!r}, field {default!r}"
        assert type(opt.type) is type(TYPES[d.kind](d)), (name, field, opt.type)
        assert getattr(opt.type, "lo", None) == getattr(TYPES[d.kind](d), "lo", None) and \
            getattr(opt.type, "hi", None) == getattr(TYPES[d.kind](d), "hi", None), (name, field, "range")
        assert field in words or d.help in opt.help, (name, field)


def _concepts() -> dict[str, list[tuple[str, str, Declared, object]]]:
    out: dict[str, list] = {}
    for config in CONFIGS:
        for field, (d, default) in declared(config).items():
            out.setdefault(concept(field, d), []).append((config.__name__, field, d, default))
    return out


def test_one_name_per_concept():
    for c, uses in _concepts().items():
        flags = {d.flag for _, _, d, _ in uses}
        assert len(flags) == 1, f"concept {c} has two names: {[(k, d.flag) for k, _, d, _ in uses]}"


def test_one_default_per_concept():
    """A concrete default is the same wherever the concept appears; a None default says who decides it
    (default_by), which is then the concept's rule for that command."""
    for c, uses in _concepts().items():
        concrete = {repr(default) for _, _, _, default in uses if default not in (None, ())}
        assert len(concrete) <= 1, f"concept {c} has two defaults: {[(k, f, v) for k, f, _, v in uses]}"
        for k, f, d, default in uses:
            required = getattr(globals()[k], "__dataclass_fields__")[f].default is dataclasses.MISSING and \
                getattr(globals()[k], "__dataclass_fields__")[f].default_factory is dataclasses.MISSING
            if default in (None, ()) and d.kind != "flag" and not required:
                assert d.default_by or d.kind in ("text", "input file", "input file or folder", "output file"), \
                    f"{k}.{f}: a None default must say who decides it (default_by)"


def test_one_concept_per_flag():
    by_flag: dict[str, set[str]] = {}
    for c, uses in _concepts().items():
        for _, _, d, _ in uses:
            by_flag.setdefault(d.flag, set()).add(c)
    for flag, cs in by_flag.items():
        assert len(cs) == 1 or cs == SHARED_FLAGS.get(flag), f"{flag} names {sorted(cs)}"


def test_deprecated_aliases_work_and_say_so():
    train = command("train")
    opt = option_of(train, "time_budget_s")
    assert opt.opts == ["--repeat-budget"] and "--time-budget: a deprecated alias" in opt.help
    ctx = train.make_context("train", ["--time-budget", "60", "--strategy", "ddp"])
    assert ctx.params["time_budget_s"] == 60.0 and ctx.params["strategies"] == "ddp"
    assert option_of(command("study"), "repeat_budget_s").opts == ["--repeat-budget"]


def test_max_repeats_is_one_default():
    assert TrainConfig.__dataclass_fields__["max_repeats"].default == \
        StudyConfig.__dataclass_fields__["max_repeats"].default == 5
    assert option_of(command("train"), "max_repeats").default == option_of(command("study"), "max_repeats").default


# the CLI-only options (cli/options.py) a command may spell its own way, and why
OWN_SPELLING: dict[tuple[str, str], str] = {}


def test_cli_only_options_are_taken_from_their_declaration():
    """--json, --out, --plot, --resume, --dry-run, --quiet, --topo-file and --num-gpus are declared once in
    cli/options.py and taken with option(...); a command that spells one with click.option would give it
    its own kind, range or alias (sweep and study did, for --json, --resume, --dry-run and --quiet)."""
    import re
    from pathlib import Path

    from fabricbench.cli import options

    flags = {d.flag for d in vars(options).values() if isinstance(d, Declared)}
    found = []
    for path in sorted(Path(options.__file__).parent.glob("*.py")):
        if path.name == "options.py":
            continue
        for flag in re.findall(r'click\.option\(\s*"(--[a-z-]+)"', path.read_text()):
            if flag in flags and (path.name, flag) not in OWN_SPELLING:
                found.append(f"{path.name}: {flag}")
    assert not found, f"take these from cli/options.py with option(...): {found}"


def test_qualify_fleet_options_are_its_fields():
    """`qualify --fleet` takes FleetConfig's fields (its --out and --prometheus are QualifyConfig's, shared)."""
    cmd = command("qualify")
    for field, (d, default) in declared(FleetConfig).items():
        opt = option_of(cmd, field)
        assert opt is not None and opt.opts == [d.flag], f"qualify has no option for FleetConfig.{field}"
        assert opt.default == shown_default(default), f"qualify {d.flag}: default {opt.default!r}, field {default!r}"
        assert type(opt.type) is type(TYPES[d.kind](d)) and d.help in opt.help, (field, opt.type)


def test_a_planted_qualify_drift_fails(monkeypatch):
    monkeypatch.setattr(FleetConfig.__dataclass_fields__["fraction"], "default", 0.8)  # the config's side only
    with pytest.raises(AssertionError, match="qualify --fraction: default 0.9, field 0.8"):
        test_qualify_fleet_options_are_its_fields()
    monkeypatch.undo()
    monkeypatch.setattr(QualifyConfig.__dataclass_fields__["level"], "default", 2)
    with pytest.raises(AssertionError, match="qualify --level: default None, field 2"):
        test_each_option_is_its_field("qualify")


@pytest.mark.parametrize("name, config, field, default", [("relate", RelateConfig, "reference", "default"),
                                                          ("import", ImportConfig, "nranks", 8),
                                                          ("study", StudyConfig, "resume", True)])
def test_a_planted_drift_of_a_generated_command_fails(monkeypatch, name, config, field, default):
    monkeypatch.setattr(config.__dataclass_fields__[field], "default", default)  # the config's side only
    with pytest.raises(AssertionError, match=f"{name}|{field}"):
        test_each_option_is_its_field(name)


def test_a_planted_drift_of_a_sweep_family_command_fails(monkeypatch):
    """compare's options against the template it varies, p2p's against its config's ranges: each check fails
    on a drift planted in the library's side alone (the commands are built)."""
    monkeypatch.setattr(compare_run, "SIZES", "1K-1M:x4")
    with pytest.raises(AssertionError, match="compare --sizes: default '1M-1G:x4'"):
        test_each_option_is_its_field("compare")
    monkeypatch.undo()
    field = P2PConfig.__dataclass_fields__["iters"]
    narrower = dataclasses.replace(field.metadata[OPTION], hi=1_000_000)
    monkeypatch.setattr(field, "metadata", {**field.metadata, OPTION: narrower})
    with pytest.raises(AssertionError, match="'p2p', 'iters', 'range'"):
        test_each_option_is_its_field("p2p")


@pytest.mark.parametrize("args, flag", [(["import", "{data}/imports/nccl1_tests_titanx.txt"], "--out"),
                                         (["estimate", "--model", "mistral-7b"], "--gpus")])
def test_a_required_option_left_out_is_refused_in_one_line(args, flag, capsys):
    """A field with no default is a required option: click says it is missing (exit 2), before anything runs
    (click takes a default=None given to a required option as a value; the alias path has its own check)."""

    from clirun import refused

    data = DATA
    line = refused([a.format(data=data) for a in args], capsys)
    assert f"Missing option '{flag}'" in line, line


def test_a_planted_drift_of_a_flag_choice_fails(monkeypatch):
    """sweep's --inplace/--out-of-place/--both are SweepConfig.inplace's declaration: the library's default
    moved alone (to both) is caught, as is a choice's flag gone from the command."""
    command("sweep")  # built first: a command imported under the patch would take the planted default
    field = SweepConfig.__dataclass_fields__["inplace"]
    monkeypatch.setattr(field, "default", "both")
    with pytest.raises(AssertionError, match="'sweep', 'inplace'"):
        test_each_option_is_its_field("sweep")
    monkeypatch.undo()
    wider = dataclasses.replace(field.metadata[OPTION], choices=("inplace", "out-of-place", "both", "twice"),
                                each=("a", "b", "c", "d"))
    monkeypatch.setattr(field, "metadata", {**field.metadata, OPTION: wider})
    with pytest.raises(AssertionError, match="'sweep', 'inplace'"):
        test_each_option_is_its_field("sweep")
