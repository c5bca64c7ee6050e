"""Qualification on hostile input: insane values, control characters, duplicates, deep nesting, special and
binary spec files, damaged results files (and random damage to a real one) for every reader, and a
--prometheus path that is a device, a FIFO or a folder: each is one `Error:` line, exit 2, no traceback, no
hang. (The grading itself: test_qualify_grading.py.)

    python3 -m pytest -q tests/cli/test_qualify_hostile.py
"""

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from clirun import one_error_line, refused, run_cli
from roots import DATA

QDATA = DATA / "qualify"
TOPO = DATA / "topo"
GLOO = QDATA / "gloo_node_results.jsonl"


# -- hostile specs ----------------------------------------------------------------------------------------

BASE = '[spec]\nname = "x"\n[[check]]\nname = "{name}"\nkind = "collective"\nop = "all_reduce"\nsizes = ["1M"]\n'


@pytest.mark.parametrize("extra,expect", [
    ("min_busbw_gbps = nan", "finite"),
    ("min_busbw_gbps = inf", "finite"),
    ("min_busbw_gbps = -5", "> 0"),
    ("min_busbw_gbps = 1e9", "beyond any sane value"),
    ("max_cv = 1e300", "beyond any sane value"),
    ("min_busbw_gbps = 1\nwarn_fraction = 2", "fraction"),
    ("min_busbw_gbps = 1\nseverity = \"fatal\"", "critical, warning, info"),
    ("min_busbw_gbps = 1\nlevels = [4]", "levels among 1, 2, 3"),
    ("min_busbw_gbps = 1\nretries = 1000", "at most 10"),
    ("min_busbw_gbps = 1\nbogus = 1", "unknown key 'bogus'"),
    ("min_busbw_gbps = 1\nsizes = [\"1M\", \"99T\"]", "1 TiB"),
])
def test_dry_run_refuses_insane_values(tmp_path, capsys, extra, expect):
    p = tmp_path / "s.toml"
    p.write_text(BASE.format(name="c").replace('sizes = ["1M"]\n', "") + (
        'sizes = ["1M"]\n' if "sizes" not in extra else "") + extra + "\n")
    err = refused(["qualify", "--spec", str(p), "--dry-run"], capsys)
    assert expect in err, err


@pytest.mark.parametrize("text,expect", [
    (BASE.format(name="a\\u0000b") + "min_busbw_gbps = 1\n", "check name"),
    (BASE.format(name="ok\\n") + "min_busbw_gbps = 1\n", "check name"),
    ('[spec]\nname = "bell\\u0007"\n[[check]]\nname = "c"\nkind = "topology"\ngpu_count = 1\n', "control character"),
    ('[spec]\nname = "x"\n[run]\nx = ' + "[" * 5000 + "]" * 5000 + "\n", "nested"),
    ('[spec]\nname = "x"\n[[check]]\nname = "c"\nkind = "transport"\nexpect = ' + "{a = " * 20 + '"P2P"'
     + " }" * 20 + "\n", "nested"),
    (BASE.format(name="c") + "min_busbw_gbps = 1\n" + BASE.format(name="c").split("\n", 2)[2]
     + "min_busbw_gbps = 1\n", "used twice"),
    ("[level.7]\niters = 1\n" + BASE.format(name="c") + "min_busbw_gbps = 1\n", "levels are 1, 2 and 3"),
])
def test_specs_with_control_characters_duplicates_or_deep_nesting_are_refused(tmp_path, capsys, text, expect):
    p = tmp_path / "s.toml"
    p.write_text(text)
    err = refused(["qualify", "--spec", str(p), "--dry-run"], capsys)
    assert expect in err, err


