"""docs/multinode.md's torchrun recipes are the commands the emulated lab runs (tests/e2e/test_multinode.py):
each "# on node0" block, read from the page, against the argv the lab test builds for node 0, with the
page's address and port and `--out` set aside (the lab writes into its temporary folder).

Fast and runs everywhere: it starts nothing, it only reads the page and builds the argv.
"""

from __future__ import annotations

import shlex
import sys
from types import SimpleNamespace

import pytest

from tests.e2e import test_multinode as lab_tests
from roots import ROOT

PAGE = ROOT / "docs" / "multinode.md"


def node0_blocks() -> dict[str, list[str]]:
    """{command name: argv} for each indented block of the page that starts with "# on node0"."""
    out: dict[str, list[str]] = {}
    lines = PAGE.read_text().splitlines()
    for i, line in enumerate(lines):
        if not line.strip().startswith("# on node0"):
            continue
        cmd = []
        for nxt in lines[i + 1:]:
            if not nxt.startswith("    "):
                break
            cmd.append(nxt.strip().rstrip("\\").strip())
        argv = shlex.split(" ".join(cmd))
        name = argv[argv.index("fabricbench") + 1]
        out[name] = argv
    return out


def _normal(argv: list[str]) -> list[str]:
    """The interpreter as the page writes it, and --out's value set aside."""
    argv = ["python" if a == sys.executable else a for a in argv]
    return [("OUT" if i and argv[i - 1] == "--out" else a) for i, a in enumerate(argv)]


@pytest.fixture()
def nodes(monkeypatch):
    monkeypatch.setattr(lab_tests, "PORT", 29400)
    return [SimpleNamespace(index=i, name=f"node{i}", addr=f"10.77.0.{i + 1}") for i in range(2)]


def test_the_page_has_a_recipe_per_command():
    assert set(node0_blocks()) >= {"sweep", "train", "qualify", "study"}


def test_train_recipe_is_the_lab_command(nodes, tmp_path):
    assert _normal(node0_blocks()["train"]) == _normal(lab_tests.train_argv(nodes[0], nodes, tmp_path))


def test_sweep_recipe_is_the_lab_command(nodes, tmp_path):
    argv, _ = lab_tests.sweep_argv(nodes[0], nodes, tmp_path, "torchrun")
    assert _normal(node0_blocks()["sweep"]) == _normal(argv)


def test_study_recipe_is_the_lab_command(nodes, tmp_path):
    assert _normal(node0_blocks()["study"]) == _normal(lab_tests.study_argv(nodes[0], nodes, tmp_path))
