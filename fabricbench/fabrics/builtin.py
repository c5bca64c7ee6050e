"""The built-in fabrics, one row each. Adding one is one row here (and one in FABRICS)."""

from __future__ import annotations

from fabricbench.fabrics.model import Fabric

DEFAULT = Fabric(
    name="default",
    description="NCCL as configured: NVLink or PCIe P2P where possible (your NCCL_* variables apply)",
    expected="P2P (NVLink/PCIe), SHM where P2P is not possible, NET between nodes",
    gloo_description="gloo as configured: TCP between the ranks, over loopback on one host (your GLOO_* "
                     "variables apply)",
)

P2P_OFF = Fabric(
    name="p2p-off",
    env=(("NCCL_P2P_DISABLE", "1"),),
    description="P2P disabled: NCCL stages GPU-to-GPU traffic through host memory (SHM)",
    expected="SHM",
    forbidden=("P2P",),
)

NET = Fabric(
    name="net",
    env=(("NCCL_P2P_DISABLE", "1"), ("NCCL_SHM_DISABLE", "1")),
    description="P2P and SHM disabled: NCCL's network transport (sockets or InfiniBand) even inside a node",
    expected="NET",
    forbidden=("P2P", "SHM"),
)
