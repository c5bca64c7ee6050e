"""Exit codes for input that cannot be used: one `Error:` line and exit 2, before anything runs.

    fabricbench study --device cpu --nprocs 1000 --dry-run --out lab   (refused: the limit every command shares)
"""

from __future__ import annotations

import pytest

from fabricbench.measuring.config import PROCS_PER_CORE, cores
from clirun import refused


@pytest.mark.parametrize("args", [
    ["study", "--device", "cpu", "--model", "tiny-mistral", "--dry-run", "--out", "{tmp}/lab"],
    ["train", "--device", "cpu", "--model", "tiny-mistral", "--steps", "5"],
    ["sweep", "--engine", "torch", "--backend", "gloo", "--dry-run"],
])
def test_too_many_local_ranks_is_refused_by_every_command(args, capsys, tmp_path):
    # `study --nprocs 1000 --dry-run` exited 0 (its sweep and train units would each have refused it later)
    many = PROCS_PER_CORE * cores() + 1
    line = refused([a.format(tmp=tmp_path) for a in args] + ["--nprocs", str(many)], capsys)
    assert f"--nprocs {many}" in line and f"use at most {many - 1}" in line
