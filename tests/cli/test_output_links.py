"""Links planted where outputs go: every output option of every command, and every file a command writes
inside its output folder. Each is one `Error:` line, exit 2, and nothing is written outside the output.

    python3 -m pytest -q tests/cli/test_output_links.py

The output options are walked from the CLI itself (as tests/cli/test_cli_property.py walks hostile values), so
a new output option is covered without a new case. Two links each: a dangling one (an open would create
its target) and one to an existing file outside (an open would truncate or append to it).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path

import click
import pytest

from fabricbench.cli import COMMANDS
from fabricbench.cli import types as T
from fabricbench.cli.hints import command
from fabricbench.errors import UsageError
from fabricbench.reporting.document import Document
from fabricbench.results.repair import repair
from test_cli_property import guarded, valid  # noqa: F401 (guarded: a fixture used by name)
from clirun import one_error_line, run_cli_captured
from roots import DATA

UNITS = DATA / "study" / "cpu-lab" / "units"  # a recorded study's unit files
PRECIOUS = '{"schema": "fabricbench/1", "kind": "x"}\n{"torn'  # a results-like file without a final newline


def _outside(tmp: Path) -> Path:
    victim = tmp / "outside" / "victim.jsonl"
    victim.parent.mkdir(parents=True, exist_ok=True)
    victim.write_text(PRECIOUS)
    os.chmod(victim, 0o600)
    return victim


def _untouched(tmp: Path, victim: Path) -> None:
    assert victim.read_text() == PRECIOUS and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert sorted(os.listdir(victim.parent)) == ["victim.jsonl"], "something was written outside --out"


def _plant(link: Path, victim: Path, kind: str, folder: bool) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if kind == "dangling":
        link.symlink_to(victim.parent / "made-through-the-link")
    else:
        link.symlink_to(victim.parent if folder else victim)


def _output_params() -> list[tuple[str, str]]:
    found = []
    for name in COMMANDS:
        for p in command(name).params:
            if isinstance(p.type, (T.OutputFile, T.OutputFolder)):
                found.append((name, p.opts[0]))
    return found


OUTPUTS = _output_params()


def _required(c: click.Command, p: click.Parameter, tmp: Path) -> list[str]:
    """Values for the command's other required parameters; a command to run (exec) is `true`."""
    args: list[str] = []
    for q in c.params:
        if q is p or not q.required:
            continue
        value = "true" if isinstance(q.type, click.types.UnprocessedParamType) else valid(q, tmp)
        args += [value] if isinstance(q, click.Argument) else [q.opts[0], value]
    return args


def test_the_walk_finds_the_output_options():
    names = {f"{c} {p}" for c, p in OUTPUTS}
    assert {"sweep --out", "sweep --csv", "train --out", "study --out", "qualify --out", "qualify --prometheus",
            "import --out", "export --out", "topo --out", "compare --plot"} <= names


@pytest.mark.parametrize("kind", ["dangling", "to a file"])
@pytest.mark.parametrize("cmd,param", OUTPUTS, ids=[f"{c}-{p}" for c, p in OUTPUTS])
def test_a_link_given_as_an_output_is_one_line(cmd, param, kind, tmp_path, guarded):
    c = command(cmd)
    p = next(q for q in c.params if q.opts[0] == param)
    victim = _outside(tmp_path)
    link = tmp_path / "out" / ("given" if isinstance(p.type, T.OutputFolder) else "given.jsonl")
    _plant(link, victim, kind, isinstance(p.type, T.OutputFolder))
    argv = [cmd, p.opts[0], str(link)] + _required(c, p, tmp_path / "out")
    with contextlib.chdir(tmp_path / "out"):
        code, out, err = run_cli_captured(argv)
    assert code == 2, (argv, err)
    line = one_error_line(err, " ".join(argv))
    assert "symbolic link" in line and p.opts[0] in line, line
    _untouched(tmp_path, victim)


QUALIFY_FILES = ["results.jsonl", "verdicts.json", "junit.xml", "spec.toml", "report.md", "report.html"]


@pytest.mark.parametrize("kind", ["dangling", "to a file"])
@pytest.mark.parametrize("name", QUALIFY_FILES)
def test_a_link_inside_qualifys_folder_is_one_line(name, kind, tmp_path, guarded):
    victim = _outside(tmp_path)
    out = tmp_path / "q"
    _plant(out / name, victim, kind, folder=False)
    with contextlib.chdir(tmp_path):
        code, _, err = run_cli_captured(["qualify", "--spec", "builtin:h200-sxm-8", "--from",
                                         UNITS / "sweep_default.jsonl", "--out", out, "--quiet"])
    lines = [ln for ln in err.splitlines() if ln.strip()]
    # a link to a file at results.jsonl may be refused as a run already there: nothing is written either way
    said = "symbolic link" in lines[-1] or (name == "results.jsonl" and "already holds a run" in lines[-1])
    assert code == 2 and lines[-1].startswith("Error: ") and said, err
    assert "Traceback" not in err
    _untouched(tmp_path, victim)


