"""fabricbench.outputs: an output is never opened through a symbolic link that fabricbench did not make."""

from __future__ import annotations

import os
import stat

import pytest

from fabricbench import outputs
from fabricbench.errors import UsageError
from fabricbench.files import OutputError


@pytest.fixture
def planted(tmp_path):
    """An output folder beside a file outside it, and the two kinds of link an attacker plants."""
    out, outside = tmp_path / "out", tmp_path / "outside.txt"
    out.mkdir()
    outside.write_text("precious")
    os.chmod(outside, 0o600)
    (out / "to_file").symlink_to(outside)
    (out / "dangling").symlink_to(tmp_path / "created_outside")
    return tmp_path, out, outside


@pytest.mark.parametrize("name", ["to_file", "dangling"])
@pytest.mark.parametrize("mode", ["w", "a", "wb", "ab", "r+b"])
def test_a_link_at_the_last_part_is_refused_in_every_mode(planted, name, mode):
    tmp, out, outside = planted
    with pytest.raises(UsageError, match="is a symbolic link"):
        outputs.open_output(out / name, mode, what="--out")
    assert outside.read_text() == "precious" and not (tmp / "created_outside").exists()


@pytest.mark.parametrize("name", ["to_file", "dangling"])
def test_an_atomic_write_does_not_replace_a_link(planted, name):
    tmp, out, outside = planted
    with pytest.raises(UsageError, match="is a symbolic link"):
        outputs.write_atomic(out / name, "x", what="report.md")
    assert (out / name).is_symlink() and outside.read_text() == "precious"
    assert not (tmp / "created_outside").exists()


def test_a_folder_link_below_the_output_folder_is_refused_but_the_users_own_is_followed(planted):
    tmp, out, outside = planted
    (out / "units").symlink_to(tmp)  # swapped in for a folder fabricbench made
    with pytest.raises(UsageError, match="units: is a symbolic link"):
        outputs.open_output(out / "units" / "x.log", "w", under=out)
    assert not (tmp / "x.log").exists()
    with outputs.open_output(out / "units" / "y.log", "w") as fh:  # no `under`: the path is the user's
        fh.write("y")
    assert (tmp / "y.log").read_text() == "y"


def test_an_output_folder_named_by_a_link_is_refused(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "st").symlink_to(tmp_path / "real")
    with pytest.raises(UsageError, match="st: is a symbolic link"):
        outputs.folder(tmp_path / "st", what="--out")
    with pytest.raises(UsageError, match="is a symbolic link"):
        outputs.open_output(tmp_path / "st" / "results.jsonl", "a", under=tmp_path / "st")
    assert list((tmp_path / "real").iterdir()) == []


def test_writes_below_the_folder_descriptor_survive_a_rename_of_the_folder(tmp_path):
    out = tmp_path / "out"
    with outputs.folder(out) as d:
        os.rename(out, tmp_path / "moved")
        (tmp_path / "out").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
        with d.folder("units") as u, u.open("a.log") as fh:
            fh.write("kept")
    assert (tmp_path / "moved" / "units" / "a.log").read_text() == "kept"
    assert not (tmp_path / "elsewhere").exists()


def test_atomic_write_keeps_the_replaced_files_mode_and_a_fifo_is_refused(tmp_path):
    f = tmp_path / "r.jsonl"
    outputs.write_atomic(f, "a\n", perm=0o600)
    outputs.write_atomic(f, "b\n")
    assert stat.S_IMODE(f.stat().st_mode) == 0o600 and f.read_text() == "b\n"
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UsageError, match="FIFO"):
        outputs.open_output(tmp_path / "fifo", "a")
    with pytest.raises(OutputError, match="not a regular file"):
        outputs.write_atomic(tmp_path / "fifo", "x")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_folder_is_one_usage_line(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    try:
        with pytest.raises(UsageError, match="cannot write there"):
            outputs.open_output(ro / "x.log", "w", under=tmp_path)
    finally:
        os.chmod(ro, 0o700)


def test_devices_stay_the_users_choice():
    with outputs.open_output("/dev/null", "a") as fh:
        fh.write("x")


def test_a_child_of_a_study_follows_no_link_below_the_root_its_parent_named(tmp_path, monkeypatch):
    """A study's unit runs `sweep --out DIR/units/x.jsonl` in a child: the study names DIR in the
    environment, so a units/ swapped for a link is refused in the child as in the study."""
    from fabricbench.results import ResultWriter

    study, elsewhere = tmp_path / "st", tmp_path / "elsewhere"
    study.mkdir()
    elsewhere.mkdir()
    (study / "units").symlink_to(elsewhere)
    monkeypatch.setenv(outputs.ENV_ROOT, str(study))
    with pytest.raises(UsageError, match="units: is a symbolic link"):
        ResultWriter(study / "units" / "sweep.jsonl")
    assert os.listdir(elsewhere) == []
    monkeypatch.delenv(outputs.ENV_ROOT)
    ResultWriter(study / "units" / "sweep.jsonl").close()  # no root named: the user's own path, followed
    assert os.listdir(elsewhere) == ["sweep.jsonl"]


def test_a_private_file_is_never_written_through_a_link(tmp_path):
    """A rank's spec (it holds a custom fabric's secret values) goes to a 0600 file, never through a link."""
    from fabricbench.jobs.secrets import write_private

    outside = tmp_path / "readable-by-all"
    (tmp_path / "spec.json").symlink_to(outside)
    with pytest.raises(UsageError, match="symbolic link"):
        write_private(tmp_path / "spec.json", "TOKEN=s3cr3t")
    assert not outside.exists()
    write_private(tmp_path / "mine.json", "TOKEN=s3cr3t")
    assert stat.S_IMODE((tmp_path / "mine.json").stat().st_mode) == 0o600
