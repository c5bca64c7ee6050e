"""`fabricbench.relate`: observed and predicted training slowdown per strategy and fabric, as `fabricbench
relate` prints it, for fabricbench's own train runs and for a user's own loop's profiler trace alike.

    fabricbench relate sweeps.jsonl train.jsonl --reference default
    res = fabricbench.relate(fabricbench.RelateConfig(inputs=["sweeps.jsonl", "train.jsonl"], reference="default"))
    res = fabricbench.relate(fabricbench.RelateConfig(traces=["prof/"], inputs=["sweeps.jsonl"]))   # relate --trace
    res.rows, res.problems

One call, one config: the inputs are results files or records; with traces, the inputs are the sweeps that
price the trace (usertrace.py), without, sweeps and train runs joined by fabric (api.py). The two paths
stay two functions inside (usertrace.py imports api.py's model: api.py cannot import it back); this module,
above both, is the one public face and decides which one a config takes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from fabricbench.declare import check, declare
from fabricbench.errors import UsageError, expect_config
from fabricbench.relating import usertrace
from fabricbench.relating.api import RelateResult, relate_records


def _as_tuple(value: Any) -> tuple[Any, ...]:
    """One path, record or result as a tuple of one; any other iterable as a tuple; a path-like as a str."""
    one = isinstance(value, (str, os.PathLike, dict)) or (hasattr(value, "to_dict") and not isinstance(value, dict))
    return tuple(str(x) if isinstance(x, os.PathLike) else x for x in ((value,) if one else value))


@dataclass(frozen=True, kw_only=True)
class RelateConfig:
    """What to relate and on which fabric to calibrate; checked once, here, for the CLI and the library alike."""

    # results files (JSONL, imported ones included), record dicts or typed results: sweeps and train runs;
    # beside traces, the sweeps that price them (a train record there is left out, said)
    inputs: tuple[Any, ...] = ()
    reference: str | None = field(default=None, metadata=declare(  # None: the fastest fabric with a sweep and
        "--reference", "text", "Fabric to calibrate on. Default: the fastest (trace-weighted busbw) with a sweep "
        "and a train run; with --trace, the one the trace was taken on: default."))  # a train run; traces: default
    traces: tuple[str, ...] = field(default=(), metadata=declare(  # a user's own loop's torch.profiler trace:
        "--trace", "input file or folder", "A torch.profiler trace of your own loop: a file (.json or .json.gz), "
        "or a folder of them (one per rank); repeat for several."))  # its files, or folders of them
    # None: where communication has resources of its own (window.applies), a slower fabric hides up to the
    # reference's overlap window (window.py); True: wherever the trace gives one; False: never (no more than
    # the reference hid). A rule of the model, for studying it: no flag
    overlap_window: bool | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", _as_tuple(self.inputs))
        object.__setattr__(self, "traces", tuple(str(t) for t in _as_tuple(self.traces)))
        check(self)
        if not self.inputs and not self.traces:
            raise UsageError("give results files (sweeps and train runs), or --trace PATH with sweep results files")
        if self.overlap_window not in (None, True, False):
            raise UsageError(f"RelateConfig.overlap_window {self.overlap_window!r}: None, True or False")


def relate(config: RelateConfig) -> RelateResult:
    """Predict every swept fabric's step from the reference's: fabricbench's train runs joined with sweeps by
    fabric, nranks and dtype, or (config.traces) a profiled loop priced on the sweeps. UsageError for input
    that cannot be related at all; what did not match is in the result's problems, one sentence each."""
    expect_config(config, RelateConfig, "relate")
    if config.traces:
        return usertrace.relate_trace(list(config.traces), list(config.inputs), config.reference,
                                      overlap_window=config.overlap_window)
    return relate_records(list(config.inputs), config.reference, overlap_window=config.overlap_window)
