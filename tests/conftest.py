"""Test tiers, and what the default command runs.

    python3 -m pytest -q                 the default: fast tests and a few end-to-end runs, in parallel (minutes)
    python3 -m pytest -q -m slow         the rest of the end-to-end runs (.ci/run's second step)
    python3 -m pytest -q -m lab          measurements whose verdict depends on the machine's load: run alone
    python3 -m pytest -q -n0 tests/x.py  one file, in this process (no workers to start)

Markers (pyproject.toml): `slow` is an end-to-end run (real processes, seconds to minutes) left out of the
default command; `lab` a measurement that needs a quiet machine; `gpu(n)` needs n CUDA GPUs and is skipped,
with the detected count in the reason, when fewer are present. Detection reads the NVIDIA driver's device
list (no CUDA context, no torch), never an exception caught at test time.

Workers: pytest-xdist runs the default command on up to MAX_WORKERS processes, one whole test file per
worker at a time (module fixtures run once), and every GPU test on one worker (one at a time, the machine's
GPUs to itself). Where pytest-xdist is not installed, -n and --dist are accepted and the tests run here.
A test marked `alone` (and every `lab` test) has the machine to itself while it runs: its bar compares
timings taken in different runs, and a neighbour's training would slow some runs and not others. The other
workers wait before their next test (or module set-up) starts; see machine_share().
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess

import pytest

# pytest-xdist's workers start with COLUMNS=80 (execnet sets it) where a plain run has none: piped output
# honours COLUMNS (report.table), so a test that wants a width sets it, and the rest see the same either way
os.environ.pop("COLUMNS", None)

MAX_WORKERS = 4  # each worker imports torch (~0.5 GB); the e2e runs start 2-3 ranks each


def detected_gpus() -> int:
    """CUDA GPUs this process may use, as the driver lists them and CUDA_VISIBLE_DEVICES narrows them."""
    if not os.path.exists("/proc/driver/nvidia") and shutil.which("nvidia-smi") is None:
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    n = sum(1 for line in out.splitlines() if line.startswith("GPU "))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        n = min(n, len([v for v in visible.split(",") if v.strip()]))
    return n


GPUS = detected_gpus()


def pytest_addoption(parser, pluginmanager):
    if not pluginmanager.has_plugin("xdist"):  # addopts asks for workers: accept the flags, run here
        group = parser.getgroup("xdist", "pytest-xdist is not installed: -n and --dist are accepted and ignored")
        group._addoption("-n", "--numprocesses", dest="numprocesses", default=None)
        group._addoption("--dist", dest="dist", default="no")


def names_multinode(config) -> bool:
    """Whether -m asks for the multinode tier (`-m multinode`, `-m "multinode and not slow"`, not `not multinode`)."""
    return re.search(r"(?<!not )\bmultinode\b", config.getoption("markexpr", "") or "") is not None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """-n auto: one worker per core up to MAX_WORKERS; one on a GPU machine, where GPU tests measure; none
    (this process) for the multinode tier, whose every test starts a cluster of namespaces and daemons that
    needs the machine's CPUs to itself to keep its time bounds."""
    if names_multinode(config):
        return 0
    return 1 if GPUS else max(1, min(os.cpu_count() or 1, MAX_WORKERS))


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(config, items):
    # The real-Slurm tests (marked multinode alone) run only where -m names multinode, as .ci/multinode
    # installs Slurm for them; the emulated cluster's end-to-end runs (multinode and slow) stay in -m slow too.
    def slurm_only(it: pytest.Item) -> bool:
        return it.get_closest_marker("multinode") is not None and it.get_closest_marker("slow") is None

    if "multinode" not in (config.getoption("markexpr", "") or ""):
        off = [it for it in items if slurm_only(it)]
        if off:
            config.hook.pytest_deselected(items=off)
            items[:] = [it for it in items if not slurm_only(it)]
    for item in items:
        mark = item.get_closest_marker("gpu")
        if mark is not None:
            need = mark.args[0] if mark.args else 1
            if GPUS < need:
                item.add_marker(pytest.mark.skip(reason=f"needs {need} GPU(s); {GPUS} detected"))
        if item.get_closest_marker("xdist_group") is None:  # a file's tests on one worker; GPU tests together
            item.add_marker(pytest.mark.xdist_group("gpu" if mark is not None else item.nodeid.split("::")[0]))


@contextlib.contextmanager
def machine_share(item: pytest.Item):
    """A shared hold on the machine for a test under pytest-xdist, or the whole of it for an `alone` or `lab`
    test. Two flock files in the run's shared temp folder: the gate, which a test passes through on its way
    in (an `alone` test holds it, so no worker starts anything new while it waits for the tests already
    running to end), and the share itself (shared by the others, exclusive for an `alone` test)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # one process: nothing runs beside a test
        yield
        return
    # a worker's basetemp is <run>/popen-gwN: the parent is this run's, the same for every worker
    shared = item.config._tmp_path_factory.getbasetemp().parent
    alone = item.get_closest_marker("alone") is not None or item.get_closest_marker("lab") is not None
    with open(shared / "machine.gate", "a") as gate, open(shared / "machine.share", "a") as share:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(share, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(share, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Set-up, call and tear-down of every test (module fixtures included) inside its machine_share()."""
    with machine_share(item):
        yield
