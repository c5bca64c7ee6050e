"""all_reduce (sum): every rank ends with the element-wise sum of every rank's buffer. Used by DDP."""

from fabricbench.collectives.base import Collective, allreduce_factor


def _torch_call(send, recv, group=None):
    import torch.distributed as dist

    dist.all_reduce(recv, group=group)


def _expected(inputs, rank, nranks, part):
    return sum(inputs(r, 0, part) for r in range(nranks))


ALL_REDUCE = Collective(
    name="all_reduce",
    description="sum of every rank's buffer, everywhere (DDP's gradient all-reduce)",
    busbw_factor=allreduce_factor,
    factor_text="2(n-1)/n",
    split=False,
    nccl_call="ncclAllReduce",
    torch_call=_torch_call,
    torch_inplace_only=True,
    expected=_expected,
)
