"""Inputs whose collective results are known exactly, for `--check` in the torch engine.

Element i of rank r's input is 1 + h(seed, r, i) mod 4: small positive integers, never zero, different
on every rank and position, so that any sum over up to 64 ranks (<= 256) is exact in bfloat16, float16
and every wider type. The compiled engine computes the same kind of values on the device (csrc/).
"""

from __future__ import annotations


def input_values(seed: int, rank: int, offset: int, length: int):
    """float64 tensor of rank `rank`'s input elements [offset, offset + length)."""
    import torch

    idx = torch.arange(offset, offset + length, dtype=torch.int64)
    # A multiplicative hash (Knuth) of the index, mixed with rank and seed; kept in int64 range.
    h = (idx * 2654435761 + rank * 40503 + seed * 9973) % 4294967296
    h = (h ^ (h >> 13)) % 4
    return (h + 1).to(torch.float64)


def count_wrong(result, expected) -> int:
    """Elements of `result` that differ from `expected` (NaN counts as wrong)."""
    import torch

    got = result.detach().to("cpu", torch.float64).reshape(-1)
    exp = expected.reshape(-1)
    assert got.numel() == exp.numel(), f"result has {got.numel()} elements, expected {exp.numel()}"
    return int((~torch.isclose(got, exp, rtol=0.0, atol=0.0)).sum())
