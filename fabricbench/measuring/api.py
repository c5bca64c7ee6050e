"""The library face of the measurement core.

    import fabricbench
    r = fabricbench.measure("all_reduce", "1G", gpus=[0, 1], dtype="bfloat16")
    print(r.time_us, r.algbw_gbps, r.busbw_gbps)
    rows = fabricbench.sweep(ops=["all_gather", "reduce_scatter"], sizes="1M-1G:x2", out="ag.jsonl")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from fabricbench.errors import UsageError
from fabricbench.measuring import runner
from fabricbench.measuring.devices import make_config, resolve_devices
from fabricbench.measuring.resume import Resume
from fabricbench.results.schema import CollectiveResult
from fabricbench.results.status import Status
from fabricbench.results.writer import ResultWriter

if TYPE_CHECKING:  # for the annotation only: pandas is an extra, imported where it is used
    import pandas


def sweep(*, out: str | None = None, resume: bool = False, **fields: Any) -> list[CollectiveResult]:
    """Run a sweep (fields as SweepConfig, friendly types allowed) and return its results.

    resume=True: what `out` already holds as ok (same item, ranks, GPUs, engine, fabric and settings; see
    fabricbench/measuring/resume.py) is not measured again; those results are returned from the file, in
    plan order with the new ones, and not written twice."""
    import warnings

    if resume and out is None:
        raise UsageError("resume=True skips what `out` already holds; pass out=<the earlier run's file>")
    config, notes = resolve_devices(make_config(**fields))
    for note in notes:
        warnings.warn(note, stacklevel=2)
    prior = Resume.from_file(out) if resume else None
    with ResultWriter(out) as writer:
        return runner.run_sweep(config, writer=writer, resume=prior)


def measure(op: str, size: int | str, **fields: Any) -> CollectiveResult:
    """Time one collective at one size (out-of-place unless inplace=True) and return its result."""
    inplace = fields.pop("inplace", False)
    fields["inplace"] = "inplace" if inplace is True else ("out-of-place" if inplace is False else inplace)
    results = [r for r in sweep(ops=[op], sizes=[size], **fields) if r.status != Status.WAIVED]

    if not results:
        raise UsageError(f"{op} at {size} does not run on this many ranks (waived)")
    return results[0]


def to_dataframe(results: Iterable[CollectiveResult | dict[str, Any]]) -> pandas.DataFrame:
    """A pandas DataFrame of results (records or dataclasses), one row each."""
    try:
        import pandas as pd
    except ImportError:
        raise UsageError('to_dataframe needs pandas: pip install "fabricbench[pandas]"') from None
    return pd.DataFrame([r.to_dict() if isinstance(r, CollectiveResult) else r for r in results])
