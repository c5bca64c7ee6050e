"""all_gather: every rank ends with every rank's part, concatenated. ZeRO-3/FSDP gather parameters so."""

from fabricbench.collectives.base import Collective, ring_factor


def _torch_call(send, recv, group=None):
    import torch.distributed as dist

    (getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor)(recv, send, group=group)


def _expected(inputs, rank, nranks, part):
    import torch

    return torch.cat([inputs(r, 0, part) for r in range(nranks)])


ALL_GATHER = Collective(
    name="all_gather",
    description="every rank's part, concatenated, everywhere (FSDP/ZeRO-3 parameter gather)",
    busbw_factor=ring_factor,
    factor_text="(n-1)/n",
    split=True,
    send_parts=1,
    nccl_call="ncclAllGather",
    torch_call=_torch_call,
    expected=_expected,
)
