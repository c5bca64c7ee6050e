"""relate's overlap window (fabricbench/relating/window.py): how much more communication a slower fabric can
hide than the reference hid, from the reference's trace; where it applies (communication with resources of
its own), its flag, note and interval. Records built by hand in test_relate's made-up world."""

from __future__ import annotations

import pytest

import fabricbench
from fabricbench.relating import window as overlap
from tests.unit.test_relate import DDP_TRACE, sweep, train_rec

E = 0.5  # the reference hid half of its communication
FIELDS = ["step", "op", "bytes", "dtype", "group_size", "start_s", "dur_s", "dur_min_s"]


def _calls(steps=2):
    """Each profiled step: a 64 B broadcast at 0, then 4 MiB all-reduces at 10, 20 and 30 ms (the last at
    backward's end); the compute between the first and the last start is 12 of those 30 ms (timeline)."""
    rows = []
    for s in range(steps):
        rows.append([s, "broadcast", 64, "float32", 2, 0.0, 1e-4, 1e-4])
        rows += [[s, "all_reduce", 4 << 20, "float32", 2, t, 1e-3, 1e-3] for t in (0.010, 0.020, 0.030)]
    return {"fields": FIELDS, "rows": rows, "ranks": 2}


def _comm(source="cuda kernels", overhead=1.5):
    return {"timeline": {"window_s": 0.012, "exposed_fraction": E, "source": source},
            "calls": _calls(), "overhead": {"ratio": overhead}}


def test_the_window_is_the_compute_after_the_first_collective_that_carries_bytes():
    w = overlap.overlap_window(_comm())
    # 20 ms from the first all-reduce to the last start, 12/30 of it compute, over 1.5x profiling overhead;
    # the broadcast's 64 B (under 1% of the step's bytes) would have started it 10 ms earlier
    assert w.seconds == pytest.approx(0.020 * 0.4 / 1.5)
    assert (w.profiled_stretch_s, w.compute_share, w.overhead) == pytest.approx((0.020, 0.4, 1.5))
    assert "5.33 ms a timed step (20 ms of a profiled step, 40% of it compute, over 1.5x" in w.note()
    assert overlap.overlap_window(_comm(overhead=0.8)).seconds == pytest.approx(0.008)  # never dilated
    assert overlap.overlap_window({"timeline": {"window_s": 0.012}}) is None  # traces from before calls' rows
    one = {"timeline": {"window_s": 0.0}, "calls": {"fields": FIELDS, "rows": [[0, "all_reduce", 8, "float32", 2,
                                                                                  0.01, 1e-4, 1e-4]]}}
    assert overlap.overlap_window(one) is None  # one call a step: no stretch after it


def test_the_window_applies_where_communication_has_resources_of_its_own():
    assert overlap.applies(_comm("cuda kernels"), None)  # NCCL kernels: the cores never matter
    assert overlap.applies(_comm("gloo threads, cuda kernels"), 16 / 3)  # the one-GPU lab's 16 cores, 3 ranks
    assert not overlap.applies(_comm("cpu threads"), 1.0)  # the 2-core CPU lab's 2 ranks: shared cores
    assert not overlap.applies(_comm("cpu threads"), None)  # cores unknown: the reference rule


def _records(source, cpus):
    ref = train_rec("ddp", "fast", 0.3, DDP_TRACE, exposed=E)
    ref["comm"]["timeline"].update(_comm(source)["timeline"])
    ref["comm"]["calls"], ref["comm"]["overhead"] = _calls(), {"ratio": 1.5}
    ref["host_load"] = {"window_s": 1.0, "cpus": cpus, "others_cpu_s": 0.0, "others_cpus": 0.0,
                        "threshold_cpus": 0.2, "busy": False}
    ref["procs_per_node"] = 2
    return sweep("fast", 10.0) + sweep("slow", 1.0) + [ref]


def _slow(res):
    return next(r for r in res.rows if r.fabric == "slow")


@pytest.mark.parametrize("source,cpus", [("cuda kernels", 2), ("gloo threads, cuda kernels", 16)])
def test_a_slower_fabric_hides_up_to_the_window(source, cpus):
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=_records(source, cpus)))
    slow, w = _slow(res), 0.020 * 0.4 / 1.5
    t_ref, t_fab, compute = slow.comm_time_ref_s, slow.comm_time_s, slow.compute_s
    assert compute == pytest.approx(0.3 - E * t_ref)
    # the reference hid (1 - e) x T_ref = 0.7 ms; the slow fabric's calls hide up to W = 5.3 ms of 6.4 ms
    assert (1 - E) * t_ref < w < (1 - E) * t_fab
    assert slow.predicted_step_s == pytest.approx(compute + t_fab - w)
    assert "overlap window" in slow.flags
    assert any(p.startswith("ddp (lab, 2 ranks, fp32, batch 2) on the reference fast: compute after its first "
                            "collective that carries bytes, 5.33 ms a timed step") for p in res.problems)
    # W is an estimate: the interval's slow side is the reference rule's (no more hidden than it hid)
    bare = _slow(fabricbench.relate(fabricbench.RelateConfig(inputs=_records(source, cpus), overlap_window=False)))
    assert bare.predicted_step_s == pytest.approx(compute + t_fab - (1 - E) * t_ref)
    assert "overlap window" not in bare.flags
    assert slow.predicted_step_ci95[1] >= bare.predicted_step_s > slow.predicted_step_s


def test_gloo_on_shared_cores_keeps_the_reference_rule():
    # the 2-core CPU lab: a longer collective beside compute slows that compute as much as it hides
    slow = _slow(fabricbench.relate(fabricbench.RelateConfig(inputs=_records("cpu threads", 2))))
    assert "overlap window" not in slow.flags
    assert slow.predicted_step_s == pytest.approx(slow.compute_s + slow.comm_time_s - (1 - E) * slow.comm_time_ref_s)
    forced = _slow(fabricbench.relate(fabricbench.RelateConfig(inputs=_records("cpu threads", 2), overlap_window=True)))
    assert "overlap window" in forced.flags and forced.predicted_step_s < slow.predicted_step_s
