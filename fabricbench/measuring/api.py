"""The library face of the measurement core.

    import fabricbench
    r = fabricbench.measure("all_reduce", "1G", fabricbench.SweepConfig(gpus=[0, 1], dtype="bfloat16"))
    print(r.time_us, r.algbw_gbps, r.busbw_gbps)
    rows = fabricbench.sweep(fabricbench.SweepConfig(ops=["all_gather", "reduce_scatter"], sizes="1M-1G:x2"),
                             out="ag.jsonl").records

The config says what is measured (it is also the child sweep that compare and scaling vary); where the
records go (`out`, `resume`) is the call's, as for every measuring call (train, compare, scaling, p2p).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Iterable

from fabricbench.errors import UsageError, expect_config
from fabricbench.measuring import runner
from fabricbench.measuring.config import SweepConfig
# make_config: a SweepConfig from keywords, which tests and scripts import from here
from fabricbench.measuring.devices import make_config, resolve_devices  # noqa: F401
from fabricbench.measuring.resume import Resume
from fabricbench.measuring.sweep_result import SweepResult
from fabricbench.results.schema import CollectiveResult
from fabricbench.results.status import Status
from fabricbench.results.writer import ResultWriter

if TYPE_CHECKING:  # for the annotation only: pandas is an extra, imported where it is used
    import pandas


def sweep(config: SweepConfig, *, out: str | None = None, resume: bool = False) -> SweepResult:
    """Run the sweep `config` and return its results (records also appended to `out`, when given).

    resume=True: what `out` already holds as ok (same item, ranks, GPUs, engine, fabric and settings; see
    fabricbench/measuring/resume.py) is not measured again; those results are returned from the file, in
    plan order with the new ones, and not written twice."""
    expect_config(config, SweepConfig, "sweep")
    import warnings

    if resume and out is None:
        raise UsageError("resume=True skips what `out` already holds; pass out=<the earlier run's file>")
    config, notes = resolve_devices(config)
    for note in notes:
        warnings.warn(note, stacklevel=2)
    prior = Resume.from_file(out) if resume else None
    with ResultWriter(out) as writer:
        return SweepResult(records=runner.run_sweep(config, writer=writer, resume=prior), out=out)


def measure(op: str, size: int | str, config: SweepConfig | None = None) -> CollectiveResult:
    """Time one collective at one size with `config`'s other settings (default: SweepConfig()'s; its
    `inplace` is "out-of-place" or "inplace", as a sweep's) and return its result: sweep's convenience."""
    config = config if config is not None else SweepConfig()
    expect_config(config, SweepConfig, "measure")
    if config.inplace == "both":
        raise UsageError('measure gives one result: inplace="out-of-place" or "inplace", not "both" (a sweep '
                         'gives both)')
    one = dataclasses.replace(config, ops=(op,), sizes=size)
    results = [r for r in sweep(one).records if r.status != Status.WAIVED]
    if not results:
        raise UsageError(f"{op} at {size} does not run on this many ranks (waived)")
    return results[0]


def to_dataframe(results: SweepResult | Iterable[CollectiveResult | dict[str, Any]]) -> pandas.DataFrame:
    """A pandas DataFrame of results (a sweep's, records or dataclasses), one row each."""
    try:
        import pandas as pd
    except ImportError:
        raise UsageError('to_dataframe needs pandas: pip install "fabricbench[pandas]"') from None
    if isinstance(results, SweepResult):
        results = results.records
    return pd.DataFrame([r.to_dict() if isinstance(r, CollectiveResult) else r for r in results])
