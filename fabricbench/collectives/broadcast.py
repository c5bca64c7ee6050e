"""broadcast from rank 0: every rank ends with rank 0's buffer."""

from fabricbench.collectives.base import Collective, unit_factor

BROADCAST = Collective(
    name="broadcast",
    description="rank 0's buffer, everywhere",
    busbw_factor=unit_factor,
    factor_text="1",
    split=False,
    nccl_call="ncclBroadcast",
)