def test_special_and_binary_spec_files_are_refused_without_hanging(tmp_path, capsys):
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    err = refused(["qualify", "--spec", str(fifo), "--dry-run"], capsys)
    assert "FIFO" in err
    binary = tmp_path / "b.toml"
    binary.write_bytes(b"\x00\xff\xfe[spec]\x00")
    refused(["qualify", "--spec", str(binary), "--dry-run"], capsys)
    refused(["qualify", "--spec", str(tmp_path), "--dry-run"], capsys)


# -- readers total ----------------------------------------------------------------------------------------

DAMAGED = {
    "empty": b"",
    "binary": bytes(range(256)) * 4,
    "truncated": GLOO.read_bytes()[:700],
    "wrong types": b'{"kind": "collective", "op": 3, "requested_bytes": "x", "time_us": [1], "status": "ok"}\n',
    "missing keys": b'{"kind": "collective"}\n{"kind": "copy"}\n{"kind": "topology", "gpus": [{"x": 1}]}\n',
    "not objects": b"[1, 2]\n3\n\"s\"\nnull\n",
    "future schema": b'{"schema": "fabricbench/99", "kind": "collective", "op": "all_reduce"}\n',
    "deep": b"[" * 100000 + b"]" * 100000 + b"\n",
}


def _reader_modes(bad, tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text(GLOO.read_text().replace('"host": "vm"', '"host": "other"'))
    spec = "builtin:h200-sxm-8"
    return [["qualify", "--init", str(tmp_path / "o.toml"), "--from", str(bad)],
            ["qualify", "--fleet", str(bad), str(good)],
            ["qualify", "--spec", spec, "--dry-run"] if False else ["qualify", "--spec", str(bad), "--dry-run"],
            ["qualify", "--spec", str(tmp_path / "topo.toml"), "--topo-file", str(TOPO / "h200_1gpu_real.txt"),
             "--baseline", str(bad)]]


@pytest.mark.parametrize("name", sorted(DAMAGED))
def test_readers_are_total_on_damaged_files(tmp_path, capsys, name):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(DAMAGED[name])
    (tmp_path / "topo.toml").write_text('[spec]\nname = "t"\n[[check]]\nname = "w"\nkind = "topology"\n'
                                        'gpu_count = 1\n')
    for args in _reader_modes(bad, tmp_path):
        code, out, err = run_cli(args, capsys)
        assert "Traceback" not in err + out, (args, err)
        assert code in (0, 1, 2, 3, 4), (args, code)
        if code == 2:
            one_error_line(err)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, 6000), flips=st.lists(st.tuples(st.integers(0, 6000), st.integers(0, 255)),
                                                 max_size=8))
def test_damaged_versions_of_a_real_results_file_never_crash_init_or_fleet(tmp_path, capsys, cut, flips):
    data = bytearray(GLOO.read_bytes()[:cut])
    for at, byte in flips:
        if data:
            data[at % len(data)] = byte
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(bytes(data))
    for args in _reader_modes(bad, tmp_path)[:2]:
        code, out, err = run_cli(args, capsys)
        assert "Traceback" not in err and code in (0, 1, 2, 3, 4), (args, code, err)
        if code == 2:
            one_error_line(err)


def test_prometheus_never_replaces_a_device_fifo_or_folder(tmp_path, capsys):
    fifo = tmp_path / "p.prom"
    os.mkfifo(fifo)
    spec = tmp_path / "t.toml"
    spec.write_text('[spec]\nname = "t"\n[[check]]\nname = "w"\nkind = "topology"\ngpu_count = 1\n')
    for target in (fifo, tmp_path, Path("/dev/null")):
        err = refused(["qualify", "--spec", str(spec), "--topo-file", str(TOPO / "h200_1gpu_real.txt"),
                       "--prometheus", str(target)], capsys)
        assert f"--prometheus {target}: is a " in err and "give a file name" in err  # the option type
        refused(["qualify", "--fleet", str(GLOO), str(GLOO), "--prometheus", str(target)], capsys)
    assert Path("/dev/null").is_char_device() and fifo.is_fifo()
