"""README's set-up (`./install`) notices an unreachable CPU torch index and says in one line what it does
instead: pip alone fell back to PyPI's CUDA torch (17 more wheels, 5.9 GB, 19 minutes) saying nothing but
"Retrying". --dry-run shows the line and the pip command without installing anything."""

import os
import subprocess
import sys

import pytest

from conftest import GPUS
from roots import ROOT

DEAD = "http://127.0.0.1:9/whl/cpu"  # the discard port: refused at once, as an unreachable index is


def _install(tmp_path, python=sys.executable):
    env = {**os.environ, "FABRICBENCH_TORCH_INDEX": DEAD, "PYTHON": str(python)}
    return subprocess.run([str(ROOT / "install"), "--dry-run"], capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.skipif(GPUS > 0, reason=f"{GPUS} GPU(s) detected: the install takes PyPI's CUDA torch, no index")
def test_an_unreachable_index_with_torch_installed_keeps_it(tmp_path):
    r = _install(tmp_path)
    assert r.returncode == 0, r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"install: {DEAD} cannot be reached; keeping the torch ") and "without the index" in line
    assert r.stdout.strip() == f'would run: {sys.executable} -m pip install -e .[test,train]'  # no index: no retries


@pytest.mark.skipif(GPUS > 0, reason=f"{GPUS} GPU(s) detected: the install takes PyPI's CUDA torch, no index")
def test_an_unreachable_index_without_torch_says_what_it_installs(tmp_path):
    """A fresh machine still gets a working install; the one line says which torch and what it costs."""
    bare = tmp_path / "python-without-torch"  # site-packages off: no torch to keep, and no pip to find a wheel
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    r = _install(tmp_path, bare)
    assert r.returncode == 0, r.stderr
    (line,) = r.stderr.splitlines()
    assert "cannot be reached, no torch is installed and pip finds none on this machine" in line
    assert "CUDA build, ~3 GB" in line and "docs/troubleshooting.md" in line
    assert r.stdout.strip() == f'would run: {bare} -m pip install -e .[test,train]'