@pytest.mark.parametrize("kind", ["dangling", "to a file"])
@pytest.mark.parametrize("name", ["report.md", "report.html", "report_figures"])
def test_a_link_where_a_report_goes_is_refused(name, kind, tmp_path):
    victim = _outside(tmp_path)
    out = tmp_path / "study"
    _plant(out / name, victim, kind, folder=name.endswith("figures"))
    doc = Document("title")
    doc.section("s").text("x")
    with pytest.raises(UsageError, match="symbolic link"):
        doc.write(out)
    _untouched(tmp_path, victim)


@pytest.mark.parametrize("kind", ["dangling", "to a file"])
def test_resume_on_a_linked_results_file_cuts_nothing(kind, tmp_path):
    """The failure that started this: sweep --resume on a linked --out whose target lacks a final newline
    truncated the target and copied its lines into a world-readable .unreadable."""
    victim = _outside(tmp_path)
    link = tmp_path / "out" / "r.jsonl"
    _plant(link, victim, kind, folder=False)
    with pytest.raises(UsageError, match="symbolic link"):
        repair(link)
    _untouched(tmp_path, victim)


def test_repair_cuts_only_a_fabricbench_results_file(tmp_path):
    other = tmp_path / "notes.jsonl"
    other.write_text('{"mine": 1}\n{"mine": 2')  # JSON lines of another tool, last line torn
    with pytest.raises(UsageError, match="not fabricbench records"):
        repair(other)
    assert other.read_text() == '{"mine": 1}\n{"mine": 2'


def test_unreadable_keeps_the_source_files_mode(tmp_path):
    rec = json.dumps({"schema": "fabricbench/1", "kind": "collective"})
    f = tmp_path / "r.jsonl"
    f.write_text(f"{rec}\nnot json at all\n{rec}\n")
    os.chmod(f, 0o600)
    assert len(repair(f)) == 1
    moved = tmp_path / "r.jsonl.unreadable"
    assert moved.read_text() == "not json at all\n"
    assert stat.S_IMODE(moved.stat().st_mode) == 0o600 and stat.S_IMODE(f.stat().st_mode) == 0o600


def test_a_link_given_as_a_study_folder_is_refused_before_anything_runs(tmp_path, guarded):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "st").symlink_to(real)
    with contextlib.chdir(tmp_path):
        code, _, err = run_cli_captured(["study", "--device", "cpu", "--nprocs", "2", "--model", "tiny-mistral",
                                         "--out", tmp_path / "st"])
    assert code == 2 and "symbolic link" in err and os.listdir(real) == []


def test_a_spec_name_is_escaped_in_every_output(tmp_path, guarded):
    """A spec `name` with a newline, a heading and <script> stays text in report.md as in the HTML report,
    JUnit and Prometheus."""
    spec = DATA / "qualify" / "gloo_e2e.toml"
    evil = tmp_path / "evil.toml"
    evil.write_text(spec.read_text().replace('name = "gloo-e2e"', 'name = "x\\n# owned\\n<script>alert(1)</script>"'))
    out = tmp_path / "q"
    with contextlib.chdir(tmp_path):
        code, _, err = run_cli_captured(["qualify", "--spec", evil, "--from", UNITS / "sweep_default.jsonl", "--out",
                                         out, "--prometheus", tmp_path / "q.prom", "--quiet"])
    assert code in (0, 3, 4, 5) and "Traceback" not in err, err
    md = (out / "report.md").read_text()
    assert "<script" not in md and not any(line.startswith("# owned") for line in md.splitlines())
    assert md.splitlines()[0].startswith("# Qualification: x # owned &lt;script&gt;")
    for name in ("report.html", "junit.xml"):
        assert "<script" not in (out / name).read_text(), name
    prom = (tmp_path / "q.prom").read_text().splitlines()  # its format escapes the newline inside a label
    assert prom and all(line.startswith(("# HELP", "# TYPE", "fabricbench_")) for line in prom)


def test_the_namespace_lock_in_a_shared_folder_is_not_opened_through_a_link(tmp_path, monkeypatch):
    """A root start opens a host-wide lock file in /run/lock or /tmp, where another user may plant a link:
    it goes on without the lock rather than create or open the link's target."""
    from fabricbench.fabrics import shaped

    target = tmp_path / "etc-nologin"
    (tmp_path / "fabricbench-netns.lock").symlink_to(target)
    monkeypatch.setattr(shaped, "LOCK", str(tmp_path / "fabricbench-netns.lock"))
    with shaped.reaping_lock(wait_s=0.1) as got:
        assert got is False
    assert not target.exists()
