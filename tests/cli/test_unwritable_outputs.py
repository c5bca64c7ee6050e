"""Every output path that cannot be written: one `Error:` line and exit 2, before anything runs.

    fabricbench study --device cpu --nprocs 2 --model tiny-mistral --out /proc/x    (refused at once)

The commands and their output options are read from the real CLI (every OutputFile and OutputFolder
option of every command), so a new command or option is covered without a line here. Tests run as root,
where a folder's permissions refuse nothing: the unwritable places are under /proc, under a regular file,
and a folder where a file is wanted (or a file where a folder is).
"""

from __future__ import annotations

import importlib
import shutil

import pytest

from fabricbench.cli import COMMANDS
from clirun import refused
from fabricbench.cli.path_types import OutputFile, OutputFolder
from roots import DATA

STUDY = DATA / "study/cpu-lab"  # a CPU study's recorded results


def _outputs() -> list[tuple[str, str, bool]]:
    """(command, option, wants a folder) for every output path option of every command."""
    found = []
    for name, (target, *_) in COMMANDS.items():
        module, attr = target.split(":")
        cmd = getattr(importlib.import_module(module), attr)
        for p in cmd.params:
            if isinstance(p.type, (OutputFile, OutputFolder)):
                found.append((name, p.opts[0], isinstance(p.type, OutputFolder)))
    return found


OUTPUTS = _outputs()


def _refused_naming(args, capsys, *words):
    line = refused(args, capsys)
    assert all(w in line for w in words), (line, words)


def test_every_command_with_an_output_is_covered():
    commands = {c for c, _, _ in OUTPUTS}
    assert {"sweep", "compare", "train", "study", "qualify", "import", "export", "p2p"} <= commands
    assert ("qualify", "--prometheus", False) in OUTPUTS and ("study", "--out", True) in OUTPUTS


@pytest.mark.parametrize("where", ["under /proc", "under a file", "wrong kind"])
@pytest.mark.parametrize("command,option,folder", OUTPUTS, ids=[f"{c}{o}" for c, o, _ in OUTPUTS])
def test_an_unwritable_output_is_one_line_and_exit_2(command, option, folder, where, tmp_path, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    path = {"under /proc": "/proc/fabricbench-nowhere/out", "under a file": a_file / "out",
            "wrong kind": a_file if folder else tmp_path}[where]
    _refused_naming([command, option, path], capsys, option, str(path))


def test_a_whole_study_with_an_unwritable_out_is_refused_before_it_runs(capsys):
    # refused before it runs, --dry-run too: one Error: line, not a 48-line FileNotFoundError traceback
    args = ["study", "--device", "cpu", "--nprocs", "2", "--model", "tiny-mistral", "--strategies", "ddp",
            "--steps", "5", "--repeats", "1", "--out", "/proc/x"]
    for extra in ([], ["--dry-run"]):
        _refused_naming(args + extra, capsys, "--out /proc/x", "choose a writable path")


@pytest.mark.parametrize("blocked", ["report.md", "report.html"])
def test_report_where_the_report_is_a_folder(blocked, tmp_path, capsys):
    # `fabricbench report DIR` with DIR/report.md a folder: one Error: line, not a traceback
    study = tmp_path / "study"
    shutil.copytree(STUDY, study, ignore=shutil.ignore_patterns("report*"))
    (study / blocked).mkdir()
    _refused_naming(["report", study], capsys, f"{blocked} is not a file", "move it aside")
    assert not (study / "report.html" if blocked == "report.md" else study / "report.md").exists()


def test_an_output_that_fails_while_writing_exits_2(tmp_path, capsys, monkeypatch):
    # what only the write can tell (a disk that fills, a folder that goes read-only mid-run) is the same
    # one line and exit 2, never 1 (in qualify, 1 means "critical: drain the node")
    from fabricbench.cli import path_types

    monkeypatch.setattr(path_types, "unwritable", lambda path, folder: None)  # it looked fine up front
    out = "/proc/fabricbench-nowhere/b.yaml"
    _refused_naming(["export", "--format", "simai-busbw", "--fabric", "default", "--out", out,
                     STUDY / "results.jsonl"], capsys, out, "choose a writable path")


def test_the_library_refuses_an_unwritable_study_folder_too():
    import fabricbench
    from fabricbench.errors import UsageError
    from fabricbench.studying.config import StudyConfig

    with pytest.raises(UsageError, match="--out /proc/x: .*choose a writable path"):
        fabricbench.study_plan(StudyConfig(out="/proc/x", device="cpu", nprocs=2, model="tiny-mistral"))


def test_a_file_where_the_study_folder_goes_is_refused_by_the_library(tmp_path):
    import fabricbench
    from fabricbench.errors import UsageError
    from fabricbench.studying.config import StudyConfig

    (tmp_path / "f").write_text("x")
    with pytest.raises(UsageError, match="is a file; give a folder"):
        fabricbench.study_plan(StudyConfig(out=str(tmp_path / "f"), device="cpu", nprocs=2, model="tiny-mistral"))
