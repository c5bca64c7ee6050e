"""relate's link credit: a token-bucket link (shaped:RATE, tc tbf) banks up to its burst while idle, and a
collective after compute spends it; the sweep's back-to-back calls never see it (credit.py's docstring).

Unit tests only: records built by hand, every expected figure computed here from B, R and the gaps.
"""

from __future__ import annotations

import pytest

import fabricbench
from fabricbench.fabrics.shaped import BURST_BYTES
from fabricbench.relating.credit import Gaps, bucket_s
from tests.unit.test_relate import MiB, call_us, coll, sweep, train_rec

MS = 1e-3


def test_bucket_is_burst_over_rate_on_shaped_fabrics_only():
    assert BURST_BYTES == 256 * 1024
    assert bucket_s("shaped:1gbit") == pytest.approx(256 * 1024 * 8 / 1e9)  # 2.10 ms
    assert bucket_s("shaped:200mbit") == pytest.approx(256 * 1024 * 8 / 200e6)  # 10.5 ms
    assert bucket_s("default") is None and bucket_s("p2p-off") is None
    assert bucket_s("no-such-fabric") is None  # a name from imported records: no bucket known


def test_credit_per_gap_is_the_bucket_the_gap_or_the_stretch_whichever_is_least():
    g = Gaps(gaps_s=(20 * MS, 1 * MS, 5 * MS), steps=1)
    b200, b1g = bucket_s("shaped:200mbit"), bucket_s("shaped:1gbit")
    # 200 mbit: the 20 ms gap refills the whole bucket (10.5 ms), the others only what they last
    assert g.credit(bucket_s=b200, comm_s=1.0) == pytest.approx(b200 + 1 * MS + 5 * MS)
    # 1 gbit: 2.1 ms fills in 2.1 ms, so every gap but the 1 ms one banks a full bucket
    assert g.credit(bucket_s=b1g, comm_s=1.0) == pytest.approx(2 * b1g + 1 * MS)
    # a stretch cannot save more than it costs: 3 stretches of 6 ms / 3 = 2 ms each
    assert g.credit(bucket_s=b200, comm_s=6 * MS) == pytest.approx(2 * MS + 1 * MS + 2 * MS)
    assert g.credit(bucket_s=None, comm_s=1.0) == 0.0  # no bucket: no credit


def test_gaps_shrink_by_the_profilers_overhead_and_average_over_rank_steps():
    g = Gaps.from_timeline({"idle_gaps_s": [8 * MS, 8 * MS, 4 * MS, 4 * MS], "idle_gap_steps": 2}, 2.0)
    assert g.overhead == 2.0 and g.stretches_per_step == 2
    b = 10 * MS
    assert g.credit(bucket_s=b, comm_s=1.0) == pytest.approx((4 + 4 + 2 + 2) * MS / 2)
    assert g.credit(bucket_s=b, comm_s=1.0, scaled=False) == pytest.approx((8 + 8 + 4 + 4) * MS / 2)
    assert Gaps.from_timeline({"comm_s": 0.1}, 1.0) is None  # recorded before traces had gaps
    assert Gaps.from_timeline(None, None) is None


# An FSDP-like trace: 8 collectives of 1 MiB per step, each after 10 ms of compute.
TRACE = [coll("all_gather", MiB, 4.0), coll("reduce_scatter", MiB, 4.0)]
GAPS = [10 * MS] * 8


def _sweep_rate(fabric, rate_bps):
    """A made-up shaped fabric: each call moves S at R / 16 bytes/s (R / 8 bytes/s, shared by two directions)."""
    return sweep(fabric, rate_bps / 8 / 1e9 / 2, ops=("all_gather", "reduce_scatter"))


def _t_comm(gbps):
    return sum(c["calls_per_step"] * call_us(c["bytes"], gbps=gbps) * 1e-6 for c in TRACE)


def _records(*, gaps=True, overhead=1.0):
    ref_step = 0.1 + _t_comm(1.0)
    rec = train_rec("fsdp", "default", ref_step, TRACE, exposed=1.0)
    if gaps:
        rec["comm"]["timeline"].update(idle_gaps_s=GAPS, idle_gap_steps=1)
    rec["comm"]["overhead"] = {"ratio": overhead}
    return (sweep("default", 1.0, ops=("all_gather", "reduce_scatter")) + _sweep_rate("shaped:1gbit", 1e9)
            + _sweep_rate("shaped:100mbit", 100e6) + [rec]), ref_step


