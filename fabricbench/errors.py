"""The exception hierarchy every layer of fabricbench raises.

`fabricbench sweep --gpus 99` ends in a UsageError: the CLI prints its message as one line and exits 2.

The compiled engine (fabricbench._engine) translates its C++ exceptions into CudaError, NcclError and
CollectiveTimeout defined here, so the hierarchy lives in one place and is importable without CUDA.
"""

from __future__ import annotations

from typing import Any, ClassVar


class FabricbenchError(Exception):
    """Base of everything fabricbench raises on purpose. The CLI prints "Error: " and the message, after
    `label` where the message alone would not say what failed (a CUDA call's own words); never a class name.
    A parent reads a child's label back as its class (by_label)."""

    label: ClassVar[str] = ""


class UsageError(FabricbenchError, ValueError):
    """What the user asked for cannot be done (bad option, bad size, too few GPUs...).

    The message is one line that says what to do instead. A suggestion of other settings is `hint`, in
    the library's argument names ({"device": "cpu", "nprocs": 2}), written after the message as a library
    caller would type them; the CLI writes it as the flags of the command that printed it, or leaves it
    out where that command has no such flags (fabricbench/cli/hints.py), so a hint never names a flag
    that its command lacks.
    """

    def __init__(self, message: str = "", *, hint: dict[str, Any] | list[dict[str, Any]] | None = None,
                 hint_text: str = "run with") -> None:
        self.message, self.hint_text = str(message), hint_text
        self.hints = [dict(h) for h in (hint if isinstance(hint, list) else [hint] if hint else [])]
        self.hint = hint
        said = " or ".join(", ".join(f"{k}={v!r}" for k, v in h.items()) for h in self.hints)
        super().__init__(self.message + (f"; {hint_text} {said}" if said else ""))

    def __reduce__(self) -> tuple[Any, ...]:  # keyword arguments survive pickling (a child's error read by its parent)
        return (_usage_error, (self.message, self.hint, self.hint_text))


def _usage_error(message: str, hint: dict[str, Any] | list[dict[str, Any]] | None, hint_text: str) -> "UsageError":
    return UsageError(message, hint=hint, hint_text=hint_text)


def expect_config(config: object, cls: type, verb: str) -> None:
    """Every library call's first check: its config is the one it takes (an untyped caller may pass a dict,
    keywords' leftovers or another verb's config), said in one line instead of an AttributeError deep in."""
    if not isinstance(config, cls):
        raise UsageError(f"{verb} takes a {cls.__name__}, not {type(config).__name__}: "
                         f"fabricbench.{verb}(fabricbench.{cls.__name__}(...))")


class EngineUnavailable(FabricbenchError):
    """The chosen engine cannot run here (no extension built, no GPU, no NCCL). The message says how."""


class FabricWaived(FabricbenchError):
    """A fabric cannot be applied on this machine (e.g. shaped:RATE without root or iproute2).

    Callers record the unit or check as waived with this reason; nothing else fails.
    """


class CudaError(FabricbenchError):
    """A CUDA runtime call failed. Message: call, file:line, error name and string."""

    label = "CUDA error"


class NcclError(FabricbenchError):
    """An NCCL call failed. Message: call, file:line, ncclResult name, string and ncclGetLastError()."""

    label = "NCCL error"


class CollectiveTimeout(FabricbenchError, TimeoutError):
    """Communicator set-up or a collective did not finish within --timeout; the communicator was aborted."""

    label = "timeout"


class CheckFailed(FabricbenchError):
    """--check found wrong elements. Raised after every measurement was written."""

    label = "check failed"


def by_label(label: str) -> type[FabricbenchError] | None:
    """The class whose `label` a child's `Error: <label>: ...` line names (measuring/child.py); None for none."""
    todo, seen = [FabricbenchError], []
    while todo:
        cls = todo.pop()
        seen.append(cls)
        todo += cls.__subclasses__()
    return next((c for c in seen if label and c.__dict__.get("label") == label), None)
