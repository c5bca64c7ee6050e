"""One nccl-tests measurement (one size, one placement) -> one collective record in our schema.

    fabricbench import all_reduce.log --out imported.jsonl

Shared by the text and the -J JSON readers, so both eras and both forms give the same record. Figures are
kept as nccl-tests printed them: time_us is its average time per iteration (a host clock around a loop of
launches, averaged over ranks; see docs/domain.md), algbw and busbw its decimal GB/s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fabricbench import dtypes
from fabricbench.collectives import busbw_factor
from fabricbench.errors import UsageError
from fabricbench.fabrics.transport import TransportSummary
from fabricbench.results.schema import CollectiveResult
from fabricbench.results.status import Status

ENGINE = "nccl-tests"
TIMING_RULE = "nccl-tests: mean of a timed loop of launches (host clock), averaged over ranks"
PER_ITER_RULE = "nccl-tests -I 1: CUDA events per iteration, slowest process per iteration"


@dataclass(kw_only=True)
class RunFacts:
    """What one nccl-tests run says about itself (header lines, Rank lines, JSON config, NCCL log)."""

    op: str | None = None
    tool_version: str | None = None  # nccl-tests' own version ("2.13.6"), where it prints it
    nccl_version: str | None = None
    nranks: int | None = None
    gpus: list[int] = field(default_factory=list)
    gpu_names: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    iters: int | None = None
    warmup: int | None = None
    graph: bool | None = None
    validation: bool | None = None
    log: TransportSummary | None = None  # None: no NCCL line in this run
    timestamp: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def host(self) -> str | None:
        return self.hosts[0] if len(self.hosts) == 1 else None


@dataclass(kw_only=True)
class Side:
    """One placement's columns: time, algbw, busbw, #wrong (or the old era's error), per-iteration ones."""

    time_us: float | None
    algbw: float | None
    busbw: float | None
    wrong: int | None = None  # elements that differ; None when not checked (N/A) or not counted
    max_error: float | None = None  # the old era's "error" column: a largest deviation, not a count
    min_us: float | None = None  # i_min / i_max / i_p99 / i_cv% (-I 1)
    max_us: float | None = None
    p99_us: float | None = None
    cv: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # other columns (-U tuning, #bitdiff), as printed


def whole_count(nbytes: int | None, printed: int | None, dtype: str | None) -> tuple[int | None, int | None]:
    """(our count, nccl-tests' count where it differs): ours is the whole buffer's elements (size / element
    size), as every fabricbench record keeps it. nccl-tests prints the buffer's size but the NCCL call's
    count (setupArgs in src/common.cu: paramcount), which is a rank's part for all_gather, reduce_scatter,
    alltoall, gather, scatter and hypercube (their *GetCollByteCount), and the whole for the others."""
    try:
        elem = dtypes.elem_size(dtype) if dtype else None
    except UsageError:
        elem = None  # a type fabricbench does not know (f8e4m3 on an old build): kept as printed
    if elem is None or nbytes is None or nbytes % elem:
        return printed, None
    ours = nbytes // elem
    return ours, (printed if printed is not None and printed != ours else None)


def record(head: dict[str, Any], facts: RunFacts, *, nbytes: int | None, count: int | None, dtype: str | None,
           redop: str | None, root: int | None, inplace: bool, side: Side) -> dict[str, Any]:
    nranks = facts.nranks
    count, nccl_count = whole_count(nbytes, count, dtype)
    factor = busbw_factor(facts.op, nranks)
    wrong = side.wrong
    status, message = Status.OK, None
    if wrong:
        status, message = Status.WRONG, f"nccl-tests counted {wrong} wrong element(s)"
    elif side.time_us is None:
        status, message = Status.ERROR, "nccl-tests printed no time for this size"
    extra: dict[str, Any] = {k: v for k, v in {"redop": redop, "root": root, "max_error": side.max_error,
                                                 "p99_us": side.p99_us, "hosts": facts.hosts or None,
                                                 "warmup": facts.warmup, "validation": facts.validation,
                                                 "nnodes": facts.log.nnodes if facts.log else None,
                                                 "nccl_count": nccl_count,
                                                 **side.extra}.items() if v is not None}
    per_iter = side.min_us is not None or side.cv is not None
    if facts.log is not None and facts.log.log_lines:
        transport = facts.log.label(nranks)
        nvls, algo, proto = facts.log.nvls, facts.log.algo, facts.log.proto
        extra["transport_detail"] = facts.log.to_dict()
    else:
        transport, nvls, algo, proto = None, None, None, None
    r = CollectiveResult(
        op=facts.op, dtype=dtype, bytes=nbytes, requested_bytes=None, count=count, nranks=nranks,
        gpus=list(facts.gpus), inplace=inplace, graph=facts.graph, iters=facts.iters,
        time_us=side.time_us, mean_us=side.time_us, min_us=side.min_us, max_us=side.max_us, p95_us=None,
        cv=side.cv, ci95_rel=None, algbw_gbps=side.algbw, busbw_gbps=side.busbw, busbw_factor=factor,
        busbw_note=("n = 1: busbw factor is 0, busbw not meaningful" if nranks == 1 and factor == 0 else None),
        wrong=wrong, status=status, message=message, engine=ENGINE, backend="nccl",
        timing_rule=TIMING_RULE + ("; i_* columns: " + PER_ITER_RULE if per_iter else ""),
        nccl_version=facts.nccl_version, gpu_names=list(facts.gpu_names), transport=transport, nvls=nvls,
        nccl_algo=algo, nccl_proto=proto, extra=extra, context=head)
    return r.to_dict()
