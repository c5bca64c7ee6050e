"""docs/relate.md "Your own job" runs as written: its train.py (the page's second Python block) in a fresh
folder, then each command of its shell block in order, as a user pastes them; each must exit 0, and relate's
table must hold both fabrics.

    python3 -m pytest -q -m slow -n0 tests/house/test_docs_own_job.py      (as root with iproute2: shaped:1gbit)
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from fabricbench.fabrics import shaped
from roots import ROOT

PAGE = ROOT / "docs" / "relate.md"


def section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("## Your own job")
    end = text.find("\n## ", start + 1)
    return text[start:] if end == -1 else text[start:end]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_the_section_has_the_snippet_the_script_and_the_commands():
    sec = section()
    snippet, script = blocks(sec, "python")
    assert len([ln for ln in snippet.splitlines() if "# yours" not in ln]) <= 5  # the lines to add
    assert "record_shapes=True" in snippet and "ProfilerStep" in sec and "prof.step()" in script
    [cmds] = blocks(sec, "sh")
    verbs = [shlex.split(line)[1] for line in cmds.splitlines() if line.strip()]
    assert verbs == ["exec", "exec", "sweep", "sweep", "relate"]
    assert "import fabricbench" not in script  # a plain PyTorch loop


@pytest.mark.slow
@pytest.mark.skipif(shaped.capability() is not None, reason="the page's shaped:1gbit needs root, iproute2 and "
                    "network namespaces")
def test_the_commands_run_as_written(tmp_path):
    sec = section()
    (tmp_path / "train.py").write_text(blocks(sec, "python")[1])
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    bindir = tmp_path / "bin"  # `fabricbench` and `torchrun` as a user's shell finds them, from this Python
    bindir.mkdir()
    for name, module in (("fabricbench", "fabricbench"), ("torchrun", "torch.distributed.run")):
        (bindir / name).write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m {module} \"$@\"\n")
        (bindir / name).chmod(0o755)
    env["PATH"] = f"{bindir}:{env.get('PATH', os.defpath)}"
    outs = []
    for line in blocks(sec, "sh")[0].splitlines():
        if not line.strip():
            continue
        res = subprocess.run(line, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, f"{line}\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
        outs.append(res)
    assert len(list((tmp_path / "prof").glob("*.pt.trace.json"))) == 2  # one trace per rank
    assert "median step" in outs[1].stdout  # the command's own output is left to it
    table = outs[-1].stdout
    rows = [ln.split() for ln in table.splitlines()]
    assert any("default" in r for r in rows) and any("shaped:1gbit" in r for r in rows), table
