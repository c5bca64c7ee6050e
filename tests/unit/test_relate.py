"""relate: pricing a trace on a sweep, the model calibrated on the reference, rows, problems, the CLI;
and, on 2 gloo ranks under shaped fabrics, predicted against observed step times end to end.

Unit tests build sweep and train records by hand (INTERFACES C and the collective schema) from a known
world (latency + size / bandwidth per call), so every expected figure is computed here, independently.
"""

from __future__ import annotations

import json
import math

import pytest

import fabricbench
from fabricbench.errors import UsageError
from fabricbench.results import records
from fabricbench.results.schema import CollectiveResult
from fabricbench.relating.curves import ABOVE, BELOW, EXACT, FAR, INTERPOLATED, Curve, SweepCurves
from fabricbench.relating.pricing import comm_time, price
from clirun import refused, run_cli

MiB = 1 << 20
SIZES = [2**k for k in range(10, 27, 2)]  # 1K .. 64M, factor 4, as a sweep --sizes 1K-64M:x4 would


def sweep_rec(fabric, op, nbytes, time_us, *, dtype="float32", nranks=2, graph=False, status="ok", inplace=False):
    return {"schema": "fabricbench/1", "kind": "collective", "fabric": fabric, "op": op, "dtype": dtype,
            "bytes": nbytes, "nranks": nranks, "time_us": time_us, "graph": graph, "status": status,
            "inplace": inplace}


def _curves(recs):
    """The curves of collective records as relate reads them: checked and typed (results/records.py)."""
    typed, warnings = records.typed(recs, CollectiveResult)
    assert not warnings, warnings
    return SweepCurves.from_records(typed)


def call_us(nbytes, *, gbps, lat_us=50.0):
    """The made-up world: one call costs a latency plus S at `gbps` (decimal GB/s)."""
    return lat_us + nbytes / (gbps * 1e9) * 1e6


def sweep(fabric, gbps, *, ops=("all_reduce", "all_gather", "reduce_scatter"), dtype="float32", nranks=2,
          sizes=SIZES):
    return [sweep_rec(fabric, op, s, call_us(s, gbps=gbps), dtype=dtype, nranks=nranks) for op in ops for s in sizes]


def train_rec(strategy, fabric, step_s, collectives, *, exposed=None, nranks=2, precision="fp32", model="lab",
              status="ok", batch=4):
    timeline = None if exposed is None else {"comm_s": 0.1, "exposed_s": 0.1 * exposed, "compute_s": 0.2,
                                             "step_s": 0.3, "exposed_fraction": exposed, "source": "cpu threads"}
    total = int(sum(c["bytes"] * c["calls_per_step"] for c in collectives))
    return {"schema": "fabricbench/1", "kind": "train", "fabric": fabric, "strategy": strategy, "model": model,
            "nranks": nranks, "world_size": nranks, "precision": precision, "batch_size": batch // nranks,
            "global_batch": batch, "seq_len": 64, "image_size": None, "device": "cpu", "status": status,
            "message": None if status == "ok" else "boom", "step_time": {"median_s": step_s},
            "throughput": {"samples_per_s": batch / step_s},
            "comm": {"source": "profiler", "backend": "gloo", "world_size": nranks, "profiled_steps": 2,
                     "collectives": collectives, "total_bytes_per_step": total, "timeline": timeline,
                     "note": None}}


def coll(op, nbytes, calls, dtype="float32", n=2):
    return {"op": op, "bytes": nbytes, "dtype": dtype, "group_size": n, "calls_per_step": calls}


DDP_TRACE = [coll("all_reduce", 4 * MiB, 3.0), coll("broadcast", 64, 1.0)]
FSDP_TRACE = [coll("all_gather", 4 * MiB, 4.0), coll("reduce_scatter", 4 * MiB, 2.0)]


def t_comm(trace, gbps):
    """Hand pricing of a trace whose sizes are all swept: Σ calls × (latency + S / bw)."""
    return sum(c["calls_per_step"] * call_us(c["bytes"], gbps=gbps) * 1e-6 for c in trace if c["op"] != "broadcast")


# ---------------------------------------------------------------- curves


