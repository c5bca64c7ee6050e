"""all_reduce (sum): every rank ends with the element-wise sum of every rank's buffer. Used by DDP."""

from fabricbench.collectives.base import Collective, allreduce_factor

ALL_REDUCE = Collective(
    name="all_reduce",
    description="sum of every rank's buffer, everywhere (DDP's gradient all-reduce)",
    busbw_factor=allreduce_factor,
    factor_text="2(n-1)/n",
    split=False,
    nccl_call="ncclAllReduce",
)
