"""`fabricbench scaling`: GPU sets per count from the three saved topologies, and end to end on gloo."""

from __future__ import annotations

import json

import pytest

from fabricbench.measuring.scaling_run import parse_counts
from fabricbench.errors import UsageError
from fabricbench.results import read_results
from fabricbench.topology.placement import scaling_sets
from fabricbench.topology.smi import read_file
import roots
from clirun import run_cli_subprocess

DATA = roots.DATA / "topo"


def _sets(name, counts, gpus=None):
    t = read_file(str(DATA / name))
    return [(p.count, p.label, p.gpus, p.worst_link) for p in scaling_sets(t, counts, gpus)]


def test_nvswitch_is_flat():
    assert _sets("h200_sxm_nvswitch.txt", [2, 4, 8]) == [
        (2, "uniform", (0, 1), "NV18"), (4, "uniform", (0, 1, 2, 3), "NV18"),
        (8, "uniform", tuple(range(8)), "NV18")]


def test_nvl_two_quads_inside_and_across():
    # A pair inside a quad (NV6: 6 of 18 links), the full quad (all 18), and everything across at SYS.
    assert _sets("h200_nvl_two_quads.txt", [2, 4, 8]) == [
        (2, "intra-island", (0, 1), "NV6"), (2, "cross-island", (0, 4), "SYS"),
        (4, "intra-island", (0, 1, 2, 3), "NV6"), (4, "cross-island", (0, 1, 4, 5), "SYS"),
        (8, "cross-island", tuple(range(8)), "SYS")]
    assert _sets("h200_nvl_two_quads.txt", [2, 3], gpus=(4, 5, 6, 7)) == [
        (2, "intra-island", (4, 5), "NV6"), (3, "intra-island", (4, 5, 6), "NV6")]
    assert _sets("h200_nvl_two_quads.txt", [2, 3], gpus=(2, 3, 4)) == [
        (2, "intra-island", (2, 3), "NV6"), (2, "cross-island", (2, 4), "SYS"),
        (3, "cross-island", (2, 3, 4), "SYS")]


def test_pcie_box_takes_the_closest_sets():
    assert _sets("l40s_pcie.txt", [2, 4, 8]) == [
        (2, "cross-island", (0, 1), "PIX"), (4, "cross-island", (0, 1, 2, 3), "NODE"),
        (8, "cross-island", tuple(range(8)), "SYS")]


def test_counts_parsing():
    assert parse_counts(None, 8, "0-7") == [2, 4, 8]
    assert parse_counts(None, 6, "0-5") == [2, 4, 6]
    assert parse_counts("8,2", 8, "0-7") == [2, 8]
    with pytest.raises(UsageError, match="counts 2,8: 8 is more than the 4 GPUs of gpus 0-3"):
        parse_counts("2,8", 4, "0-3")
    with pytest.raises(UsageError, match="start at 2"):
        parse_counts("1,2", 4, "0-3")
    with pytest.raises(UsageError, match="not a whole number"):
        parse_counts("2,x", 4, "0-3")
    with pytest.raises(UsageError, match="at least 2"):
        parse_counts(None, 1, "0")


def test_scaling_bad_input_one_line():
    code, _, err = run_cli_subprocess(["scaling", "--topo-file", DATA / "h200_nvl_two_quads.txt", "--gpus", "0-3",
                                       "--num-gpus", "2,8", "--engine", "torch", "--backend", "gloo"], timeout=300)
    assert code == 2 and err.strip() == \
        "Error: counts 2,8: 8 is more than the 4 GPUs of gpus 0-3"  # library errors name parameters
    code, _, err = run_cli_subprocess(["scaling", "--topo-file", "/nonexistent.txt", "--engine", "torch",
                                       "--backend", "gloo"], timeout=300)
    assert code == 2 and err.startswith("Error: --topo-file /nonexistent.txt: ")


@pytest.mark.slow
def test_scaling_end_to_end_on_gloo(tmp_path):
    out, png = tmp_path / "sc.jsonl", tmp_path / "sc.png"
    code, stdout, err = run_cli_subprocess(
        ["scaling", "--topo-file", DATA / "h200_nvl_two_quads.txt", "--gpus", "0,1,4,5", "--num-gpus", "2,4",
         "--engine", "torch", "--backend", "gloo", "--sizes", "4K,16K", "--iters", "3", "--warmup", "1",
         "--out", out, "--plot", png, "--json"], timeout=300)
    assert code == 0, err
    doc = json.loads(stdout)
    topo = list(read_results(out, kind="topology"))
    assert len(topo) == 1 and topo[0]["islands"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    recs = list(read_results(out, kind="collective"))
    got = sorted({(r["extra"]["count"], r["extra"]["placement"], tuple(r["extra"]["placement_gpus"]), r["nranks"])
                  for r in recs})
    assert got == [(2, "cross-island", (0, 4), 2), (2, "intra-island", (0, 1), 2), (4, "cross-island", (0, 1, 4, 5), 4)]
    assert len(recs) == 3 * 2 and {r["bytes"] for r in recs} == {4096, 16384}
    assert all(r["fabric"] == "default" and r["op"] == "all_reduce" for r in recs)
    by = {(r["extra"]["placement"], r["nranks"], r["bytes"]): r["busbw_gbps"] for r in recs}
    assert len(doc["rows"]) == 6
    for row in doc["rows"]:
        assert row["busbw_gbps"] == by[(row["placement"], row["count"], row["bytes"])]
        # busbw = algbw x 2(n-1)/n for all-reduce
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 2 * (row["count"] - 1) / row["count"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
