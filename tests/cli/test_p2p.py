"""`fabricbench p2p`: GB/s from the engine's copy times, the matrices, records and the CLI (stand-in engine)."""

from __future__ import annotations

import json

import pytest

from fabricbench.measuring.copy import gbps, matrix, measure_all
from fabricbench.results import read_results
from clirun import refused, run_cli


class FakeEngine:
    """Times chosen so the answers are exact: a peer copy of S bytes takes S/100e3 µs uni (100 GB/s)."""

    def __init__(self):
        self.calls = []

    def copy_peer(self, src, dst, nbytes, warmup, iters, bidirectional):
        self.calls.append(("peer", src, dst, bidirectional))
        base = nbytes / 100e3 * (1 + abs(src - dst))  # farther pairs slower
        t = base * (1.6 if bidirectional else 1.0)
        return {"times_us": [t * 1.5, t, t * 0.9, t, t * 1.1][:iters], "peer_access": src != dst}

    def copy_host(self, device, nbytes, warmup, iters, direction):
        self.calls.append(("host", device, direction))
        rate = {"h2d": 55e3, "d2h": 50e3, "bidir": 40e3}[direction]  # bytes per µs
        t = nbytes / rate
        return {"times_us": [t] * iters}


def test_gbps_formula():
    assert gbps(1 << 30, 1e6) == pytest.approx((1 << 30) / 1e9)
    assert gbps(256 << 20, 5000.0, directions=2) == pytest.approx(2 * (256 << 20) / 5e-3 / 1e9)


def test_measure_all_values():
    eng = FakeEngine()
    nbytes = 256 << 20
    res = measure_all((0, 1), nbytes, 2, 5, eng=eng)
    uni, bi = matrix(res, (0, 1), "uni"), matrix(res, (0, 1), "bidir")
    assert uni[0][0] == pytest.approx(100.0) and uni[0][1] == pytest.approx(50.0)  # median time used
    assert bi[0][1] == pytest.approx(2 * 50.0 / 1.6) and bi[0][0] is None
    host = {(r.src, r.dst, r.direction): r.gbps for r in res if r.copy_kind == "host"}
    assert host[("host", "GPU1", "h2d")] == pytest.approx(55.0)
    assert host[("GPU1", "host", "d2h")] == pytest.approx(50.0)
    assert host[("host", "GPU0", "bidir")] == pytest.approx(80.0)  # 2 x bytes / time
    peer = [r for r in res if r.copy_kind == "peer"]
    assert len(peer) == 2 * 2 + 2 and {r.peer_access for r in peer if r.src != r.dst} == {True}
    assert eng.calls.count(("host", 0, "h2d")) == 1 and len(res) == 6 + 6


def test_p2p_cli_records_and_plot(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("fabricbench.measuring.copy.engine", lambda: FakeEngine())
    monkeypatch.setattr("fabricbench.gpus.visible_gpu_count", lambda: 2)
    out, png = tmp_path / "p.jsonl", tmp_path / "p.png"
    code, stdout, err = run_cli(["p2p", "--gpus", "0,1", "--size", "64M", "--iters", "5", "--out", out,
                                 "--plot", png, "--json"], capsys)
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["bytes"] == 64 << 20 and doc["unidirectional_gbps"][1][0] == pytest.approx(50.0)
    assert doc["host_gbps"]["GPU0"]["h2d"] == pytest.approx(55.0)
    recs = list(read_results(out, kind="copy"))
    assert len(recs) == 12 and all(r["schema"].startswith("fabricbench/") and r["fabric"] == "default" for r in recs)
    assert len({r["run_id"] for r in recs}) == 1 and recs[0]["gpus"] == [0, 1]
    h2d = next(r for r in recs if r["direction"] == "h2d" and r["dst"] == "GPU1")
    assert h2d["gbps"] == pytest.approx(h2d["bytes"] / (h2d["time_us"] * 1e-6) / 1e9)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, table, err = run_cli(["p2p", "--gpus", "0,1", "--size", "64M", "--iters", "3"], capsys)
    assert code == 0 and "55.0" in table and "bidirectional" in table, err


def test_p2p_cli_errors(monkeypatch, capsys):
    from fabricbench.errors import EngineUnavailable

    monkeypatch.setattr("fabricbench.measuring.copy.engine", lambda: FakeEngine())
    monkeypatch.setattr("fabricbench.gpus.visible_gpu_count", lambda: 1)
    assert "1 are visible (0-0)" in refused(["p2p", "--gpus", "0,1"], capsys)  # a UsageError: exit 2
    # the option type refuses it as it is parsed
    assert "--size: size '0' is zero" in refused(["p2p", "--size", "0"], capsys)

    def missing():
        raise EngineUnavailable("fabricbench p2p needs the compiled engine")

    monkeypatch.setattr("fabricbench.measuring.copy.engine", missing)
    assert "fabricbench p2p needs the compiled engine" in refused(["p2p", "--gpus", "0"], capsys)


def test_p2p_size_that_cannot_fit_is_refused_before_copying(monkeypatch, capsys):
    """2 x S per GPU (both ways) and 2 x S of pinned host memory, checked with the arithmetic shown."""

    class Small(FakeEngine):
        def devices(self, indices):
            return [{"index": i, "free_bytes": 10 << 30} for i in indices]

    eng = Small()
    monkeypatch.setattr("fabricbench.measuring.copy.engine", lambda: eng)
    monkeypatch.setattr("fabricbench.gpus.visible_gpu_count", lambda: 2)
    code, _, err = run_cli(["p2p", "--gpus", "0,1", "--size", "8G", "--no-host"], capsys)
    assert code == 2 and eng.calls == []
    assert err.strip() == ("Error: size 8G: a copy both ways needs 2 x 8G = 16.0 GiB on "
                           "GPU0 but 10.0 GiB is free; lower size")
    code, _, err = run_cli(["p2p", "--gpus", "0,1", "--size", "1000T"], capsys)
    assert code == 2 and eng.calls == []
    assert "of host memory is available; lower size or leave host copies out" in err
