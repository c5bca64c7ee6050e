"""all_gather: every rank ends with every rank's part, concatenated. ZeRO-3/FSDP gather parameters so."""

from fabricbench.collectives.base import Collective, ring_factor

ALL_GATHER = Collective(
    name="all_gather",
    description="every rank's part, concatenated, everywhere (FSDP/ZeRO-3 parameter gather)",
    busbw_factor=ring_factor,
    factor_text="(n-1)/n",
    split=True,
    send_parts=1,
    nccl_call="ncclAllGather",
)
