"""reduce_scatter (sum): rank r ends with part r of the sum. ZeRO-2/3 and FSDP shard gradients so."""

from fabricbench.collectives.base import Collective, ring_factor


def _torch_call(send, recv, group=None):
    import torch.distributed as dist

    (getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor)(recv, send, group=group)


def _expected(inputs, rank, nranks, part):
    return sum(inputs(r, rank * part, part) for r in range(nranks))


REDUCE_SCATTER = Collective(
    name="reduce_scatter",
    description="part r of the sum of every rank's buffer, on rank r (ZeRO/FSDP gradient shard)",
    busbw_factor=ring_factor,
    factor_text="(n-1)/n",
    split=True,
    recv_parts=1,
    nccl_call="ncclReduceScatter",
    torch_call=_torch_call,
    expected=_expected,
)
