"""fabricbench/files.py: inputs refused before open, atomic outputs, JSON without NaN, collisions."""

import json
import os

import pytest

from fabricbench.errors import UsageError
from fabricbench.files import (OutputError, check_input, dumps, read_input, refuse_collisions, unwritable,
                               write_text_atomic)
from clirun import one_error_line, run_cli_subprocess


def test_fifo_directory_and_device_refused_without_opening(tmp_path, monkeypatch):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="FIFO"):
        check_input(fifo, what="--spec")  # would block forever in open()
    with pytest.raises(UsageError, match="directory"):
        check_input(tmp_path)
    with pytest.raises(UsageError, match="device"):
        check_input("/dev/zero")
    with pytest.raises(UsageError, match="no such file"):
        check_input(tmp_path / "missing")
    monkeypatch.chdir(tmp_path)  # no file named "-" here: "-" is standard input to the user, and said so
    with pytest.raises(UsageError, match="standard input is not read; give a regular file"):
        check_input("-")
    (tmp_path / "-").write_text("x")  # a real file of that name is read as any other
    assert check_input("-").name == "-"


def test_size_cap_and_env_override(tmp_path, monkeypatch):
    f = tmp_path / "big.jsonl"
    f.write_text("x" * 100)
    with pytest.raises(UsageError, match="100 bytes is over the 10-byte cap"):
        check_input(f, max_bytes=10)
    monkeypatch.setenv("FABRICBENCH_MAX_INPUT_BYTES", "50")
    with pytest.raises(UsageError, match="FABRICBENCH_MAX_INPUT_BYTES"):
        check_input(f)
    monkeypatch.setenv("FABRICBENCH_MAX_INPUT_BYTES", "1000")
    assert read_input(f) == "x" * 100


def test_max_input_size_flag_reaches_every_reader(tmp_path):
    """`fabricbench --max-input-size` moves the cap for any command's reader; a bad size is one line, exit 2."""
    f = tmp_path / "r.jsonl"
    f.write_text('{"schema": "fabricbench/1", "kind": "note"}\n' + " " * 2000 + "\n")
    code, _, err = run_cli_subprocess(["--max-input-size", "1K", "relate", f])
    assert code == 2 and "over the 1,024-byte cap" in err and "--max-input-size" in err
    code, _, err = run_cli_subprocess(["--max-input-size", "1M", "relate", f])
    assert "cap" not in err and "Traceback" not in err
    code, _, err = run_cli_subprocess(["--max-input-size", "lots", "relate", f])
    assert code == 2 and one_error_line(err).startswith("Error: --max-input-size"), err


def test_binary_input_reads_as_text(tmp_path):
    f = tmp_path / "bin"
    f.write_bytes(b"\xff\xfe\x00ok")
    assert read_input(f).endswith("ok")


def test_dumps_has_no_nan():
    text = dumps({"a": float("nan"), "b": [float("inf"), 1.5], "c": {"d": -float("inf")}})
    assert json.loads(text) == {"a": None, "b": [None, 1.5], "c": {"d": None}}


def test_atomic_write_and_readonly_target(tmp_path):
    out = tmp_path / "m.prom"
    write_text_atomic(out, "one\n")
    write_text_atomic(out, "two\n")
    assert out.read_text() == "two\n"
    assert [p.name for p in tmp_path.iterdir()] == ["m.prom"]  # no temp file left
    if os.geteuid() != 0:  # root writes through permissions; /dev/full covers the root case below
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        with pytest.raises(OutputError):
            write_text_atomic(ro / "x", "y")


def test_collisions_named(tmp_path):
    with pytest.raises(UsageError, match="--out and --csv both name"):
        refuse_collisions({"--out": tmp_path / "a", "--csv": tmp_path / "a"})
    with pytest.raises(UsageError, match="is also the input"):
        refuse_collisions({"--out": tmp_path / "a"}, {"RESULTS": tmp_path / "a"})
    refuse_collisions({"--out": tmp_path / "a", "--csv": None, "--json": tmp_path / "b"})


def test_dash_is_no_output_name_unless_a_file_has_it(tmp_path, monkeypatch):
    """'-' is standard output to a shell: an output named so is refused, never made as a file called '-'."""
    monkeypatch.chdir(tmp_path)
    assert "standard output" in unwritable("-") and "standard output" in unwritable("-", folder=True)
    (tmp_path / "-").write_text("")  # one the user made is theirs to write
    assert unwritable("-") is None