def test_relate_takes_the_credit_off_a_shaped_fabrics_communication():
    recs, ref_step = _records()
    rows = {r.fabric: r for r in fabricbench.relate(fabricbench.RelateConfig(inputs=recs, reference="default")).rows}
    swept_ref = _t_comm(1.0)
    for fab, rate in (("shaped:1gbit", 1e9), ("shaped:100mbit", 100e6)):
        swept = _t_comm(rate / 8 / 1e9 / 2)
        credit = 8 * min(BURST_BYTES * 8 / rate, 10 * MS, swept / 8)
        r = rows[fab]
        assert r.link_credit_s == pytest.approx(credit)
        assert r.comm_time_s == pytest.approx(swept - credit)
        # e = 1: every second of communication exposed; the reference (default) has no bucket
        assert r.predicted_step_s == pytest.approx(ref_step - swept_ref + swept - credit)
        lo, hi = r.predicted_step_ci95
        assert lo <= r.predicted_step_s <= hi
    assert rows["default"].link_credit_s == 0.0
    # the mechanism of the bias: the credit is a larger share of the communication at the mild fabric
    # (a whole bucket per gap) than at the strong one (the gap caps it)
    share = {f: rows[f].link_credit_s / (rows[f].comm_time_s + rows[f].link_credit_s) for f in rows if f != "default"}
    assert share["shaped:1gbit"] > 2 * share["shaped:100mbit"]


def test_a_trace_without_gaps_gets_no_credit_and_says_so():
    recs, ref_step = _records(gaps=False)
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=recs, reference="default"))
    slow = next(r for r in res.rows if r.fabric == "shaped:1gbit")
    assert slow.link_credit_s == 0.0
    assert slow.predicted_step_s == pytest.approx(ref_step - _t_comm(1.0) + _t_comm(1e9 / 8 / 1e9 / 2))
    assert any("has no idle gaps" in p and "shaped:1gbit" in p for p in res.problems)


def test_the_interval_spans_the_gaps_as_profiled_and_as_timed():
    recs, _ = _records(overhead=4.0)  # gaps of 2.5 ms timed: the 100 mbit bucket (21 ms) is not refilled
    r = next(r for r in fabricbench.relate(fabricbench.RelateConfig(inputs=recs, reference="default")).rows
             if r.fabric == "shaped:100mbit")
    assert r.link_credit_s == pytest.approx(8 * 2.5 * MS)
    lo, hi = r.predicted_step_ci95
    # as profiled (10 ms gaps) the credit is 4x larger: the interval's low end reaches that prediction
    assert lo <= r.predicted_step_s - 3 * 8 * 2.5 * MS + 1e-12 and hi >= r.predicted_step_s


def test_the_intervals_slow_side_prices_the_fabric_without_its_credit():
    """C(f) is what the bucket can save at most (ranks that enter a collective early spend it before the
    last one comes): the predicted step's 95% interval reaches the prediction with no credit at all."""
    recs, ref_step = _records()
    rows = {r.fabric: r for r in fabricbench.relate(fabricbench.RelateConfig(inputs=recs, reference="default")).rows}
    for fab in ("shaped:1gbit", "shaped:100mbit"):
        r = rows[fab]
        assert r.link_credit_s > 0
        lo, hi = r.predicted_step_ci95
        without = r.predicted_step_s + r.link_credit_s  # e = 1: the step pays the credit back whole
        assert hi >= without - 1e-12
        assert lo <= r.predicted_step_s < without
    d = rows["default"].predicted_step_ci95  # no bucket on the reference: its interval is its own run's
    assert d[0] <= ref_step <= d[1]


def test_calls_smaller_than_the_bucket_do_not_drain_it_so_their_gaps_add_no_credit():
    # DDP-like: a 128 B broadcast, then two all-reduces of 2 MiB; three busy stretches, each after 30 ms
    g = Gaps(gaps_s=(30 * MS, 30 * MS, 30 * MS), steps=1)
    b = bucket_s("shaped:1gbit")
    assert g.credit(bucket_s=b, comm_s=1.0) == pytest.approx(3 * b)
    assert g.credit(bucket_s=b, comm_s=1.0, draining_per_step=2.0) == pytest.approx(2 * b)
    g2 = Gaps(gaps_s=(30 * MS, 1 * MS, 30 * MS, 1 * MS), steps=2)  # the largest terms count: one per step
    assert g2.credit(bucket_s=b, comm_s=1.0, draining_per_step=1.0) == pytest.approx(b)
    trace = [coll("all_reduce", 2 * MiB, 2.0), coll("broadcast", 128, 1.0)]
    ref = train_rec("ddp", "default", 0.2, trace, exposed=1.0)
    ref["comm"]["timeline"].update(idle_gaps_s=[30 * MS] * 3, idle_gap_steps=1)
    recs = (sweep("default", 1.0, ops=("all_reduce", "broadcast"))
            + sweep("shaped:1gbit", 1e9 / 8 / 1e9 / 2, ops=("all_reduce", "broadcast"))
            + [ref])
    row = next(r for r in fabricbench.relate(fabricbench.RelateConfig(inputs=recs, reference="default")).rows
               if r.fabric == "shaped:1gbit")
    assert row.link_credit_s == pytest.approx(2 * b)  # the broadcast (50 us here) drains nothing


