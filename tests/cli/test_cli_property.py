"""Hostile values for every option of every command, generated from the CLI itself.

    python3 -m pytest -q tests/cli/test_cli_property.py
    python3 tests/cli/test_cli_property.py --counts benchmarks/hostile_input/results/cpu-vm/cli_property.txt   (cases per type and command)

Each command's declared options are walked through click (fabricbench.cli.COMMANDS, then each command's
params), and every option that takes a value is driven with at least 20 hostile values of its type
(HOSTILE: non-ASCII digits, NaN/inf/1e308, values past the range, empty list items, control characters,
huge strings, folders, FIFOs and devices where a file is wanted...). Each must end in one `Error:` line
that names the option, exit status 2, no traceback, and no file written. A new option is covered without a
new case; a new option type without hostile values here fails `test_every_type_has_hostile_values`, and an
option with a bare click type (int, float, str, Path) fails `test_no_bare_click_types`. In-process
(tests/clirun.py's run_cli_captured), so the whole walk takes seconds. Hypothesis adds generated values per type.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import click
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fabricbench.cli import COMMANDS, cli
from fabricbench.cli import types as T
from fabricbench.cli.hints import command

# Options allowed a bare click type, with the reason (none today).
ALLOWED_BARE: dict[tuple[str, str], str] = {}
# Parameters no value is hostile to, with the reason.
AS_IS: dict[tuple[str, str], str] = {("exec", "args"): "a program's own arguments are passed to it as they are"}

CONTROL = ["", " ", "\t", "\x00", "a\x00b", "a\nb", "a\rb", "\x1b[31mred", "\x7f", "\x08", "x" * 5000]
NON_ASCII_DIGITS = ["١٢", "１２", "٣", "߁", "𝟙𝟚", "๑", "²", "᠑"]


def _num(x: float) -> str:
    return repr(x) if isinstance(x, float) else str(x)


def hostile(t: click.ParamType, tmp: Path) -> list[str]:
    """At least 20 values that a parameter of type `t` must refuse."""
    paths = _paths(tmp)
    if isinstance(t, T.Count):
        return CONTROL + NON_ASCII_DIGITS + ["nan", "inf", "-inf", "1e308", "1e-9", "1.5", "0x10", "1_0", "--1",
                                            str(t.lo - 1), str(t.hi + 1), str(2**64), "1e3", "1 2", "½"]
    if isinstance(t, T.Real):
        below = t.lo if t.lo_open and not (t.zero and t.lo == 0) else t.lo - (abs(t.lo) or 1) / 2
        above = t.hi if t.hi_open else t.hi * 2 + 1
        extra = ["1e-9"] if t.lo >= 1e-6 else []
        extra += ["0"] if (t.lo > 0 or t.lo_open) and not t.zero else []
        return CONTROL + NON_ASCII_DIGITS + ["nan", "NaN", "inf", "-inf", "1e308", "1e400", "-1e308", _num(below),
                                            _num(above), "0x1p3", "1_0", "1,5", "--1", "1e", ".", "½", "٫5",
                                            *extra]
    if isinstance(t, T.SizeList):
        return [v for v in hostile(T.Size(), tmp) if v != "1,5"] + ["1K,,2K", ",", "1K,", ",1K", "8-", "1G-1M", "1M-1G:x1", "1M-1G:x",
                                         "1M-1G:x١", "8--16", "1K,-8"]
    if isinstance(t, T.Size):
        return CONTROL + NON_ASCII_DIGITS + ["0", "-1", "1.5", "0.1", "nan", "inf", "1e308", "99999999T", "1KK",
                                            "K", "1,5", "1_000", "2^10", "1 0"]
    if isinstance(t, T.GpuList):
        return CONTROL + NON_ASCII_DIGITS + ["0,,1", ",", "0,", "-1", "0-", "3-1", "0,0", "1024", "0-99999999999",
                                            "a", "0.5", "nan", "1e3", "0 1"]
    if isinstance(t, T.GpuCount):  # a count, or a GPU list counted: both refuse these
        return CONTROL + NON_ASCII_DIGITS + ["0", "-1", str(2**20 + 1), str(2**64), "0,,1", ",", "0,", "0-",
                                            "3-1", "0,0", "nan", "1.5", "1e3", "0 1"]
    if isinstance(t, T.CountList):
        return CONTROL + NON_ASCII_DIGITS + ["2,,4", ",", "2,", "2,2", str(t.item.lo - 1), str(t.item.hi + 1),
                                            "nan", "2.5", "-2", "1e3", "0x2", "inf"]
    if isinstance(t, T.NameList):
        bad = ["nosuch", "zzz", "all,all_x", "x-y-z"] if t.registry else ["a b", "a/b", "a;b", "é", "a*", "$(id)"]
        return CONTROL + ["a,,b", ",", "a,", ",a", "a,a", *bad, "x" * 300 + ",,"]
    if isinstance(t, T.FabricSpec):
        many = ["default,,p2p-off", "default,default", ","] if t.many else ["default,p2p-off"]
        return CONTROL + ["nosuch", "x:", ":", "x:=", "x:A", "x:A=1,,B=2", "x:NCCL_NVLS_ENABLE=1", "default:A=1",
                          "x y:A=1", "shaped:", "shaped:fast", "x:1A=2", "x:A=1,A=2", "x:TOKEN=s3cr3t,part2",
                          *many]
    if isinstance(t, T.Text):
        return CONTROL + ["x" * (t.max_len + 1), "\x01", "\x02x", "\x1f", "a\x0bb", "a\x0cb", "\t\t", "\n",
                          "\r\n", "x" * 100_000]
    if isinstance(t, T.InputPath):
        if t.folder_only:
            wrong = [paths["file"], paths["fifo"], "/dev/null", "/dev/zero", paths["socket"]]
        elif t.folder:
            wrong = [paths["fifo"], "/dev/null", "/dev/zero", "/dev/full", "/dev/urandom", paths["socket"]]
        else:
            wrong = [str(tmp), paths["fifo"], "/dev/null", "/dev/zero", paths["socket"], "/"]
        return CONTROL + wrong + [paths["missing"], paths["under_file"], "a" * 300, f"{tmp}/x\ny", "-"]
    if isinstance(t, T.OutputFile):
        return CONTROL + [str(tmp), "/", paths["fifo"], "/dev/null", "/dev/zero", paths["socket"],
                          paths["under_file"], "a" * 300, f"{tmp}/x\ny", "-"]
    if isinstance(t, T.OutputFolder):
        return CONTROL + [paths["file"], paths["fifo"], "/dev/null", "/dev/zero", paths["socket"],
                          paths["under_file"], "a" * 300, f"{tmp}/x\ny", "/etc/passwd", "-"]
    if isinstance(t, T.Program):
        return CONTROL + [str(tmp), "/", paths["file"], paths["fifo"], "/dev/null", paths["socket"], paths["missing"],
                          paths["under_file"], "a" * 300, "no-such-program-here", "./no-such-program", "-"]
    if isinstance(t, T.Choice):
        return CONTROL + ["nosuch", t.choices[0].swapcase(), t.choices[0] + " ", " " + t.choices[0], t.choices[0] + "\x00",
                          ",".join(t.choices), t.choices[0][:-1], "1", "-"]
    raise AssertionError(f"no hostile values for option type {type(t).__name__}: add them to hostile()")


def _paths(tmp: Path) -> dict[str, str]:
    fixtures = tmp.parent / (tmp.name + "-fixtures")
    fixtures.mkdir(exist_ok=True)
    out = {"file": str(fixtures / "file.txt"), "fifo": str(fixtures / "fifo"), "socket": str(fixtures / "sock"),
           "missing": str(fixtures / "missing.jsonl"), "under_file": str(fixtures / "file.txt" / "x")}
    if not os.path.exists(out["file"]):
        Path(out["file"]).write_text("not much\n")
        os.mkfifo(out["fifo"])
        s = socket.socket(socket.AF_UNIX)
        s.bind(out["socket"])  # left bound: a socket file on disk is what a user could name
    return out


def valid(p: click.Parameter, tmp: Path) -> str:
    """A value the parameter accepts: to fill required parameters around the one under test."""
    t = p.type
    if isinstance(t, T.Count):
        return str(max(t.lo, 1))
    if isinstance(t, T.GpuCount):
        return "2"
    if isinstance(t, T.InputPath):
        return str(tmp.parent / (tmp.name + "-fixtures")) if t.folder_only else _paths(tmp)["file"]
    if isinstance(t, T.OutputFolder):
        return str(tmp / "new-folder")
    if isinstance(t, T.OutputFile):
        return str(tmp / "new-file.jsonl")
    if isinstance(t, T.Choice):
        return t.choices[0]
    if isinstance(t, T.Program):
        return "true"
    raise AssertionError(f"no valid sample for required {p.name} of type {type(t).__name__}")


def commands() -> list[tuple[str, click.Command]]:
    return [("", cli)] + [(name, command(name)) for name in COMMANDS]


def value_params(cmd: click.Command) -> list[click.Parameter]:
    return [p for p in cmd.params if not (isinstance(p, click.Option) and (p.is_flag or p.count))
            and p.name != "help"]


def argv_for(name: str, cmd: click.Command, p: click.Parameter, value: str, tmp: Path) -> list[str]:
    if name == "":
        return [p.opts[0], value, "fabrics"]
    # the option under test first: exec takes everything after its program as the program's own arguments
    args = [name] + ([p.opts[0], value] if isinstance(p, click.Option) else [])
    for q in cmd.params:
        if q is p or not q.required:
            continue
        args += [valid(q, tmp)] if isinstance(q, click.Argument) else [q.opts[0], valid(q, tmp)]
    if isinstance(p, click.Argument):
        return args + ["--", value] if value.startswith("-") else args + [value]
    return args


@pytest.fixture
def guarded(monkeypatch):
    """No measurement may start: no GPU seems visible and no Python child may be started."""
    popen = subprocess.Popen

    def refuse(argv, *a, **k):
        assert not (isinstance(argv, (list, tuple)) and argv and argv[0] == sys.executable), \
            f"a Python process was started for a hostile value: {argv}"
        return popen(argv, *a, **k)

    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr("fabricbench.gpus.visible_gpu_count", lambda: 0)


def check(name: str, cmd: click.Command, p: click.Parameter, value: str, tmp: Path) -> None:
    # imported here: `python3 tests/cli/test_cli_property.py --counts` runs without tests/ on sys.path
    from clirun import one_error_line, run_cli_captured

    before = sorted(os.listdir(tmp))
    argv = argv_for(name, cmd, p, value, tmp)
    with contextlib.chdir(tmp):
        code, out, err = run_cli_captured(argv)
    shown = f"fabricbench {name} {p.name}={value[:60]!r}"
    assert code == 2, f"{shown}: exit {code}; stderr {err[-300:]!r}"
    line = one_error_line(err, shown)
    assert "Traceback" not in err and not out.strip(), f"{shown}: {err[-300:]!r} {out[-300:]!r}"
    if isinstance(p, click.Option):
        assert p.opts[0] in line, f"{shown}: the message does not name the option: {line!r}"
    assert sorted(os.listdir(tmp)) == before, f"{shown}: wrote {set(os.listdir(tmp)) - set(before)}"
    assert "s3cr3t" not in err and "part2" not in err, f"{shown}: a secret echoed: {line!r}"


@pytest.mark.parametrize("name", [""] + list(COMMANDS), ids=["(group)"] + list(COMMANDS))
def test_every_option_refuses_hostile_values(name, tmp_path, guarded):
    cmd = cli if name == "" else command(name)
    params = [p for p in value_params(cmd) if (name, p.name) not in AS_IS]
    assert params or name == "fabrics", f"{name}: no option that takes a value?"
    for p in params:
        values = hostile(p.type, tmp_path)
        assert len(values) >= 20, f"{name} {p.name}: only {len(values)} hostile values"
        for v in values:
            check(name, cmd, p, v, tmp_path)


def test_no_bare_click_types():
    """Every option that takes a value has a declared type (fabricbench/cli/types.py)."""
    bare = [(name, p.name, type(p.type).__name__) for name, cmd in commands() for p in value_params(cmd)
            if not isinstance(p.type, (T.OptionType, T.Choice)) and (name, p.name) not in ALLOWED_BARE]
    assert not bare, f"options with a bare click type: {bare}"


def test_every_type_has_hostile_values(tmp_path):
    types = {type(p.type) for name, cmd in commands() for p in value_params(cmd) if (name, p.name) not in AS_IS}
    for t in types:
        example = next(p.type for _, cmd in commands() for p in value_params(cmd) if type(p.type) is t)
        assert len(hostile(example, tmp_path)) >= 20, t


def test_the_walk_reaches_what_it_should():
    """The walk is not empty by accident: it sees the options the issue names."""
    seen = {(name, p.opts[0]) for name, cmd in commands() for p in value_params(cmd) if isinstance(p, click.Option)}
    for case in [("sweep", "--sizes"), ("sweep", "--timeout"), ("train", "--target-ci"), ("study", "--out"),
                 ("qualify", "--tolerance"), ("p2p", "--size"), ("", "--max-input-size"), ("advise", "--gpus")]:
        assert case in seen, case


# Generated values per type (hypothesis): each drawn value is hostile by construction.
DIGITS = st.text(st.characters(categories=["Nd"], exclude_characters="0123456789"), min_size=1, max_size=4)
GENERATED = {
    "count": st.one_of(DIGITS, st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: x != int(x)
                                                                                      if x == x and abs(x) != float("inf") else True).map(repr),
                       st.integers(min_value=10_000_001, max_value=2**80).map(str),
                       st.integers(max_value=-1).map(str)),
    "seconds": st.one_of(DIGITS, st.floats(max_value=0.999).map(repr), st.just("nan"),
                         st.floats(min_value=604801, allow_infinity=True).map(repr)),
    "size": st.one_of(DIGITS, st.integers(max_value=0).map(str), st.integers(min_value=2**63).map(str)),
    "GPU list": st.one_of(DIGITS, st.lists(st.integers(0, 8).map(str), min_size=1, max_size=4).map(
        lambda xs: ",".join(xs[:1] + [""] + xs[1:])), st.integers(min_value=1024).map(str)),
}
WHERE = {"count": ("sweep", "--iters"), "seconds": ("sweep", "--timeout"), "size": ("p2p", "--size"),
         "GPU list": ("topo", "--gpus")}


@pytest.mark.parametrize("kind", list(GENERATED))
def test_generated_hostile_values(kind, tmp_path_factory, guarded):
    name, flag = WHERE[kind]
    cmd = command(name)
    p = next(q for q in cmd.params if flag in q.opts)

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(GENERATED[kind])
    def prop(value):
        check(name, cmd, p, value, tmp_path_factory.mktemp("h"))

    prop()


def counts(tmp: Path) -> str:
    by_type, by_cmd = Counter(), Counter()
    for name, cmd in commands():
        for p in value_params(cmd):
            if (name, p.name) in AS_IS:  # as the test walks them: these take anything, by design
                continue
            n = len(hostile(p.type, tmp))
            by_type[type(p.type).__name__] += n
            by_cmd[name or "(group)"] += n
    lines = [f"# tests/cli/test_cli_property.py: hostile values per option type and per command "
             f"({sum(by_type.values())} cases; each must give one Error: line, exit 2, no file)", "", "by type:"]
    lines += [f"  {k:14s} {v:5d}" for k, v in sorted(by_type.items())]
    lines += ["", "by command (options that take a value, cases):"]
    for name, cmd in commands():
        walked = [p for p in value_params(cmd) if (name, p.name) not in AS_IS]
        lines.append(f"  {name or '(group)':10s} {len(walked):3d} {by_cmd[name or '(group)']:5d}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "t").mkdir()
        text = counts(Path(d) / "t")
    if "--counts" in sys.argv:
        Path(sys.argv[sys.argv.index("--counts") + 1]).write_text(text)
    print(text)
