"""all_to_all: rank r sends its part p to rank p (ncclSend/ncclRecv pairs in one group)."""

from fabricbench.collectives.base import Collective, ring_factor


def _torch_call(send, recv, group=None):
    import torch.distributed as dist

    dist.all_to_all_single(recv, send, group=group)


def _expected(inputs, rank, nranks, part):
    import torch

    return torch.cat([inputs(r, rank * part, part) for r in range(nranks)])


ALL_TO_ALL = Collective(
    name="all_to_all",
    description="part p of rank r's buffer goes to rank p (expert-parallel exchange)",
    busbw_factor=ring_factor,
    factor_text="(n-1)/n",
    split=True,
    supports_inplace=False,  # NCCL has no in-place all-to-all: the parts would overwrite each other
    nccl_call="ncclSend/ncclRecv",
    torch_call=_torch_call,
    expected=_expected,
)
