"""Topology: the `nvidia-smi topo -m` parser on saved outputs, islands, advice, NVML reading, `topo` CLI."""

from __future__ import annotations

import json
import types

import pytest

from fabricbench.errors import UsageError
from fabricbench.topology import cuda_to_nvml, islands_warning, snapshot_record
from fabricbench.topology.model import Gpu, Topology, link_rank
from fabricbench.topology.smi import parse_topo_matrix, read_file
from clirun import refused, run_cli
import roots

DATA = roots.DATA / "topo"
SXM = DATA / "h200_sxm_nvswitch.txt"
NVL = DATA / "h200_nvl_two_quads.txt"
PCIE = DATA / "l40s_pcie.txt"


def test_saved_outputs_carry_what_real_ones_do():
    sxm = SXM.read_text()
    assert "\x1b[4m" in sxm and "\x1b[0m" in sxm and "\t\tN/A" in sxm and "NIC Legend" in sxm
    assert "\t" not in PCIE.read_text()


def test_nvswitch_board():
    t = read_file(str(SXM))
    assert t.indices == tuple(range(8))
    assert all(t.link(a, b) == "NV18" for a, b in t.pairs())
    assert [t.links[i][i] for i in range(8)] == ["X"] * 8
    assert t.islands() == [list(range(8))]
    assert t.uniform is True
    assert [n.label for n in t.nics] == [f"NIC{i}" for i in range(10)]
    assert t.nics[3].device == "mlx5_3" and t.nics[3].links[3] == "PIX" and t.nics[3].links[4] == "SYS"
    assert t.gpus[0].cpu_affinity == "0-55,112-167" and t.gpus[0].numa_node == 0
    assert t.gpus[7].cpu_affinity == "56-111,168-223" and t.gpus[7].numa_node == 1
    adv = {a["k"]: a for a in t.advice()}
    assert sorted(adv) == list(range(2, 9))
    assert all(a["inside_island"] for a in adv.values())
    assert adv[8]["sets"] == [list(range(8))]
    assert adv[2]["text"] == "any 2 GPUs: every pair is NV18"


