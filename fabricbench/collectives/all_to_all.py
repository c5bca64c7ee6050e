"""all_to_all: rank r sends its part p to rank p (ncclSend/ncclRecv pairs in one group)."""

from fabricbench.collectives.base import Collective, ring_factor

ALL_TO_ALL = Collective(
    name="all_to_all",
    description="part p of rank r's buffer goes to rank p (expert-parallel exchange)",
    busbw_factor=ring_factor,
    factor_text="(n-1)/n",
    split=True,
    supports_inplace=False,  # NCCL has no in-place all-to-all: the parts would overwrite each other
    nccl_call="ncclSend/ncclRecv",
)
