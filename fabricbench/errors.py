"""The exception hierarchy every layer of fabricbench raises.

`fabricbench sweep --gpus 99` ends in a UsageError: the CLI prints its message as one line and exits 2.

The compiled engine (fabricbench._engine) translates its C++ exceptions into CudaError, NcclError and
CollectiveTimeout defined here, so the hierarchy lives in one place and is importable without CUDA.
"""

from __future__ import annotations


class FabricbenchError(Exception):
    """Base of everything fabricbench raises on purpose."""


class UsageError(FabricbenchError, ValueError):
    """What the user asked for cannot be done (bad option, bad size, too few GPUs...).

    The message is one line that says what to do instead.
    """


class EngineUnavailable(FabricbenchError):
    """The chosen engine cannot run here (no extension built, no GPU, no NCCL). The message says how."""


class FabricWaived(FabricbenchError):
    """A fabric cannot be applied on this machine (e.g. shaped:RATE without root or iproute2).

    Callers record the unit or check as waived with this reason; nothing else fails.
    """


class CudaError(FabricbenchError):
    """A CUDA runtime call failed. Message: call, file:line, error name and string."""


class NcclError(FabricbenchError):
    """An NCCL call failed. Message: call, file:line, ncclResult name, string and ncclGetLastError()."""


class CollectiveTimeout(FabricbenchError, TimeoutError):
    """Communicator set-up or a collective did not finish within --timeout; the communicator was aborted."""


class CheckFailed(FabricbenchError):
    """--check found wrong elements. Raised after every measurement was written."""
