"""A training rank that fails: its exception's first line once, its traceback in the job's log file, and
what this host lacks (an interface the fabric named) stops `train` with one line and exit 2.

    fabricbench train --device cpu --strategies ddp,fsdp --nprocs 2 --fabric nowhere:GLOO_SOCKET_IFNAME=fbnoif0

Once, that command failed every strategy after ~20 s each with gloo's raw "[enforce fail at ...]" text
and no advice, exit 1, and the ranks' tracebacks reached no log file. Sweep's side is tests/e2e/test_rank_failure.py.
"""

from __future__ import annotations

import json
import os

import pytest

from fabricbench.errors import UsageError
from fabricbench.jobs import channel
from fabricbench.measuring import failures
from fabricbench.training import worker
from fabricbench.training.config import TrainConfig
from fabricbench.training.join import setup_failure
from fabricbench.training.spec import RankSpec
from clirun import one_error_line, run_cli_subprocess

GLOO_NO_IF = ("[enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/device.cc:84] "
              "ifa != nullptr. Unable to find address for: fbnoif0\nException raised from ...\nframe #0: ...")


def test_only_a_missing_interface_is_a_setup_error():
    err = failures.setup_error(RuntimeError(GLOO_NO_IF))
    assert isinstance(err, UsageError) and "'fbnoif0'" in str(err) and "ip -br link" in str(err)
    assert failures.setup_error(RuntimeError("Connection reset by peer")) is None
    assert failures.setup_error(ValueError("Unable to find address for: x")) is None  # not torch's


def _failing_rank(tmp_path, monkeypatch, exc: BaseException) -> dict:
    """worker.run with the process group's start raising `exc` -> the rank file it wrote."""
    config = TrainConfig(strategies=["ddp"], model="tiny-mistral", device="cpu", nprocs=2, steps=8)
    spec = RankSpec.of(config, "ddp", run_dir=tmp_path, fabric="default", fault=None, local_devices=None)

    def init(*_a, **_k):
        raise exc

    # no model built, no group started: the failure is all this test is about
    monkeypatch.setattr(worker.models, "resolve", lambda **_k: None)
    monkeypatch.setattr(worker, "_imports", lambda *_a: None)
    monkeypatch.setattr(worker, "_init", init)
    monkeypatch.setenv("RANK", "1")
    assert worker.run(spec, tmp_path / "rank-1.json") == 1
    return json.loads((tmp_path / "rank-1.json").read_text())


def test_a_rank_on_a_missing_interface_says_what_to_do_and_stops_the_command(tmp_path, monkeypatch):
    doc = _failing_rank(tmp_path, monkeypatch, RuntimeError(GLOO_NO_IF))
    assert doc["status"] == "error" and doc["error_kind"] == "UsageError"
    assert "enforce fail" not in doc["message"] and "ip -br link" in doc["message"]
    err = setup_failure([{"rank": 0, "status": "error", "message": "x"}, doc])
    assert isinstance(err, UsageError) and str(err) == doc["message"]


def test_another_failure_is_its_first_line_and_its_traceback_goes_to_the_log(tmp_path, monkeypatch):
    log = tmp_path / "fabricbench.log"
    monkeypatch.setenv(channel.LOG_ENV, str(log))
    doc = _failing_rank(tmp_path, monkeypatch, ValueError("a shape of -3\nsecond line of detail"))
    assert doc["status"] == "error" and "error_kind" not in doc and "traceback" not in doc
    assert doc["message"] == f"ValueError: a shape of -3 (traceback in {log})"
    kept = log.read_text()
    assert "--- rank 1, pid" in kept and "Traceback (most recent call last)" in kept
    assert "in init" in kept and "second line of detail" in kept  # the whole of it, frames included
    assert setup_failure([doc]) is None  # a per-strategy record, not the command's end


@pytest.mark.slow
def test_train_on_a_missing_interface_is_one_line_and_exit_2(tmp_path):
    out = tmp_path / "t.jsonl"
    code, stdout, err = run_cli_subprocess(
        ["train", "--device", "cpu", "--strategies", "ddp,fsdp", "--model", "tiny-mistral", "--nprocs", "2", "--steps",
         "5", "--repeats", "1", "--target-ci", "0", "--fabric", "nowhere:GLOO_SOCKET_IFNAME=fbnoif0", "--out", out],
        timeout=300, cwd=tmp_path, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert code == 2 and err == one_error_line(err) + "\n", err
    assert "'fbnoif0'" in err and "ip -br link" in err and "enforce fail" not in err
    assert "fsdp" not in err + stdout  # stopped at the first strategy: the second would fail alike
    assert not out.exists() or out.read_text() == ""
