"""`fabricbench advise` on saved topologies: placement by busbw, memory verdicts, strategy choice, the CLI.

Mistral-7B (7.24e9 parameters) on 4 GPUs, framework recipe: DDP keeps 16 bytes per parameter on every GPU
(~108 GiB of model states) and cannot fit 80 GB; sharded over 4 the others do.
"""

from __future__ import annotations

import json

import pytest

import fabricbench
from fabricbench import AdviseConfig
from fabricbench.advising.api import parse_memory
from fabricbench.topology.ranking import nominal_busbw
from fabricbench.errors import UsageError
from fabricbench.topology.smi import read_file
from clirun import refused, run_cli
import roots

DATA = roots.DATA / "topo"
NVL = str(DATA / "h200_nvl_two_quads.txt")
SXM = str(DATA / "h200_sxm_nvswitch.txt")
PCIE = str(DATA / "l40s_pcie.txt")
QUADS = ({0, 1, 2, 3}, {4, 5, 6, 7})
HEAD = {"schema": "fabricbench/1"}  # records handed to advise are checked as a results file's lines are


@pytest.fixture(scope="module")
def nvl80():
    return fabricbench.advise(AdviseConfig(model="mistral-7b", num_gpus=4, topo_file=NVL, gpu_memory="80GB"))


def test_nvl_picks_a_set_inside_one_quad(nvl80):
    assert set(nvl80.placement) in QUADS
    best, nxt = nvl80.placements[0], nvl80.placements[1]
    assert best.label == "intra-island" and best.slowest_link == "NV6" and best.nvlinks_per_gpu == 18
    assert [set(e) for e in best.equivalent] == [s for s in QUADS if s != set(nvl80.placement)]
    assert nxt.label == "cross-island" and nxt.slowest_link == "SYS"
    assert best.busbw_gbps / nxt.busbw_gbps == pytest.approx(360 / 36)
    assert "link types" in best.source and "link types" in nvl80.placement_source
    assert "10.0× the busbw" in nvl80.reasons[1]


def test_ddp_ruled_out_on_80gb(nvl80):
    by = {s.strategy: s for s in nvl80.strategies}
    ddp = by["ddp"]
    assert ddp.memory.verdict == "does not fit" and ddp.rank is None and ddp.memory.headroom_bytes < 0
    assert ddp.memory.need_bytes > 80e9
    assert all(by[s].memory.verdict == "fits" for s in ("zero1", "zero2", "zero3", "fsdp"))
    assert nvl80.strategy != "ddp" and nvl80.strategy in ("zero1", "zero2")  # least traffic among those that fit
    assert nvl80.runner_up["strategy"] != nvl80.strategy and nvl80.runner_up["placement"] == nvl80.placement
    # FSDP/ZeRO-3 send 3(n-1)/n·Ψ·b against 2(n-1)/n·Ψ·b: 1.5× the comm time on the same set
    assert by["fsdp"].time.comm_time_s == pytest.approx(1.5 * by["zero1"].time.comm_time_s)
    assert any(r.startswith("ddp ruled out") for r in nvl80.reasons)


@pytest.mark.parametrize("topo, label", [(SXM, "uniform"), (PCIE, "cross-island")])
def test_ddp_ruled_out_everywhere_at_80gb(topo, label):
    a = fabricbench.advise(AdviseConfig(model="mistral-7b", num_gpus=4, topo_file=topo, gpu_memory="80GB"))
    assert {s.strategy: s.memory.verdict for s in a.strategies}["ddp"] == "does not fit"
    assert a.strategy in ("zero1", "zero2") and a.placements[0].label == label


def test_ddp_chosen_where_it_fits():
    # 141 GB (H200): DDP's ~108 GiB of states plus activations leave more than the 10% reserve; its
    # textbook traffic equals ZeRO-1/2's, and among even strategies the simplest wins
    a = fabricbench.advise(AdviseConfig(model="mistral-7b", num_gpus=4, topo_file=SXM, gpu_memory="141GB"))
    assert a.strategy == "ddp" and a.runner_up["strategy"] == "zero1"


def test_pcie_ranks_by_the_slowest_hop():
    a = fabricbench.advise(AdviseConfig(model="dinov2-base", num_gpus=2, topo_file=PCIE, gpu_memory="48GB"))
    best = a.placements[0]
    assert best.slowest_link == "PIX" and set(best.gpus) in ({0, 1}, {2, 3}, {4, 5}, {6, 7})
    assert a.placements[-1].slowest_link == "SYS"
    t = read_file(PCIE)
    assert nominal_busbw(t, (0, 1)) > nominal_busbw(t, (0, 2)) > nominal_busbw(t, (0, 4))