def test_curve_exact_interpolated_and_extrapolated():
    c = Curve(fabric="f", op="all_reduce", dtype="float32", nranks=2, sizes=(1024, 4096, 1 << 20),
              times_s=(1e-5, 4e-5, 1e-2))
    assert c.time_at(4096) == (4e-5, EXACT)
    t, status = c.time_at(2048)  # log-log between (1K, 10 us) and (4K, 40 us): a power law, t ∝ S
    assert status == INTERPOLATED and t == pytest.approx(2e-5, rel=1e-12)
    t, status = c.time_at(512)
    assert (t, status) == (1e-5, BELOW)  # the latency floor: never cheaper than the smallest swept call
    t, status = c.time_at(4 << 20)
    assert status == ABOVE and t == pytest.approx(4e-2)  # the largest size's algbw, t ∝ S
    t, status = c.time_at(64 * 1024)  # 16x from 4K and from 1M: no swept size near it
    assert status == FAR and t == pytest.approx(math.exp((math.log(4e-5) + math.log(1e-2)) / 2))


def test_curves_from_records_median_of_repeats_and_graph_only_as_fallback():
    recs = [sweep_rec("a", "all_reduce", 1024, 10.0), sweep_rec("a", "all_reduce", 1024, 30.0, inplace=True),
            sweep_rec("a", "all_reduce", 1024, 20.0), sweep_rec("a", "all_reduce", 1024, 1.0, graph=True),
            sweep_rec("a", "all_reduce", 4096, 99.0, status="timeout"),
            sweep_rec("a", "all_gather", 1024, 2.0, graph=True),
            sweep_rec("b", "all_reduce", 1024, 5.0, dtype="bfloat16", nranks=4),
            {"kind": "train", "fabric": "a"}]
    curves = _curves(recs)
    assert len(curves) == 3 and curves.fabrics() == ["a", "b"]
    ar = curves.get("a", "all_reduce", "float32", 2)
    assert ar.sizes == (1024,) and ar.times_s == (pytest.approx(20e-6),)  # the timeout and the graph left out
    assert curves.get("a", "all_gather", "float32", 2).times_s == (pytest.approx(2e-6),)  # graph: all there is
    assert curves.get("b", "all_reduce", "bfloat16", 4).nranks == 4


def test_comm_time_sums_calls_and_names_what_it_cannot_price():
    curves = _curves(sweep("fast", 10.0, ops=("all_reduce",)))
    t, flags = comm_time(DDP_TRACE, curves, fabric="fast")
    assert t == pytest.approx(t_comm(DDP_TRACE, 10.0))
    assert flags == ["fabric fast: no broadcast sweep (it has all_reduce): broadcast float32 on 2 ranks at 64B "
                     "(64B/step) not priced"]
    # another rank count never stands in
    t, flags = comm_time([coll("all_reduce", MiB, 1.0, n=4)], curves, fabric="fast")
    assert t == 0.0 and "nranks differ: the trace's all_reduce runs on 4 ranks, the sweep has 2" in flags[0]
    t, flags = comm_time(DDP_TRACE, curves, fabric="nowhere")
    assert t == 0.0 and flags[0].startswith("no sweep for fabric nowhere")


def test_dtype_substitution_is_priced_at_the_same_bytes_and_flagged():
    curves = _curves(sweep("fast", 10.0, ops=("all_reduce",), dtype="bfloat16"))
    p = price([coll("all_reduce", 4 * MiB, 2.0)], curves, fabric="fast")
    assert p.time_s == pytest.approx(2 * call_us(4 * MiB, gbps=10.0) * 1e-6)
    assert p.entries[0].substituted and p.entries[0].status == EXACT
    assert p.flags == ("fabric fast: all_reduce float32 on 2 ranks at 4M priced from the bfloat16 sweep at the same "
                       "bytes (no float32 sweep of all_reduce)",)


def test_the_stand_in_dtype_is_the_one_whose_sweep_reaches_the_calls_size():
    """A 1-byte uint8 flag with two stand-ins: bfloat16 swept only at 1-2 MiB, float32 from 4 B. It is priced
    off float32 at 4 B (a latency), not at bfloat16's 1 MiB time (the H100 lab's +14..+35% on ZeRO-2)."""
    curves = _curves(sweep("fast", 0.25, ops=("all_reduce",), dtype="bfloat16", sizes=[MiB, 2 * MiB])
                     + sweep("fast", 0.25, ops=("all_reduce",), sizes=[4, 64, 1024, MiB]))
    p = price([coll("all_reduce", 1, 2.0, dtype="uint8")], curves, fabric="fast")
    assert p.entries[0].curve.dtype == "float32" and p.entries[0].substituted
    assert p.time_s == pytest.approx(2 * call_us(4, gbps=0.25) * 1e-6)
    # a size inside both: the same element size decides, as before
    p = price([coll("all_reduce", MiB, 1.0, dtype="float16")], curves, fabric="fast")
    assert p.entries[0].curve.dtype == "bfloat16"


