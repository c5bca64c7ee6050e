"""broadcast from rank 0: every rank ends with rank 0's buffer."""

from fabricbench.collectives.base import Collective, unit_factor


def _torch_call(send, recv, group=None):
    import torch.distributed as dist

    dist.broadcast(recv, src=0, group=group)


def _expected(inputs, rank, nranks, part):
    return inputs(0, 0, part)


BROADCAST = Collective(
    name="broadcast",
    description="rank 0's buffer, everywhere",
    busbw_factor=unit_factor,
    factor_text="1",
    split=False,
    nccl_call="ncclBroadcast",
    torch_call=_torch_call,
    torch_inplace_only=True,
    expected=_expected,
)