def test_measured_busbw_beats_link_types():
    recs = [{**HEAD, "kind": "collective", "op": "all_reduce", "status": "ok", "fabric": "default", "nranks": 4,
             "bytes": 1 << 30, "busbw_gbps": 300.0, "gpus": [0, 1, 2, 3]},
            {**HEAD, "kind": "collective", "op": "all_reduce", "status": "ok", "fabric": "default", "nranks": 4,
             "bytes": 1 << 30, "busbw_gbps": 20.0, "gpus": [0, 1, 4, 5]},
            {**HEAD, "kind": "collective", "op": "all_reduce", "status": "ok", "fabric": "p2p-off", "nranks": 4,
             "bytes": 1 << 30, "busbw_gbps": 5.0, "gpus": [0, 1, 2, 3]}]
    a = fabricbench.advise(AdviseConfig(model="mistral-7b", num_gpus=4, topo_file=NVL, gpu_memory="80GB", results=recs))
    best = a.placements[0]
    assert best.gpus == [0, 1, 2, 3] and best.busbw_gbps == 300.0 and best.source == "measured"
    assert a.placements[1].busbw_gbps == 20.0  # [0,1,4,5] measured; sets of its shape take its figure
    assert "15.0× the busbw" in a.reasons[1]
    four = next(p for p in a.placements if p.gpus == [4, 5, 6, 7] or [4, 5, 6, 7] in p.equivalent)
    assert four.busbw_gbps == 300.0


def test_relate_calibration_gives_step_times():
    recs = [{**HEAD, "kind": "relate", "rows": [
        {"strategy": s, "fabric": "default", "reference": "default", "compute_s": 0.2, "exposed_fraction": 0.5}
        for s in ("zero1", "zero2", "zero3", "fsdp")]}]
    a = fabricbench.advise(AdviseConfig(model="mistral-7b", num_gpus=4, topo_file=NVL, gpu_memory="80GB", results=recs))
    for s in a.strategies:
        if s.strategy != "ddp":
            assert s.time.step_time_s == pytest.approx(0.2 + 0.5 * s.time.comm_time_s)
            assert s.time.time_source == "relate model"
    assert a.time_source == "relate model"


def test_trace_volume_replaces_the_textbook():
    comm = {"world_size": 2, "collectives": [{"op": "all_reduce", "bytes": 4 << 20, "dtype": "float32",
                                              "group_size": 2, "calls_per_step": 3.0}]}
    recs = [{**HEAD, "kind": "train", "model": "mistral-7b", "strategy": "ddp", "status": "ok", "comm": comm}]
    a = fabricbench.advise(AdviseConfig(model="mistral-7b", num_gpus=4, topo_file=NVL, gpu_memory="141GB", results=recs))
    ddp = next(s for s in a.strategies if s.strategy == "ddp")
    assert ddp.time.volume_source == "trace (2 ranks)" and ddp.time.comm_bytes_per_step == 12 << 20
    assert ddp.time.wire_bytes_per_rank == pytest.approx((12 << 20) * 2 * 3 / 4)  # all-reduce 2(n-1)/n, n = 4


def test_memory_parse_and_unknown_memory():
    assert parse_memory("80GB") == 80 * 10**9 and parse_memory("80GiB") == parse_memory("80G") == 80 * 2**30 and parse_memory(123) == 123
    with pytest.raises(UsageError, match="--gpu-memory"):
        parse_memory("eighty")
    a = fabricbench.advise(AdviseConfig(model="mistral-7b", num_gpus=4, topo_file=NVL))
    assert a.gpu_memory_bytes is None and all(s.memory.verdict == "unknown" for s in a.strategies)
    assert any("--gpu-memory" in n for n in a.notes)


def test_topology_json_is_accepted(tmp_path, capsys):
    code, out, err = run_cli(["topo", "--topo-file", NVL, "--json"], capsys)
    assert code == 0, err
    p = tmp_path / "topo.json"
    p.write_text(out)
    a = fabricbench.advise(AdviseConfig(model="mistral-7b", num_gpus=4, topo_file=str(p), gpu_memory="80GB"))
    assert set(a.placement) in QUADS


def test_cli_json_has_the_agreed_keys(capsys):
    code, out, err = run_cli(["advise", "--model", "mistral-7b", "--num-gpus", "4", "--topo-file", NVL, "--gpu-memory",
                              "80G", "--json"], capsys)
    assert code == 0, err
    d = json.loads(out)
    assert {"placement", "strategy", "reasons", "runner_up", "placements", "strategies"} <= set(d)
    assert set(d["placement"]) in QUADS and d["strategy"] != "ddp" and d["runner_up"]["strategy"]
    assert d["placements"][0]["busbw_gbps"] > d["placements"][1]["busbw_gbps"]
    assert [s["strategy"] for s in d["strategies"]] == ["ddp", "zero1", "zero2", "zero3", "fsdp"]


