"""What a collective is to fabricbench: how big its buffers are and what its bus bandwidth is.

This is the one place where the nccl-tests formulas live (see PERFORMANCE.md of nccl-tests and
docs/domain.md):

    algbw = S / t                     (decimal GB/s: S bytes / t seconds / 1e9)
    busbw = algbw * factor(n)

S is the whole buffer: for all-reduce and broadcast the buffer each rank holds; for all-gather the
gathered output and for reduce-scatter the input, both per-rank part x n; for all-to-all the buffer each
rank sends (n parts). A requested size is rounded down so that every rank's part is a whole number of
elements, and the size actually moved is what gets reported.

Each collective is one small module in this package that builds a Collective and registers it in
fabricbench/collectives/__init__.py; nothing else switches on the op name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True, kw_only=True)
class Sizing:
    """A requested size resolved for one collective, one dtype and n ranks."""

    bytes: int  # S, the size actually moved (after rounding), in bytes
    count: int  # S / element size: the element count nccl-tests prints
    nccl_count: int  # the `count` argument of the NCCL call (per-rank part for split collectives)
    send_bytes: int  # send buffer per rank
    recv_bytes: int  # receive buffer per rank


@dataclass(frozen=True, kw_only=True)
class Collective:
    name: str  # stable snake_case key, used on the command line and in results
    description: str  # one line, shown by `fabricbench sweep --list-ops`
    busbw_factor: Callable[[int], float]  # n ranks -> factor; 0 where n == 1 makes busbw meaningless
    factor_text: str  # the factor as a formula, for reports ("2(n-1)/n")
    split: bool  # True: S is n per-rank parts (all-gather, reduce-scatter, all-to-all)
    send_parts: int | None = None  # parts of S each rank sends: None = 1 part (split) or all of S
    recv_parts: int | None = None  # parts of S each rank receives: None = likewise
    supports_inplace: bool = True
    nccl_call: str = ""  # the NCCL function it times, for reports
    # The torch engine's launch: torch_call(send, recv, group) with torch.distributed imported lazily.
    # Where torch only has an in-place form (all_reduce, broadcast) send and recv are one tensor.
    torch_call: Callable[..., None] | None = None
    torch_inplace_only: bool = False
    # The exact result on `rank` (float64 tensor) for --check, from inputs(src_rank, offset, length) that
    # give src_rank's input elements [offset, offset + length); `part` is the per-rank element count.
    expected: Callable[..., object] | None = None

    def size(self, requested_bytes: int, elem_size: int, nranks: int) -> Sizing:
        """Round `requested_bytes` down to what every rank can hold; count may come out 0."""
        assert requested_bytes >= 0 and elem_size > 0 and nranks > 0
        if not self.split:
            count = requested_bytes // elem_size
            return Sizing(bytes=count * elem_size, count=count, nccl_count=count,
                          send_bytes=count * elem_size, recv_bytes=count * elem_size)
        per_rank = requested_bytes // elem_size // nranks
        total = per_rank * nranks
        part = per_rank * elem_size
        send_parts = nranks if self.send_parts is None else self.send_parts
        recv_parts = nranks if self.recv_parts is None else self.recv_parts
        return Sizing(bytes=total * elem_size, count=total, nccl_count=per_rank,
                      send_bytes=part * send_parts, recv_bytes=part * recv_parts)

    def bandwidth(self, nbytes: int, time_us: float, nranks: int) -> tuple[float, float]:
        """(algbw, busbw) in decimal GB/s for S = nbytes moved in time_us microseconds."""
        if time_us <= 0:
            return 0.0, 0.0
        algbw = nbytes / (time_us * 1e-6) / 1e9
        return algbw, algbw * self.busbw_factor(nranks)


def ring_factor(n: int) -> float:
    """(n-1)/n: each rank sends and receives all but its own part once."""
    return (n - 1) / n


def allreduce_factor(n: int) -> float:
    """2(n-1)/n: a ring all-reduce is a reduce-scatter followed by an all-gather."""
    return 2 * (n - 1) / n


def unit_factor(n: int) -> float:
    """1: the root's buffer crosses each link once (broadcast, reduce)."""
    return 1.0 if n > 1 else 0.0
