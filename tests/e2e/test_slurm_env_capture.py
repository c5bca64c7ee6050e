"""Slurm's environment as a real job sets it: captured from the lab's Slurm (22.05) into tests/data/slurm/,
which tests/unit/test_slurm_env.py holds fabricbench/cluster/env.py to on every machine.

    python3 -m pytest -q -m multinode tests/e2e/test_slurm_env_capture.py     # a fresh capture, checked alike
    python3 -m tests.test_slurm_env_capture                               # rewrite tests/data/slurm/

One batch job of 2 nodes with 2 tasks per node: its batch script's own environment (the batch step), an
srun step of every task (2 per node), one of 1 task per node (what train and study take), and one of
--gpus-per-task 1 (each task its own GPU: CUDA_VISIBLE_DEVICES names one, whatever its local rank).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fabricbench.cluster import slurm
from tests import slurmlab as sl
from tests.unit import test_slurm_env as fixtures

WHY = slurm.unavailable()
GPUS = 4  # per node: gres/gpu on stand-in device files (slurm.py), so that --gpus-per-task binds as on GPUs
pytestmark = [pytest.mark.multinode, pytest.mark.skipif(WHY is not None, reason=WHY or "")]

VARS = "^(SLURM_|CUDA_VISIBLE_DEVICES=|GPU_DEVICE_ORDINAL=)"
SCRIPT = f"""#!/bin/bash
#SBATCH --nodes 2 --ntasks-per-node 2 --gpus-per-node 2 --job-name capture
env | grep -E '{VARS}' | sort > batch.env
srun bash -c 'env | grep -E "{VARS}" | sort > step-2pn-rank$SLURM_PROCID.env'
srun --ntasks 2 --ntasks-per-node 1 bash -c 'env | grep -E "{VARS}" | sort > step-1pn-rank$SLURM_PROCID.env'
srun --gpus-per-task 1 bash -c 'env | grep -E "{VARS}" | sort > step-gpt-rank$SLURM_PROCID.env'
"""


def capture(folder: Path) -> list[Path]:
    """Run the capture job on a fresh lab Slurm; the .env files it wrote into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for f in folder.glob("*.env"):
        f.unlink()
    (folder / "capture.sbatch").write_text(SCRIPT)
    with slurm.cluster(2, gpus=GPUS) as s:
        sl.run(s, "sbatch --wait --output capture-%j.out capture.sbatch", folder, "sbatch", 120)
    for f in [*folder.glob("capture*"), folder / "sbatch.out"]:
        f.unlink()
    return sorted(folder.glob("*.env"))


def test_a_fresh_capture_reads_as_the_committed_one(tmp_path):
    files = capture(tmp_path)
    assert sorted(f.name for f in files) == sorted(f.name for f in fixtures.DATA.glob("*.env"))
    for f in files:
        fresh, kept = fixtures.read(f), fixtures.read(fixtures.DATA / f.name)
        assert set(fresh) == set(kept), (f.name, set(fresh) ^ set(kept))
    fixtures.check_all(tmp_path)


if __name__ == "__main__":
    for f in capture(fixtures.DATA):
        print(f, file=sys.stderr)