def test_nvl_two_quads():
    t = read_file(str(NVL))
    assert t.link(0, 3) == "NV6" and t.link(4, 7) == "NV6" and t.link(3, 4) == "SYS"
    assert t.nvlinks(1, 2) == 6 and t.nvlinks(1, 5) == 0
    assert t.islands() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert t.uniform is False
    adv = {a["k"]: a for a in t.advice()}
    assert adv[2]["sets"] == [[0, 1], [4, 5]] and adv[4]["sets"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert adv[4]["inside_island"] and not adv[5]["inside_island"]
    assert adv[5]["sets"] == [[0, 1, 2, 3, 4]]  # fill one quad first: fewest SYS hops
    assert "no NVLink island holds 5 GPUs" in adv[5]["text"] and "SYS" in adv[5]["text"]
    assert t.placement([0, 1, 2, 3]) == "intra-island" and t.placement([0, 4]) == "cross-island"
    assert t.worst_link([0, 1, 5]) == "SYS"


def test_pcie_only_box_space_separated():
    t = read_file(str(PCIE))
    assert t.islands() == [[i] for i in range(8)]
    assert t.uniform is False
    assert t.link(0, 1) == "PIX" and t.link(0, 2) == "NODE" and t.link(0, 4) == "SYS"
    assert t.gpus[5].cpu_affinity == "32-63,96-127" and t.gpus[5].numa_node == 1
    assert t.nics[0].links[:3] == ("PXB", "PXB", "NODE")
    adv = {a["k"]: a for a in t.advice()}
    assert not any(a["inside_island"] for a in adv.values())
    assert adv[2]["sets"] == [[0, 1]]  # the PIX pair
    assert adv[4]["sets"] == [[0, 1, 2, 3]] and "NODE" in adv[4]["text"]  # one socket, not SYS


def test_subset_and_summary():
    t = read_file(str(NVL)).subset([1, 2, 5])
    assert t.indices == (1, 2, 5)
    assert t.links == (("X", "NV6", "SYS"), ("NV6", "X", "SYS"), ("SYS", "SYS", "X"))
    assert t.islands() == [[1, 2], [5]]
    assert read_file(str(NVL)).summary() == \
        "8 GPU(s), 2 NVLink island(s) ([0-3], [4-7]), NV6 inside, not uniform"
    with pytest.raises(UsageError, match="names GPU 9"):
        read_file(str(NVL)).subset([0, 9])


def test_overlapping_cliques_are_maximal():
    # A 4-GPU ring with NVLink between neighbours only: the islands are the 4 pairs.
    ring = {(0, 1), (1, 2), (2, 3), (0, 3)}
    links = tuple(tuple("X" if i == j else ("NV2" if (min(i, j), max(i, j)) in ring else "SYS")
                        for j in range(4)) for i in range(4))
    t = Topology(gpus=tuple(Gpu(index=i) for i in range(4)), links=links)
    assert t.islands() == [[0, 1], [0, 3], [1, 2], [2, 3]]


def test_link_rank_orders_fastest_first():
    order = sorted(["SYS", "PIX", "NV6", "NODE", "NV18", "PXB", "PHB"], key=link_rank)
    assert order == ["NV18", "NV6", "PIX", "PXB", "PHB", "NODE", "SYS"]


@pytest.mark.parametrize("text,match", [
    ("hello\nworld\n", "no header row naming GPU0"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-7\nGPU1\tNV4\t X \t0-7\nGPU2\tNV4\tFOO\t0-7\n", "'FOO'"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-7\n", "no row for GPU1"),
    ("\tGPU0\tGPU1\nGPU0\tNV4\tNV4\nGPU1\tNV4\t X \n", "diagonal"),
])
def test_not_a_topo_output(text, match):
    with pytest.raises(UsageError, match=match):
        parse_topo_matrix(text, source="t")


def test_single_gpu_and_old_soc_name():
    t = parse_topo_matrix("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-15\t0\n")
    assert t.indices == (0,) and t.islands() == [[0]] and t.advice() == [] and t.gpus[0].numa_node == 0
    t2 = parse_topo_matrix("        GPU0    GPU1    CPU Affinity\nGPU0     X      SOC     0-7\nGPU1    SOC      X      8-15\n")
    assert t2.link(0, 1) == "SYS" and t2.gpus[1].cpu_affinity == "8-15"


def test_islands_warning_and_snapshot_record():
    t = read_file(str(NVL))
    w = islands_warning((0, 1, 4, 5), topo=t)
    assert w == ("GPUs 0-1,4-5 span 2 NVLink islands ([0,1], [4,5]): collectives run at the speed of "
                 "the SYS link between them")
    assert islands_warning((0, 1, 2, 3), topo=t) is None
    assert islands_warning((0, 1), topo=read_file(str(SXM))) is None
    assert islands_warning((0, 4), topo=read_file(str(PCIE))) is None  # no NVLink anywhere
    assert islands_warning((0, 99), topo=t) is None  # never raises
    rec = snapshot_record("r1", "p2p-off", topo=t)
    assert rec["kind"] == "topology" and rec["run_id"] == "r1" and rec["fabric"] == "p2p-off"
    assert rec["islands"] == [[0, 1, 2, 3], [4, 5, 6, 7]] and rec["uniform"] is False
    assert Topology.from_dict(rec).links == t.links


def test_cuda_visible_devices_maps_ordinals(monkeypatch):
    t = Topology(gpus=tuple(Gpu(index=i, uuid=f"GPU-{i}aaa") for i in range(4)),
                 links=tuple(tuple("X" if i == j else "NV4" for j in range(4)) for i in range(4)))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert cuda_to_nvml((0, 1), t) == (2, 3)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-3,GPU-1")
    assert cuda_to_nvml((0, 1), t) == (3, 1)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert cuda_to_nvml((0, 1), t) == (0, 1)


def _fake_pynvml(n_gpus: int, links: dict[int, list[str]]):
    """A stand-in for pynvml: GPU i's NVLink l goes to links[i][l] (a bus id: a GPU's, or a switch's)."""
    m = types.SimpleNamespace(NVML_FEATURE_ENABLED=1, NVML_TOPOLOGY_SYSTEM=50, NVML_TOPOLOGY_NODE=40)

    class Err(Exception):
        pass

    bus = [f"00000000:{0x18 + 0x10 * i:02X}:00.0" for i in range(n_gpus)]
    m.nvmlDeviceGetCount = lambda: n_gpus
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=bus[h].encode())
    m.nvmlDeviceGetName = lambda h: "NVIDIA H200"
    m.nvmlDeviceGetUUID = lambda h: f"GPU-{h:08d}"
    m.nvmlDeviceGetCurrPcieLinkGeneration = lambda h: 5
    m.nvmlDeviceGetCurrPcieLinkWidth = lambda h: 16
    m.nvmlDeviceGetMaxPcieLinkGeneration = lambda h: 5
    m.nvmlDeviceGetMaxPcieLinkWidth = lambda h: 16
    m.nvmlDeviceGetNumaNodeId = lambda h: h // 2
    m.nvmlDeviceGetCpuAffinity = lambda h, n: [0xFF << (8 * (h // 2))]

    def state(h, link):
        if link >= len(links[h]):
            raise Err("invalid argument")
        return 1

    m.nvmlDeviceGetNvLinkState = state
    m.nvmlDeviceGetNvLinkRemotePciInfo = lambda h, l: types.SimpleNamespace(busId=links[h][l].encode())
    m.nvmlDeviceGetTopologyCommonAncestor = lambda a, b: 40 if a % 2 == b % 2 else 50
    return m, bus


def test_nvml_reader_counts_direct_and_switch_links():
    from fabricbench.topology.nvml import _read

    # 4 GPUs: 0-1 bridged by 4 NVLinks, 2-3 by 2; nothing between the pairs.
    bus = [f"00000000:{0x18 + 0x10 * i:02X}:00.0" for i in range(4)]
    links = {0: [bus[1]] * 4, 1: [bus[0]] * 4, 2: [bus[3]] * 2, 3: [bus[2]] * 2}
    m, bus = _fake_pynvml(4, links)
    t = _read(m)
    assert t.links[0] == ("X", "NV4", "NODE", "SYS") and t.link(2, 3) == "NV2"
    assert t.islands() == [[0, 1], [2, 3]]
    g = t.gpus[2]
    assert (g.name, g.uuid, g.bus_id, g.pcie_gen, g.pcie_width, g.numa_node, g.cpu_affinity) == \
        ("NVIDIA H200", "GPU-00000002", "00000000:38:00.0", 5, 16, 1, "8-15")
    # 3 GPUs, 18 links each to NVSwitches (bus ids no GPU has): NV18 between every pair.
    switch = {i: [f"00000000:{0xA0 + l // 5:02X}:00.0" for l in range(18)] for i in range(3)}
    m, _ = _fake_pynvml(3, switch)
    t = _read(m)
    assert all(t.link(a, b) == "NV18" for a, b in t.pairs()) and t.uniform


def test_topo_cli_json(capsys):
    code, out, err = run_cli(["topo", "--topo-file", NVL, "--json", "--gpus", "0-5"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert [g["index"] for g in doc["gpus"]] == [0, 1, 2, 3, 4, 5]
    assert doc["links"][0] == ["X", "NV6", "NV6", "NV6", "SYS", "SYS"]
    assert doc["islands"] == [[0, 1, 2, 3], [4, 5]]
    assert doc["uniform"] is False
    assert [a["k"] for a in doc["advice"]] == [2, 3, 4, 5, 6]
    assert doc["advice"][2]["sets"] == [[0, 1, 2, 3]]


def test_topo_cli_terminal_and_out(tmp_path, capsys):
    from fabricbench.results import read_results

    out = tmp_path / "t.jsonl"
    code, said, err = run_cli(["topo", "--topo-file", SXM, "--out", out], capsys)
    assert code == 0, err
    assert "NV18" in said and "1 NVLink island(s) ([0-7])" in said
    recs = list(read_results(out))
    assert len(recs) == 1 and recs[0]["kind"] == "topology" and recs[0]["islands"] == [list(range(8))]
    assert recs[0]["advice"][0]["k"] == 2


@pytest.mark.parametrize("args,msg", [
    (["--topo-file", "/nonexistent/topo.txt"], "Error: --topo-file /nonexistent/topo.txt: no such file"),
    (["--topo-file", __file__], "not an `nvidia-smi topo -m` output"),
    (["--topo-file", str(NVL), "--gpus", "0,9"], "names GPU 9"),
])
def test_topo_cli_errors_are_one_line(args, msg, capsys):
    assert msg in refused(["topo", *args], capsys)


def test_real_one_gpu_h200_output():
    """Saved verbatim from the one-H200 machine: escape codes, the empty column, no NICs."""
    t = read_file(str(DATA / "h200_1gpu_real.txt"))
    assert t.indices == (0,) and t.links == (("X",),) and t.nics == ()
    assert t.gpus[0].cpu_affinity == "0-15" and t.gpus[0].numa_node == 0
    assert t.islands() == [[0]] and t.uniform is True


# ---------------------------------------------------------------- large domains in polynomial time

def _synthetic(n, link):
    links = tuple(tuple("X" if i == j else link(min(i, j), max(i, j)) for j in range(n)) for i in range(n))
    return Topology(gpus=tuple(Gpu(index=i) for i in range(n)), links=links)


def test_nvl72_in_trays_and_576_answer_right():
    # how fast (~0.3 s; minutes before, with an exponential search): benchmarks/topology/scaling.py
    trays = _synthetic(72, lambda i, j: "NV18" if i // 4 == j // 4 else "SYS")
    assert trays.islands() == [list(range(i, i + 4)) for i in range(0, 72, 4)]
    adv = {a["k"]: a for a in trays.advice()}
    assert adv[4]["inside_island"] and len(adv[4]["sets"]) == 18
    assert not adv[5]["inside_island"] and adv[5]["sets"] == [[0, 1, 2, 3, 4]] and "held to SYS" in adv[5]["text"]
    assert adv[8]["sets"] == [list(range(8))]  # two whole trays, not four halves
    big = _synthetic(576, lambda i, j: "NV18")
    assert big.islands() == [list(range(576))] and big.uniform and big.best_set(300) == list(range(300))
    assert {a["k"]: a for a in big.advice()}[576]["text"] == "any 576 GPUs: every pair is NV18"


def test_irregular_graph_islands_are_maximal_cliques_covering_every_gpu():
    import random

    rng = random.Random(45)
    table = {(i, j): "NV2" if rng.random() < 0.5 else "SYS" for i in range(45) for j in range(i + 1, 45)}
    t = _synthetic(45, lambda i, j: table[(i, j)])
    islands = t.islands()
    assert {g for isl in islands for g in isl} == set(range(45))
    for isl in islands:
        assert all(t.nvlinks(a, b) for a in isl for b in isl if a != b)  # a clique
        assert not any(all(t.nvlinks(g, a) for a in isl) for g in range(45) if g not in isl)  # maximal
    best = t.best_set(4)
    assert t.worst_link(best) == "NV2"  # four GPUs pairwise NVLinked exist, and are found
    assert [a["k"] for a in t.advice()] == list(range(2, 46))