def test_cli_text_and_bad_input(capsys):
    code, out, _ = run_cli(["advise", "--model", "mistral-7b", "--num-gpus", "4", "--topo-file", NVL, "--gpu-memory",
                            "80G"], capsys)
    assert code == 0 and "Recommended:" in out and "does not fit" in out
    for args, msg in ((["--num-gpus", "9"], "--num-gpus 9"), (["--topo-file", "/nonexistent"], "no such file"),
                      (["--gpus", "0,12"], "GPU 12")):
        base = ["--model", "mistral-7b", "--topo-file", NVL]
        if "--topo-file" in args:
            base = ["--model", "mistral-7b", "--num-gpus", "4"]
        assert msg in refused(["advise", *base, *args], capsys), args


def test_advise_surface_is_frozen():
    from fabricbench.cli.advise import advise

    assert sorted(o for p in advise.params for o in p.opts) == sorted([
        "--model", "--model-config", "--num-gpus", "--gpus", "--topo", "--topo-file", "--results", "--gpu-memory",
        "--batch-size", "--seq-len", "--image-size", "--strategies", "--strategy", "--json"])


def test_a_damaged_record_is_left_out_not_a_traceback():
    # records handed to advise are checked as a file's lines are: a busbw that is a string was a
    # ValueError (float("fast")) in the placement ranking
    good = {**HEAD, "kind": "collective", "op": "all_reduce", "status": "ok", "fabric": "default", "nranks": 4,
            "bytes": 1 << 30, "busbw_gbps": 300.0, "gpus": [0, 1, 4, 5]}
    bad = {**good, "busbw_gbps": "fast", "gpus": [0, 1, 2, 3]}
    a = fabricbench.advise(AdviseConfig(model="mistral-7b", num_gpus=4, topo_file=NVL, gpu_memory="80GB", results=[good, bad]))
    assert [(p.busbw_gbps, p.source) for p in a.placements] == [
        (360.0, "link types (nominal)"), (300.0, "measured on [0,1,4,5] (same links)")]
    assert len(a.warnings) == 1 and a.warnings[0].startswith("results item 2: ") and "busbw_gbps" in \
        a.warnings[0] and a.to_dict()["warnings"] == a.warnings


def test_lines_left_out_of_results_are_said(tmp_path, capsys):
    """A damaged line of a --results file is left out with one warning line on stderr, never in silence
    (advise read the file's warnings and dropped them)."""
    good = {**HEAD, "kind": "collective", "op": "all_reduce", "status": "ok", "fabric": "default", "nranks": 4,
            "bytes": 1 << 30, "busbw_gbps": 300.0, "gpus": [0, 1, 4, 5]}
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps(good) + "\n" + "{not json\n")
    code, _, err = run_cli(["advise", "--model", "mistral-7b", "--num-gpus", "4", "--topo-file", NVL, "--gpu-memory",
                            "80GB", "--results", f], capsys)
    assert code == 0, err
    warned = [ln for ln in err.splitlines() if ln.startswith("warning: ")]
    assert len(warned) == 1 and "line 2" in warned[0], err


def test_two_measured_candidates_are_judged_by_their_paired_comparison():
    """Advise's candidates in the verdict vocabulary: a measured lead that is a finding orders
    them and says so; one that is not keeps the dial order and says "undecided"."""
    from fabricbench.advising.api import StrategyAdvice, _choose
    from fabricbench.advising.memory import MemoryFit
    from fabricbench.advising.strategy import StrategyTime
    from fabricbench.results.schema import TrainResult

    def runs(strategy, steps):
        return tuple(TrainResult.from_record({
            "kind": "train", "strategy": strategy, "fabric": "default", "status": "ok", "global_batch": 8,
            "step_time": {"median_s": s}, "repeat": r}) for r, s in enumerate(steps, 1))

    def cand(strategy, steps):
        mem = MemoryFit(strategy=strategy, need_bytes=1, states_bytes=1, activation_bytes=0, capacity_bytes=10,
                        headroom_bytes=9, verdict="fits", source="estimate")
        t = StrategyTime(strategy=strategy, gpus=[0], comm_bytes_per_step=0, wire_bytes_per_rank=0.0,
                         comm_time_s=0.0, step_time_s=sorted(steps)[1], volume_source="-", time_source="measured",
                         runs=runs(strategy, steps))
        return StrategyAdvice(strategy=strategy, memory=mem, time=t)

    # fsdp 3% faster in every round: fsdp first, and the note is the comparison's sentence
    ranked = _choose([cand("ddp", [0.103, 0.1133, 0.0979]), cand("fsdp", [0.100, 0.1101, 0.0951])])
    assert [a.strategy for a in ranked] == ["fsdp", "ddp"]
    assert ranked[1].note.startswith("on default: fsdp is 3.0% faster than ddp [")
    # noisy rounds: undecided, so the dial order (ddp first) and the sentence says undecided
    ranked = _choose([cand("ddp", [0.103, 0.090, 0.115]), cand("fsdp", [0.100, 0.112, 0.094])])
    assert [a.strategy for a in ranked] == ["ddp", "fsdp"]
    assert "undecided" in ranked[1].note and "dial order" in ranked[1].note
