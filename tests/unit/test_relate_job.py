"""relate on imported job data (fabricbench/relating/job.py): collective records observed in a job (e.g.
NCCL Inspector's, imported) calibrate the traced collectives' prices by k = t_job / t_sweep on the reference.

Records by hand in test_relate's made-up world; every expected figure is computed here (e = 1).
"""

from __future__ import annotations

import pytest

import fabricbench
from fabricbench.relating.job import CALIBRATED
from tests.unit.test_relate import DDP_TRACE, MiB, call_us, sweep, sweep_rec, t_comm, train_rec

REF_STEP = 0.3


def job_rec(fabric, op, nbytes, time_us, nranks=2):
    """A job's observed call as an importer writes it: a collective record marked observed in a job."""
    return {**sweep_rec(fabric, op, nbytes, time_us, nranks=nranks), "observed": "job", "engine": "nccl-inspector"}


def _records(*extra):
    return (sweep("fast", 10.0) + sweep("slow", 1.0) + [train_rec("ddp", "fast", REF_STEP, DDP_TRACE, exposed=1.0)]
            + list(extra))


def _slow(res):
    return next(r for r in res.rows if r.fabric == "slow")


def test_a_jobs_slower_calls_scale_every_fabrics_price():
    k = 1.3  # the job's all-reduce of 4 MiB took 1.3x the sweep's on the same fabric (contention, ...)
    job = job_rec("fast", "all_reduce", 4 * MiB, k * call_us(4 * MiB, gbps=10.0))
    plain = fabricbench.relate(fabricbench.RelateConfig(inputs=_records()))
    calibrated = fabricbench.relate(fabricbench.RelateConfig(inputs=_records(job)))
    t_ref, t_slow = t_comm(DDP_TRACE, 10.0), t_comm(DDP_TRACE, 1.0)
    assert _slow(plain).predicted_step_s == pytest.approx(REF_STEP - t_ref + t_slow)
    # T_step(slow) = T_step(ref) - k T_comm(ref) + k T_comm(slow): what the job paid beyond the sweep scales too
    assert _slow(calibrated).predicted_step_s == pytest.approx(REF_STEP - k * t_ref + k * t_slow)
    assert CALIBRATED in _slow(calibrated).flags and CALIBRATED not in _slow(plain).flags
    assert any("k = job / sweep = 1.30 on 1 of 2 traced collectives (100% of" in p for p in calibrated.problems)
    # the job's record is no sweep point: the reference's curve is the sweep's alone
    assert _slow(calibrated).comm_time_ref_s == pytest.approx(k * t_ref)


def test_a_job_elsewhere_or_at_other_sizes_calibrates_nothing():
    far = job_rec("fast", "all_reduce", 256 * MiB, 1e6)  # 64x the traced size: not near it
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=_records(far)))
    plain = fabricbench.relate(fabricbench.RelateConfig(inputs=_records()))
    assert _slow(res).predicted_step_s == pytest.approx(_slow(plain).predicted_step_s)
    assert CALIBRATED not in _slow(res).flags
    other = fabricbench.relate(fabricbench.RelateConfig(inputs=_records(job_rec("slow", "all_reduce", 4 * MiB, 1e4))))
    assert CALIBRATED not in _slow(other).flags
    assert any("ran on slow, not on the reference fast: nothing to calibrate" in p for p in other.problems)
