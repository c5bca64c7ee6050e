"""Every error speaks plainly: the CLI's `Error:` line never begins with an exception's
class name ("Error: NodeLost: ..."); where a message alone would not say what failed, a label in words does
("NCCL error"), and a parent reads a child's label back as its class."""

from __future__ import annotations

import os
import socket

import pytest

from fabricbench import errors
from clirun import one_error_line, run_cli, run_cli_subprocess


def _free_port() -> int:
    with socket.socket() as s:  # bound, then closed: nothing answers on it
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_node_0_that_never_comes_is_said_plainly(tmp_path):
    argv = ["study", "--device", "cpu", "--nprocs", "1", "--nnodes", "2", "--node-rank", "1", "--master-addr",
            "127.0.0.1", "--master-port", _free_port(), "--join-timeout", "1", "--model", "tiny-mistral",
            "--strategies", "ddp", "--steps", "5", "--out", tmp_path / "s"]
    code, _, err = run_cli_subprocess(argv, env={**os.environ, "COLUMNS": "200"})
    line = one_error_line(err)
    assert code == 1 and line.startswith("Error: node 0 did not answer at 127.0.0.1:"), line


@pytest.mark.parametrize("cls,said", [(errors.FabricbenchError, "Error: it broke"),
                                      (errors.NcclError, "Error: NCCL error: it broke"),
                                      (errors.CollectiveTimeout, "Error: timeout: it broke"),
                                      (errors.CheckFailed, "Error: check failed: it broke")])
def test_the_cli_line_is_the_label_and_the_message(monkeypatch, capsys, cls, said):
    from fabricbench.measuring import sweep_run

    def fail(*a, **k):
        raise cls("it broke")
    monkeypatch.setattr(sweep_run, "run", fail)
    code, _, err = run_cli(["sweep", "--engine", "torch", "--backend", "gloo", "--nprocs", "2", "--sizes", "1K"], capsys)
    assert code == 1 and err.strip() == said
    assert cls.label == "" or errors.by_label(cls.label) is cls  # what a parent reads back
