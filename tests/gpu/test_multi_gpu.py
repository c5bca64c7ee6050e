"""Several-GPU tier: one process driving a GPU list, one rank per process, and the torch engine, all
checked, on the first two (and, where present, all) GPUs. Skipped with the detected count elsewhere."""

import json

import pytest

from clirun import run_cli_subprocess
from conftest import GPUS

pytestmark = pytest.mark.gpu(2)

OPS = "all_reduce,all_gather,reduce_scatter,broadcast,all_to_all"


def _sweep(*args):
    """The records `fabricbench sweep ARGS --json` prints, the command asserted to succeed."""
    code, out, err = run_cli_subprocess(["sweep", *args, "--json"], timeout=900)
    assert code == 0, err[-3000:]
    return [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]


MODES = {
    "single-process": ["--engine", "native"],
    "rank-per-process": ["--engine", "native", "--nprocs", "2"],
    "torch-nccl": ["--engine", "torch", "--backend", "nccl", "--nprocs", "2"],
}


@pytest.mark.parametrize("mode", list(MODES))
def test_two_gpus_checked(mode):
    recs = _sweep("--gpus", "0,1", "--ops", OPS, "--sizes", "8-1G:x32", "--both", "--check", "--iters", "5",
                  *MODES[mode])
    ran = [r for r in recs if r["status"] != "waived"]
    assert ran and all(r["wrong"] == 0 and r["nranks"] == 2 for r in ran)
    assert all(r["gpus"] == [0, 1] and len(r["gpu_names"]) == 2 for r in ran)  # every rank's GPU named
    for r in ran:
        factor = {"all_reduce": 1.0, "broadcast": 1.0}.get(r["op"], 0.5)
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * factor)


@pytest.mark.gpu(3)
def test_non_consecutive_gpu_list():
    recs = _sweep("--gpus", f"0,{GPUS - 1}", "--ops", "all_reduce", "--sizes", "1M", "--check")
    assert recs[0]["gpus"] == [0, GPUS - 1] and recs[0]["wrong"] == 0


def test_all_gpus_1G_busbw_positive():
    recs = _sweep("--ops", "all_reduce,all_gather,reduce_scatter", "--sizes", "1G", "--check", "--iters", "10")
    assert all(r["nranks"] == GPUS and r["wrong"] == 0 and r["busbw_gbps"] > 0 for r in recs)