def test_sizes_outside_the_sweep_are_flagged_exactly():
    curves = _curves(sweep("fast", 10.0, ops=("all_gather",), sizes=[MiB, 4 * MiB]))
    p = price([coll("all_gather", 64 * MiB, 1.0), coll("all_gather", 80 * MiB, 1.0), coll("all_gather", 16, 1.0)],
              curves, fabric="fast")
    assert [e.status for e in p.entries] == [ABOVE, ABOVE, BELOW]
    assert p.entries[0].time_s == pytest.approx(call_us(4 * MiB, gbps=10.0) * 1e-6 * 16)
    assert ("fabric fast: the sweep has no sizes near the trace's: all_gather float32 on 2 ranks at 64M-80M lies "
            "above the largest swept size 4M (extrapolated at that size's bandwidth)") in p.flags
    assert any("at 16B lies below the smallest swept size 1M" in f for f in p.flags)


# ---------------------------------------------------------------- the model, calibrated on the reference

E = 0.4
COMPUTE = 0.150


def model_step(trace, gbps, *, ref_gbps=10.0, e=E, compute=COMPUTE):
    """The relate model written out: hidden communication min((1-e) T_comm(f), (1-e) T_comm(ref))."""
    tc, tc_ref = t_comm(trace, gbps), t_comm(trace, ref_gbps)
    return max(compute + tc - min((1 - e) * tc, (1 - e) * tc_ref), tc)


def lab(*, slow_noise=1.0, exposed=E, extra=()):
    """fast (10 GB/s), slow (0.5 GB/s) and predicted-only wire (0.2 GB/s); DDP and FSDP trained on fast and
    slow, the slow observation off the model by `slow_noise`."""
    recs = sweep("fast", 10.0) + sweep("slow", 0.5) + sweep("wire", 0.2)
    for name, trace in (("ddp", DDP_TRACE), ("fsdp", FSDP_TRACE)):
        for fab, gbps, noise in (("slow", 0.5, slow_noise), ("fast", 10.0, 1.0)):
            recs.append(train_rec(name, fab, model_step(trace, gbps) * noise, trace, exposed=exposed))
    return recs + list(extra)


def test_calibrated_on_the_reference_predicts_the_others():
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=lab(slow_noise=1.1)))
    assert res.reference == "fast"  # fastest by trace-weighted busbw, though listed first is also fast
    rows = {(r.strategy, r.fabric): r for r in res.rows}
    assert set(rows) == {(s, f) for s in ("ddp", "fsdp") for f in ("fast", "slow", "wire")}
    for s, trace in (("ddp", DDP_TRACE), ("fsdp", FSDP_TRACE)):
        ref_step = COMPUTE + E * t_comm(trace, 10.0)
        ref = rows[(s, "fast")]
        assert ref.flags[0] == "reference" and ref.predicted_step_s == pytest.approx(ref.observed_step_s)
        assert ref.residual == pytest.approx(0.0, abs=1e-12) and ref.busbw_ratio == pytest.approx(1.0)
        assert ref.compute_s == pytest.approx(COMPUTE)
        slow = rows[(s, "slow")]
        want = model_step(trace, 0.5)
        assert want == pytest.approx(ref_step + t_comm(trace, 0.5) - t_comm(trace, 10.0))  # slower: all exposed
        assert slow.predicted_step_s == pytest.approx(want)
        assert slow.observed_step_s == pytest.approx(want * 1.1)
        assert slow.residual == pytest.approx(1 / 1.1 - 1)
        assert slow.predicted_slowdown == pytest.approx(want / ref_step)
        assert slow.observed_slowdown == pytest.approx(want * 1.1 / ref_step)
        assert slow.busbw_ratio == pytest.approx(t_comm(trace, 10.0) / t_comm(trace, 0.5))
        assert slow.comm_time_s == pytest.approx(t_comm(trace, 0.5))
        assert slow.exposed_fraction == E and slow.exposed_fraction_observed == E
        assert slow.comm_bytes_per_step == sum(c["bytes"] * c["calls_per_step"] for c in trace)
        assert slow.throughput == pytest.approx(4 / (want * 1.1))
        assert slow.predicted_throughput == pytest.approx(4 / want)
    assert rows[("ddp", "fast")].dtype == "float32" and rows[("ddp", "fast")].nranks == 2


