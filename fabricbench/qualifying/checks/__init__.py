"""The check kinds a spec may use: one module each, one row each below.

    fabricbench qualify --list-kinds
"""

from __future__ import annotations

from fabricbench.qualifying.checks.base import Check, CheckKind, Invalid
from fabricbench.qualifying.checks.collective import COLLECTIVE
from fabricbench.qualifying.checks.contrast import CONTRAST
from fabricbench.qualifying.checks.correctness import CORRECTNESS
from fabricbench.qualifying.checks.host_copy import HOST_COPY
from fabricbench.qualifying.checks.nccl_diag import NCCL_DIAG
from fabricbench.qualifying.checks.p2p import P2P
from fabricbench.qualifying.checks.topology import TOPOLOGY
from fabricbench.qualifying.checks.train import TRAIN
from fabricbench.qualifying.checks.transport import TRANSPORT
from fabricbench.registry import Registry

CHECKS: Registry[CheckKind] = Registry("check kind")
CHECKS.register("topology", TOPOLOGY)
CHECKS.register("collective", COLLECTIVE)
CHECKS.register("correctness", CORRECTNESS)
CHECKS.register("transport", TRANSPORT)
CHECKS.register("contrast", CONTRAST)
CHECKS.register("p2p", P2P)
CHECKS.register("host_copy", HOST_COPY)
CHECKS.register("train", TRAIN)
CHECKS.register("nccl_diag", NCCL_DIAG)

__all__ = ["CHECKS", "Check", "CheckKind", "Invalid"]
