"""GPU lists: '0-7', '0,2,5', '0-3,6' -> a tuple of device ordinals, checked against what is visible.

    fabricbench sweep --gpus 0,2,5
"""

from __future__ import annotations

import os
import re

from fabricbench.errors import UsageError


# The settings that measure on CPU ranks instead of GPUs (a UsageError hint: the CLI shows it as flags)
CPU_RANKS = {"engine": "torch", "backend": "gloo", "nprocs": 2}
MAX_ORDINAL = 1023  # CUDA ordinals of one host; a bound that keeps '0-99999999999' from filling memory


def parse_gpus(text: str) -> tuple[int, ...]:
    """Parse a GPU list; order is kept (rank i drives the i-th GPU named)."""
    if text is None or not text.strip():
        raise UsageError("--gpus is empty; write e.g. 0-7, 0,2,5 or 0-3,6")
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"([0-9]+)(?:-([0-9]+))?", part, re.ASCII)  # not \d: '١' is not a GPU
        if not m:
            raise UsageError(f"cannot read GPU list {text!r} at {part!r}; write e.g. 0-7 or 0,2,5")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if max(lo, hi) > MAX_ORDINAL:
            raise UsageError(f"--gpus {text}: GPU {max(lo, hi)} is past any one host's GPUs "
                             f"(ordinals go up to {MAX_ORDINAL})")
        if hi < lo:
            raise UsageError(f"GPU range {part!r} descends; write {hi}-{lo}")
        out.extend(range(lo, hi + 1))
    dups = sorted({g for g in out if out.count(g) > 1})
    if dups:
        raise UsageError(f"--gpus {text} names GPU {', '.join(map(str, dups))} more than once")
    return tuple(out)


def check_visible(gpus: tuple[int, ...], visible: int, text: str | None = None) -> None:
    """Refuse ordinals past the visible count, with the arithmetic in the message."""
    shown = text if text is not None else ",".join(map(str, gpus))
    if visible == 0:
        raise UsageError(f"no CUDA GPU is visible here{f' for gpus {shown}' if shown else ''}", hint=CPU_RANKS, hint_text="on CPU, run with")
    bad = [g for g in gpus if g >= visible]
    if bad:
        raise UsageError(f"--gpus {shown} names {len(gpus)} GPU(s) up to {max(gpus)} but {visible} "
                         f"are visible (0-{visible - 1})")


def default_gpus(text: str | None = None, *, visible: int | None = None) -> tuple[int, ...]:
    """The GPUs a command drives: those named (checked against what is visible), else all visible ones.

    The one place that decides "all visible" for sweep, p2p and train (and the library calls behind them).
    """
    visible = visible_gpu_count() if visible is None else visible
    gpus = parse_gpus(text) if text is not None else tuple(range(visible))
    check_visible(gpus, visible, text)
    return gpus


def visible_gpu_count() -> int:
    """CUDA GPUs this process can use, without creating a CUDA context when possible.

    Prefers NVML (cheap, no context), narrowed by CUDA_VISIBLE_DEVICES; falls back to torch.
    """
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        try:
            n = pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no NVML library: count through torch (CPU builds say 0)
        try:
            import torch

            return torch.cuda.device_count()
        except Exception:
            return 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v for v in visible.split(",") if v.strip()]
        if ids and ids[0].strip() in ("-1", ""):
            return 0
        n = min(n, len(ids))
    return n