def test_predicted_only_row_for_a_fabric_with_a_sweep_and_no_training():
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=lab()))
    wire = [r for r in res.rows if r.fabric == "wire"]
    assert len(wire) == 2
    for r, trace in zip(wire, (DDP_TRACE, FSDP_TRACE)):
        assert r.predicted_only and "predicted-only" in r.flags and r.runs == 0
        assert r.observed_step_s is None and r.observed_slowdown is None and r.residual is None
        assert r.throughput is None and r.predicted_step_s == pytest.approx(model_step(trace, 0.2))
    # rows of a strategy: reference first, then by falling busbw
    assert [r.fabric for r in res.rows if r.strategy == "ddp"] == ["fast", "slow", "wire"]


def test_a_step_never_takes_less_than_its_communication():
    """A reference step shorter than its swept communication (e = 0.2 hides 80% of it): on a slower fabric
    T_step(ref) + T_comm(f) - T_comm(ref) < T_comm(f), and the floor sets the prediction."""
    tc_ref, tc_slow = t_comm(DDP_TRACE, 10.0), t_comm(DDP_TRACE, 0.5)
    recs = sweep("fast", 10.0) + sweep("slow", 0.5) + [train_rec("ddp", "fast", 0.6 * tc_ref, DDP_TRACE, exposed=0.2)]
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=recs))
    slow = next(r for r in res.rows if r.fabric == "slow")
    assert 0.6 * tc_ref + tc_slow - tc_ref < tc_slow
    assert slow.predicted_step_s == pytest.approx(tc_slow) and "communication-bound" in slow.flags
    assert slow.compute_s == pytest.approx(0.4 * tc_ref)
    assert "communication-bound" not in next(r for r in res.rows if r.fabric == "fast").flags
    assert any("more than the observed" in p and "the sweep and the training disagree" in p for p in res.problems)


def test_no_timeline_means_e_is_one_an_upper_bound():
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=lab(exposed=None)))
    slow = next(r for r in res.rows if (r.strategy, r.fabric) == ("ddp", "slow"))
    assert slow.exposed_fraction == 1.0 and "e=1 upper bound" in slow.flags
    ref_step = COMPUTE + E * t_comm(DDP_TRACE, 10.0)
    assert slow.compute_s == pytest.approx(ref_step - t_comm(DDP_TRACE, 10.0))
    assert slow.predicted_step_s == pytest.approx(ref_step + t_comm(DDP_TRACE, 0.5) - t_comm(DDP_TRACE, 10.0))
    assert any("no overlap timeline, so e = 1" in p for p in res.problems)


def test_reference_given_and_problems_stated_exactly():
    extra = [train_rec("ddp", "orphan", 1.0, DDP_TRACE, exposed=E),
             train_rec("zero3", "slow", 1.0, DDP_TRACE, exposed=E),
             train_rec("fsdp", "fast", 1.0, FSDP_TRACE, status="error")]
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=lab(extra=extra), reference="slow"))
    assert res.reference == "slow" and all(r.reference == "slow" for r in res.rows)
    fast = next(r for r in res.rows if (r.strategy, r.fabric) == ("ddp", "fast"))
    assert fast.predicted_slowdown < 1.0 and fast.busbw_ratio > 1.0
    # faster than the reference: the hidden share shrinks with the communication, T_compute + e T_comm(f)
    compute = model_step(DDP_TRACE, 0.5) - E * t_comm(DDP_TRACE, 0.5)
    assert fast.compute_s == pytest.approx(compute)
    assert fast.predicted_step_s == pytest.approx(compute + E * t_comm(DDP_TRACE, 10.0))
    assert ("no sweep for fabric orphan (train runs of ddp): its step cannot be predicted; sweep it with "
            "`fabricbench sweep --fabric orphan --out FILE`") in res.problems
    assert "train record fsdp on fabric fast: status error (boom); left out" in res.problems
    # zero3 ran only on the reference: its other fabrics are predicted-only
    z3 = [r for r in res.rows if r.strategy == "zero3"]
    assert [r.predicted_only for r in z3] == [False, True, True]
    assert any(p.startswith("fabric slow: no broadcast sweep") for p in res.problems)


