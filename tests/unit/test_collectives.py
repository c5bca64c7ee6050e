"""The nccl-tests formulas: sizes after rounding, algbw = S/t, busbw factors per op and rank count."""

import pytest

from fabricbench.collectives import COLLECTIVES

# op -> busbw factor for n = 1, 2, 4, 8 (docs/domain.md)
FACTORS = {
    "all_reduce": [0.0, 1.0, 1.5, 1.75],
    "all_gather": [0.0, 0.5, 0.75, 0.875],
    "reduce_scatter": [0.0, 0.5, 0.75, 0.875],
    "all_to_all": [0.0, 0.5, 0.75, 0.875],
    "broadcast": [0.0, 1.0, 1.0, 1.0],
}


@pytest.mark.parametrize("op", list(FACTORS))
def test_busbw_factor(op):
    coll = COLLECTIVES.get(op)
    assert [coll.busbw_factor(n) for n in (1, 2, 4, 8)] == FACTORS[op]


@pytest.mark.parametrize("op", list(FACTORS))
def test_bandwidth_is_bytes_over_time(op):
    coll = COLLECTIVES.get(op)
    algbw, busbw = coll.bandwidth(1 << 30, 1000.0, 8)  # 1 GiB in 1 ms
    assert algbw == pytest.approx((1 << 30) / 1e-3 / 1e9)  # decimal GB/s: 1073.74
    assert busbw == pytest.approx(algbw * FACTORS[op][3])


def test_allreduce_size_is_whole_buffer():
    s = COLLECTIVES.get("all_reduce").size(1 << 20, 4, 8)
    assert (s.bytes, s.count, s.nccl_count, s.send_bytes, s.recv_bytes) == (1 << 20, 1 << 18, 1 << 18, 1 << 20, 1 << 20)
    # a size that is not a whole number of elements rounds down
    assert COLLECTIVES.get("all_reduce").size(10, 4, 2).bytes == 8


def test_allgather_rounds_per_rank_part_down():
    # 1000 B of float32 over 3 ranks: 250 elements -> 83 per rank -> S = 249 elements = 996 B
    s = COLLECTIVES.get("all_gather").size(1000, 4, 3)
    assert (s.nccl_count, s.count, s.bytes) == (83, 249, 996)
    assert (s.send_bytes, s.recv_bytes) == (83 * 4, 996)


def test_reducescatter_input_is_whole_buffer():
    s = COLLECTIVES.get("reduce_scatter").size(1 << 20, 2, 4)
    assert (s.bytes, s.nccl_count, s.send_bytes, s.recv_bytes) == (1 << 20, (1 << 19) // 4, 1 << 20, 1 << 18)


def test_too_small_gives_zero_count():
    assert COLLECTIVES.get("all_gather").size(8, 4, 8).nccl_count == 0


def test_registry_refuses_duplicates_and_names_choices():
    from fabricbench.errors import UsageError

    with pytest.raises(AssertionError):
        COLLECTIVES.register("all_reduce", COLLECTIVES.get("all_reduce"))
    with pytest.raises(UsageError, match="choose from all_reduce"):
        COLLECTIVES.get("allreduce")
