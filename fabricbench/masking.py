"""What a fabric's variable may look like outside the process that needs it: the one masking rule.

    fabricbench compare --fabrics default,x:SOME_TOKEN=abc     (shown and recorded as x:SOME_TOKEN=***)

A custom fabric's variables are shown by name everywhere, but their values only when the name is
NCCL_*, GLOO_* or CUDA_*; any other value (it can be a credential) is written as MASK. This module sits
below fabrics/ and results/ (it imports nothing of fabricbench), so both use the same rule.
"""

from __future__ import annotations

# A fabric's variable whose value may be printed and recorded; any other is shown by name as MASK.
PUBLIC_PREFIXES = ("NCCL_", "GLOO_", "CUDA_")
MASK = "***"


def public_value(var: str, value: str) -> str:
    """The value as it may appear in a record or on screen: itself for NCCL_*/GLOO_*/CUDA_*, else MASK."""
    return value if var.startswith(PUBLIC_PREFIXES) else MASK


def public_env(variables: dict[str, str]) -> dict[str, str]:
    return {k: public_value(k, v) for k, v in variables.items()}