def test_no_reference_run_for_a_strategy_and_mismatched_nranks():
    extra = [train_rec("zero1", "slow", 1.0, DDP_TRACE, exposed=E),
             train_rec("ddp", "fast", 0.3, [coll("all_reduce", MiB, 2.0, n=4)], exposed=E, nranks=4)]
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=lab(extra=extra)))
    assert ("zero1 (lab, 2 ranks, fp32, batch 2) has no train run on the reference fabric fast: nothing to "
            "calibrate its prediction on") in res.problems
    assert not [r for r in res.rows if r.strategy == "zero1" or r.nranks == 4]
    assert any("nranks differ: the trace's all_reduce runs on 4 ranks, the sweep has 2" in p for p in res.problems)


def test_trace_that_differs_between_fabrics_is_flagged():
    recs = lab()
    other = [coll("all_reduce", 8 * MiB, 3.0)]
    recs = [r for r in recs if not (r["kind"] == "train" and r["strategy"] == "ddp" and r["fabric"] == "slow")]
    recs.append(train_rec("ddp", "slow", 1.0, other, exposed=E))
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=recs))
    slow = next(r for r in res.rows if (r.strategy, r.fabric) == ("ddp", "slow"))
    assert "trace differs" in slow.flags
    assert slow.comm_time_s == pytest.approx(t_comm(DDP_TRACE, 0.5))  # the reference's trace is what counts


def test_repeated_runs_combine_by_median():
    extra = [train_rec("ddp", "slow", s, DDP_TRACE, exposed=E) for s in (5.0, 7.0)]
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=lab(extra=extra)))
    slow = next(r for r in res.rows if (r.strategy, r.fabric) == ("ddp", "slow"))
    assert slow.runs == 3 and "3 runs" in slow.flags
    assert slow.observed_step_s == pytest.approx(5.0)  # median of (model's step ≈ 0.25, 5, 7)


def test_bad_input_raises_usage_errors(tmp_path):
    sweeps = sweep("fast", 10.0)
    with pytest.raises(UsageError, match="no train records"):
        fabricbench.relate(fabricbench.RelateConfig(inputs=sweeps))
    with pytest.raises(UsageError, match="no sweep records"):
        fabricbench.relate(fabricbench.RelateConfig(inputs=[train_rec("ddp", "fast", 1.0, DDP_TRACE)]))
    with pytest.raises(UsageError, match=r"unknown reference fabric 'nope'; the records have fast \(sweep, train\)"):
        fabricbench.relate(fabricbench.RelateConfig(inputs=sweeps + [train_rec("ddp", "fast", 1.0, DDP_TRACE)],
                                                    reference="nope"))
    with pytest.raises(UsageError, match="reference fabric wire has no train run to calibrate on; choose one with both: fast, slow"):
        fabricbench.relate(fabricbench.RelateConfig(inputs=lab(), reference="wire"))
    with pytest.raises(UsageError, match="no fabric has both a sweep and a train run"):
        fabricbench.relate(fabricbench.RelateConfig(inputs=sweeps + [train_rec("ddp", "other", 1.0, DDP_TRACE)]))
    with pytest.raises(UsageError, match="no such file"):
        fabricbench.relate(fabricbench.RelateConfig(inputs=[str(tmp_path / "missing.jsonl")]))
    (tmp_path / "empty.jsonl").write_text("not json\n")
    with pytest.raises(UsageError, match="no fabricbench records"):
        fabricbench.relate(fabricbench.RelateConfig(inputs=[tmp_path / "empty.jsonl"]))


@pytest.mark.parametrize("entry, why", [({"bytes": MiB, "calls_per_step": 1.0}, "comm.collectives[0].op is missing"),
                                        ({"op": "all_reduce", "calls_per_step": 1.0}, "comm.collectives[0].bytes is missing"),
                                        (None, "comm.collectives[0] is null, not an object")])
