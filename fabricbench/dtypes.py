"""Element types a measurement can use: name -> size in bytes (and the torch name, looked up lazily)."""

from __future__ import annotations

from fabricbench.errors import UsageError

# name on the command line -> element size in bytes. The compiled engine and the torch engine accept
# exactly these names.
DTYPES: dict[str, int] = {
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "float64": 8,
    "int32": 4,
    "int8": 1,
    "uint8": 1,
}
ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16",
           "float": "float32", "double": "float64", "fp64": "float64"}


def resolve(name: str) -> str:
    key = ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in DTYPES:
        raise UsageError(f"unknown dtype {name!r}; choose from {', '.join(DTYPES)}")
    return key


def elem_size(name: str) -> int:
    return DTYPES[resolve(name)]