def _gapped(fabric, rate_bps, saved_s, *, gap_s=20 * MS, ops=("all_gather", "reduce_scatter")):
    """`sweep --gap` records of a made-up shaped fabric: each call `saved_s` faster than back to back."""
    recs = _sweep_rate(fabric, rate_bps)
    recs = [r for r in recs if r["op"] in ops and r["bytes"] >= MiB]  # the trace's size and above
    for r in recs:
        r["time_us"] -= saved_s * 1e6
        r["extra"] = {"gap_s": gap_s, "settings": {"gap_s": gap_s}}
    return recs


def test_a_gapped_sweep_sets_the_credit_a_call_realises_and_never_prices():
    """Where `sweep --gap` measured a shaped fabric, the credit is the fraction of a bucket a call after a
    gap saved there (here half of B/R at every size), times what the gaps could bank; the gapped records
    never price a call, and the interval still reaches the whole bucket's credit on its fast side."""
    recs, ref_step = _records()
    b = bucket_s("shaped:1gbit")
    full = {r.fabric: r for r in fabricbench.relate(fabricbench.RelateConfig(inputs=recs, reference="default")).rows
            }["shaped:1gbit"]
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=recs + _gapped("shaped:1gbit", 1e9, 0.5 * b),
                                                      reference="default"))
    half = {r.fabric: r for r in res.rows}["shaped:1gbit"]
    swept = _t_comm(1e9 / 8 / 1e9 / 2)
    assert full.link_credit_s == pytest.approx(8 * b)
    assert half.link_credit_s == pytest.approx(0.5 * 8 * b, rel=1e-6)
    assert half.comm_time_s == pytest.approx(swept - 0.5 * 8 * b, rel=1e-6)  # priced back to back, as before
    assert "credit measured" in half.flags and "credit measured" not in full.flags
    assert any("realised 0.50 of the token bucket" in p for p in res.problems)
    lo, hi = half.predicted_step_ci95
    assert lo <= full.predicted_step_s + 1e-12 and hi >= half.predicted_step_s + half.link_credit_s - 1e-12
    # a fabric the gapped sweep did not measure keeps the whole bucket
    other = {r.fabric: r for r in res.rows}["shaped:100mbit"]
    assert "credit measured" not in other.flags and other.link_credit_s > 0


def test_the_realised_fraction_is_clamped_and_refers_to_what_the_gap_refilled():
    from fabricbench.relating.credit import realised_fraction
    from fabricbench.relating.pricing import price
    from tests.unit.test_relate import _curves

    b = bucket_s("shaped:1gbit")
    for saved, gap, want in ((2 * b, 20 * MS, 1.0),        # more than a bucket: not the bucket's doing
                             (-b, 20 * MS, 0.0),           # slower after a gap: no credit
                             (0.25 * b, 0.5 * b, 0.5)):    # a gap shorter than B/R refilled only half
        curves = _curves(_sweep_rate("shaped:1gbit", 1e9) + _gapped("shaped:1gbit", 1e9, saved, gap_s=gap))
        p = price(TRACE, curves, fabric="shaped:1gbit", nranks=2)
        got = realised_fraction(curves.gapped, p)
        assert got is not None and got.fraction == pytest.approx(want, abs=1e-6)
        assert got.calls == pytest.approx(8.0) and len(got.per_size) == 2
        # the back-to-back curve alone prices: the gapped records are apart
        assert curves.get("shaped:1gbit", "all_gather", "float32", 2).gap_s == 0.0
    assert realised_fraction(None, p) is None


def test_a_latency_bound_call_costlier_than_the_bucket_does_not_drain_it():
    """ZeRO's 1-byte overflow flags took 0.6 ms a call on the H100 lab's shaped links, more than B/R at
    6 Gbit/s (0.35 ms), and send nothing a bucket notices: a call drains it only if it also puts B bytes on
    the link (its ranks' sends together), so the flags' gaps add no credit."""
    from tests.unit.test_relate import SIZES, sweep_rec

    b = bucket_s("shaped:1gbit")
    slow = [sweep_rec(fab, "all_reduce", s, call_us(s, gbps=g, lat_us=3000.0))  # every call >= 3 ms > B/R
            for fab, g in (("default", 1.0), ("shaped:1gbit", 1e9 / 8 / 1e9 / 2)) for s in [1, 2, 4, *SIZES]]
    trace = [coll("all_reduce", 2 * MiB, 2.0), coll("all_reduce", 1, 3.0, dtype="uint8")]
    ref = train_rec("zero2", "default", 0.2, trace, exposed=1.0)
    ref["comm"]["timeline"].update(idle_gaps_s=[30 * MS] * 5, idle_gap_steps=1)
    row = next(r for r in fabricbench.relate(fabricbench.RelateConfig(inputs=slow + [ref], reference="default")).rows
               if r.fabric == "shaped:1gbit")
    assert row.link_credit_s == pytest.approx(2 * b)  # the two 2 MiB all-reduces, not the three flags
