"""Statistics over per-iteration times and the slowest-rank rule."""

import statistics

import pytest

from fabricbench.statistics.figures import combine_slowest, percentile, summarize


def test_summary_values():
    times = [5.0, 1.0, 3.0, 2.0, 4.0]
    s = summarize(times)
    assert (s.n, s.median, s.min, s.max, s.mean) == (5, 3.0, 1.0, 5.0, 3.0)
    assert s.p95 == pytest.approx(4.8)
    assert s.cv == pytest.approx(statistics.pstdev(times) / 3.0)
    assert s.ci95_rel is None  # too few samples for a CI


def test_percentile_matches_numpy_linear():
    import numpy as np

    vals = sorted([0.3, 9.1, 2.2, 7.7, 1.0, 4.4, 6.6])
    for q in (0, 10, 50, 95, 100):
        assert percentile(vals, q) == pytest.approx(float(np.percentile(vals, q)))


def test_median_ci_shrinks_with_samples():
    import random

    rng = random.Random(1)
    small = summarize([10 + rng.gauss(0, 1) for _ in range(20)]).ci95_rel
    large = summarize([10 + rng.gauss(0, 1) for _ in range(2000)]).ci95_rel
    assert small is not None and large is not None and large < small / 4


def test_combine_takes_slowest_rank_per_iteration():
    assert combine_slowest([[1.0, 5.0, 2.0], [3.0, 1.0, 2.5]]) == [3.0, 5.0, 2.5]
    with pytest.raises(AssertionError):
        combine_slowest([[1.0], [1.0, 2.0]])
