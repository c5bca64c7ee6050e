"""The ranks' bytecode (training/bytecode.py): a prefix in fabricbench's cache only where every rank would
otherwise compile torch from source, and Python really writes and reads it there, never beside the sources."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fabricbench.jobs import bytecode


@pytest.fixture
def bare_package(tmp_path, monkeypatch):
    """A package with no __pycache__ beside its source (as the GPU machine's site-packages), as the probe."""
    src = tmp_path / "src"
    (src / "fbprobe").mkdir(parents=True)
    (src / "fbprobe" / "__init__.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(src))
    monkeypatch.setattr(bytecode, "PROBE", "fbprobe")
    return src


def test_nothing_changes_where_writing_is_on(bare_package):
    assert bytecode.for_children({"HOME": "/h"}) == {}


def test_nothing_changes_where_the_sources_have_bytecode(monkeypatch):
    monkeypatch.setattr(bytecode, "_has_bytecode", lambda module: True)
    assert bytecode.for_children({"PYTHONDONTWRITEBYTECODE": "1"}) == {}


def test_a_users_prefix_is_kept(bare_package):
    assert bytecode.for_children({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/mine"}) == {}


def test_no_bytecode_and_no_writing_gives_the_cache_prefix(bare_package, tmp_path):
    env = {"PYTHONDONTWRITEBYTECODE": "1", "XDG_CACHE_HOME": str(tmp_path / "cache"), "KEEP": "x"}
    out = bytecode.apply(dict(env))
    assert "PYTHONDONTWRITEBYTECODE" not in out
    assert out["PYTHONPYCACHEPREFIX"] == str(tmp_path / "cache" / "fabricbench" / "pycache")
    assert out["KEEP"] == "x"
    assert bytecode.cache_dir({"HOME": "/h"}) == Path("/h/.cache/fabricbench/pycache")
    assert bytecode.cache_dir({"XDG_CACHE_HOME": "rel"}).is_absolute()


def test_python_writes_the_bytecode_in_the_cache_and_not_beside_the_source(bare_package, tmp_path):
    env = bytecode.apply({"PYTHONDONTWRITEBYTECODE": "1", "XDG_CACHE_HOME": str(tmp_path / "cache"),
                          "PYTHONPATH": str(bare_package), "PATH": "/usr/bin:/bin"})
    for _ in range(2):  # the first process writes, the second reads (and must not fail on it)
        out = subprocess.run([sys.executable, "-c", "import fbprobe; print(fbprobe.VALUE)"], env=env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "42"
    cached = list((tmp_path / "cache" / "fabricbench" / "pycache").rglob("*.pyc"))
    assert any("fbprobe" in str(p) for p in cached), cached
    assert not (bare_package / "fbprobe" / "__pycache__").exists()


def test_every_job_child_gets_it(bare_package, tmp_path, monkeypatch):
    """jobs.run is the one place children start (ranks, sweeps): the child itself sees the prefix."""
    from fabricbench import jobs

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "c"))
    seen = tmp_path / "seen.txt"
    code = ("import os, sys; open(sys.argv[1], 'w').write(os.environ.get('PYTHONPYCACHEPREFIX', '-') + ' ' "
            "+ str(sys.dont_write_bytecode))")
    ws = tmp_path / "ws"
    ws.mkdir()
    jobs.run([sys.executable, "-c", code, str(seen)], workspace=ws, budget_s=60)
    assert seen.read_text() == f"{tmp_path / 'c' / 'fabricbench' / 'pycache'} False"
