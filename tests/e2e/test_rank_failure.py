"""A rank that fails: its exception's message once, on one line, and its traceback in the log file.

    fabricbench sweep --engine torch --backend gloo --nprocs 2 --fabric nowhere:GLOO_SOCKET_IFNAME=fbnoif0

Once, that command printed "Error: the sweep under fabric nowhere failed: Error: rank 0: RuntimeError:
[enforce fail at ...] ...; Traceback (most recent call last):; File ..." with every frame joined by "; ".
"""

from __future__ import annotations

import os

import pytest

from fabricbench import errors
from fabricbench.fabrics import get_fabric
from fabricbench.jobs import channel
from fabricbench.measuring.child import ChildRun, _child_error
from fabricbench.measuring.local_rank import failure
from clirun import one_error_line, run_cli_subprocess

GLOO_NO_IF = ("[enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/device.cc:84] "
              "ifa != nullptr. Unable to find address for: fbnoif0\nException raised from ...\nframe #0: ...")


def _raised(e: BaseException) -> BaseException:
    try:  # a real traceback, as a rank's exception has
        raise e
    except BaseException as caught:  # noqa: BLE001
        return caught


def test_a_missing_interface_is_said_with_what_to_do():
    kind, line = failure(_raised(RuntimeError(GLOO_NO_IF)), 0, 30.0)
    assert kind == "UsageError" and "\n" not in line  # exit 2: the fabric named what this host lacks
    assert "'fbnoif0'" in line and "ip -br link" in line and "enforce fail" not in line


def test_an_unforeseen_failure_is_its_message_and_the_traceback_goes_to_the_log(tmp_path, monkeypatch):
    log = tmp_path / "fabricbench.log"
    monkeypatch.setenv(channel.LOG_ENV, str(log))
    kind, line = failure(_raised(ValueError("a shape of -3\nsecond line of detail")), 1, 30.0)
    assert kind == "FabricbenchError" and "\n" not in line and "Traceback" not in line
    assert line == f"rank 1: ValueError: a shape of -3 (traceback in {log})"
    kept = log.read_text()
    assert "--- rank 1, pid" in kept and "Traceback (most recent call last)" in kept
    assert "_raised" in kept and "second line of detail" in kept  # the whole of it, frames included


def test_without_a_log_file_the_traceback_goes_to_stderr(monkeypatch, capsys):
    monkeypatch.delenv(channel.LOG_ENV, raising=False)
    _, line = failure(_raised(KeyError("k")), 0, 30.0)
    assert line == "rank 0: KeyError: 'k'" and "Traceback" in capsys.readouterr().err


def test_the_parent_says_the_childs_error_once_without_its_prefix():
    run = ChildRun(fabric=get_fabric("nowhere:GLOO_SOCKET_IFNAME=fbnoif0"), returncode=1,
                   error="Error: rank 0: ValueError: a shape of -3 (traceback in /tmp/x.log)")
    e = _child_error(run)
    assert type(e) is errors.FabricbenchError
    assert str(e) == "the sweep under fabric nowhere failed: rank 0: ValueError: a shape of -3 (traceback in /tmp/x.log)"


@pytest.mark.slow
def test_a_sweep_on_a_missing_interface_is_one_line(tmp_path):
    code, stdout, err = run_cli_subprocess(["sweep", "--engine", "torch", "--backend", "gloo", "--nprocs", "2",
                                            "--fabric", "nowhere:GLOO_SOCKET_IFNAME=fbnoif0", "--sizes", "1K", "--ops",
                                            "all_reduce", "--timeout", "30"], cwd=tmp_path,
                                           env={**os.environ, "TMPDIR": str(tmp_path)})
    # found before any rank starts (fabrics.apply checks the interfaces): one line, no progress before it
    assert code == 2 and err == one_error_line(err) + "\n" and err.startswith("Error: no network"), err
    assert "'fbnoif0'" in err and "Traceback" not in err and stdout == ""