def test_a_damaged_trace_entry_leaves_its_record_out(tmp_path, entry, why):
    # the trace's entries are read as objects with an op and a size: one without (a hand edit) was a
    # KeyError or TypeError in relate's pricing (and advise's volume), a traceback instead of a note
    bad = train_rec("ddp", "slow", 0.5, DDP_TRACE, exposed=E)
    bad["comm"]["collectives"] = [entry, *DDP_TRACE]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [bad, *lab()]))  # its trace first: the one priced
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=[path]))
    assert any(why in p and "line" in p for p in res.problems), res.problems
    slow = next(r for r in res.rows if (r.strategy, r.fabric) == ("ddp", "slow"))
    assert slow.runs == 1  # the damaged run is not one of them


# ---------------------------------------------------------------- CLI


@pytest.fixture()
def lab_files(tmp_path):
    recs = lab(slow_noise=1.05)
    sw, tr = tmp_path / "sweeps.jsonl", tmp_path / "train.jsonl"
    sw.write_text("".join(json.dumps(r) + "\n" for r in recs if r["kind"] == "collective"))
    tr.write_text("".join(json.dumps(r) + "\n" for r in recs if r["kind"] == "train") + '{"torn')
    return sw, tr


def test_cli_json_rows_and_problems_on_stderr(lab_files, capsys):
    code, out, err = run_cli(["relate", *lab_files, "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc) == {"reference", "formula", "rows", "coverage", "calls", "problems"} and doc["reference"] == "fast"
    assert "max(T_compute + T_comm(f) - H(f), T_comm(f))" in doc["formula"]
    need = {"strategy", "fabric", "reference", "observed_step_s", "predicted_step_s", "observed_slowdown",
            "predicted_slowdown", "busbw_ratio", "comm_bytes_per_step", "exposed_fraction", "residual",
            "predicted_only", "flags", "nranks", "dtype", "comm_time_s", "throughput"}
    assert all(need <= set(r) for r in doc["rows"]) and len(doc["rows"]) == 6
    wire = [r for r in doc["rows"] if r["fabric"] == "wire"]
    assert all(r["observed_step_s"] is None and r["predicted_only"] for r in wire)
    assert "note: fabric fast: no broadcast sweep" in err


def test_cli_table_and_plot(lab_files, tmp_path, capsys):
    png = tmp_path / "relate.png"
    code, out, err = run_cli(["relate", *lab_files, "--plot", png], capsys)
    assert code == 0, err
    assert "against reference fast" in out and "predicted-only" in out and "-5%" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


@pytest.mark.parametrize("args, message", [
    (["relate", "{tmp}/missing.jsonl"], "no such file"),
    (["relate", "{sweeps}"], "no train records"),
    (["relate", "{sweeps}", "{train}", "--reference", "nope"], "unknown reference fabric 'nope'"),
    (["relate", "{sweeps}", "{train}", "--plot", "{tmp}/no/such/dir/x.png"], "--plot"),
    (["relate", "{sweeps}", "{train}", "--plot", "{tmp}/x.svg"], "name it *.png"),
    (["relate"], "give results files"),
])
def test_cli_bad_input_is_one_error_line_and_exit_2(lab_files, tmp_path, capsys, args, message):
    sw, tr = lab_files
    argv = [a.format(tmp=tmp_path, sweeps=sw, train=tr) for a in args]
    assert message in refused(argv, capsys)


def test_lab_sweep_plan_covers_the_traced_sizes():
    from fabricbench.relating.lab import sweep_plan

    recs = [train_rec("ddp", "default", 1.0, [coll("all_reduce", 3 * MiB, 1.0), coll("broadcast", 100, 1.0)]),
            train_rec("fsdp", "default", 1.0, [coll("all_gather", 5 * MiB, 2.0, dtype="bfloat16")])]
    (bf, bf_ops, bf_sizes), (f32, f32_ops, sizes) = sweep_plan(recs, factor=4)
    assert (bf, bf_ops, bf_sizes) == ("bfloat16", ["all_gather"], [4 * MiB, 8 * MiB])
    assert f32 == "float32" and f32_ops == ["all_reduce", "broadcast"]
    assert sizes[0] == 64 and sizes[-1] == 4 * MiB and all(b == 4 * a for a, b in zip(sizes, sizes[1:]))
    assert sweep_plan([train_rec("ddp", "default", 1.0, [])]) == []
