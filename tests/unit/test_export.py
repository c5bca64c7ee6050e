"""fabricbench export: a sweep as SimAI's busbw.yaml (as SimAI's parser reads it), a train trace as JSON."""

from __future__ import annotations

import json

import pytest

from fabricbench.errors import UsageError
from fabricbench.exporting import SimaiOptions, simai, write
from roots import DATA

D = DATA / "export"
STUDY = DATA / "study" / "cpu-lab"


def _sweep(tmp_path, rows):
    p = tmp_path / "sweep.jsonl"
    p.write_text("".join(json.dumps({"schema": "fabricbench/1", "kind": "collective", "status": "ok", "op": op,
                                     "bytes": b, "busbw_gbps": bw, "nranks": 8, "fabric": f, "dtype": "float32"})
                         + "\n" for op, b, bw, f in rows))
    return p


def test_simai_parser_reads_its_published_examples():
    three = simai.parse((D / "simai_busbw_03613a7a.yaml").read_text())
    assert three["TP"] == {"allreduce": 300.0, "allgather": 280.0, "reducescatter": 280.0, "alltoall": 230.0}
    assert three["DP"]["allreduce"] is None and three["EP"]["alltoall"] == 80.0 and three["PP"] == {"busbw": 47.5}
    one = simai.parse((D / "simai_busbw_b1151087.yaml").read_text())  # format 1: the size after the comma is cut
    assert one["TP"]["allreduce"] == 200.0 and one["DP"]["reducescatter"] == 45.0


def test_sweep_to_simai_busbw(tmp_path):
    sweep = _sweep(tmp_path, [("all_reduce", 1 << 30, 410.0, "default"), ("all_reduce", 4 << 30, 471.5, "default"),
                              ("all_gather", 4 << 30, 352.25, "default"), ("all_reduce", 4 << 30, 360.0, "p2p-off")])
    out = tmp_path / "busbw.yaml"
    with pytest.raises(UsageError, match="2 fabrics"):
        write(sweep, "simai-busbw", out)
    notes = write(sweep, "simai-busbw", out, SimaiOptions(fabric="default"))
    text = out.read_text()
    assert text.splitlines()[1:3] == ["TP:", "allreduce,: 471.5"] and "PP:\nbusbw: null" in text
    got = simai.parse(text)
    assert got["TP"] == {"allreduce": 471.5, "allgather": 352.25, "reducescatter": None, "alltoall": None}
    assert all(v is None for s in ("DP", "EP") for v in got[s].values())
    assert any("all_reduce at 4G on 8 ranks" in n for n in notes)
    write(sweep, "simai-busbw", out, SimaiOptions(fabric="default", size=1 << 30, group="DP"))
    assert simai.parse(out.read_text())["DP"]["allreduce"] == 410.0
    with pytest.raises(UsageError, match="--group XP"):
        write(sweep, "simai-busbw", out, SimaiOptions(fabric="default", group="XP"))


def test_train_trace_to_comm_trace_json(tmp_path):
    out = tmp_path / "trace.json"
    write(STUDY, "comm-trace", out)
    doc = json.loads(out.read_text())
    assert doc["schema"] == "fabricbench-comm-trace/1"
    ddp = next(r for r in doc["runs"] if r["strategy"] == "ddp")
    first = ddp["steps"][0]["collectives"][0]
    assert first == {"op": "all_reduce", "bytes": 1509376, "group_size": 2, "dtype": "float32", "calls": 1.0}
    fsdp = next(r for r in doc["runs"] if r["strategy"] == "fsdp")
    assert fsdp["steps"][0]["collectives"][0]["calls"] == 4.0 and fsdp["world_size"] == 2
    with pytest.raises(UsageError, match="no train record"):
        write(_sweep(tmp_path, [("all_reduce", 1 << 30, 1.0, "default")]), "comm-trace", out)
