"""The library behind `p2p`: copy bandwidth between every GPU pair and between host and each GPU.

    import fabricbench
    res = fabricbench.p2p(fabricbench.P2PConfig(gpus="0-3", size="256M"))   # res.unidirectional_gbps[i][j]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from fabricbench.declare import check, declare, of, shared
from fabricbench.errors import UsageError, expect_config
from fabricbench.gpus import default_gpus, parse_gpus
from fabricbench.measuring import copy as copying
from fabricbench.measuring.child_sweeps import as_text, check_plot_path, open_output
from fabricbench.measuring.config import SweepConfig
from fabricbench.measuring.copy import CopyResult, matrix, measure_all
from fabricbench.measuring.plan import host_available_bytes
from fabricbench.measuring.runner import new_run_id
from fabricbench.results.schema import header
from fabricbench.sizes import format_size, parse_size

@dataclass(frozen=True, kw_only=True)
class P2PConfig:
    """Which copies `p2p` times and how often; checked once, here, for the CLI and the library. Its fields
are the child `fabricbench p2p`'s options too (jobs/configs.child_command), and its resume key (job_key)."""

    PROGRAM: ClassVar[tuple[str, ...]] = ("fabricbench", "p2p")  # the child it makes (qualify's copy checks)
    # CUDA ordinals, as a GPU list text (0-3,6) or the ordinals (kept as the text); None: every GPU
    gpus: str | None = field(default=None, metadata=shared(of(SweepConfig, "gpus"), help="GPU list: 0-7, 0,2,5."))
    size: int = field(default="256M", metadata=declare(  # bytes per copy (a size text is read)
        "--size", "size", "Bytes per copy (a bare G is GiB, 2^30 B; GB is 10^9 B)."))
    # --iters and --warmup are sweep's options, one range for every command that takes them
    iters: int = field(default=20, metadata=shared(of(SweepConfig, "iters"), help="Timed copies per measurement."))
    warmup: int = field(default=5, metadata=shared(of(SweepConfig, "warmup"), help="Untimed copies first."))
    no_host: bool = field(default=False, metadata=declare("--no-host", "flag", "Skip host<->GPU copies."))
    no_peer: bool = field(default=False, metadata=declare("--no-peer", "flag", "Skip GPU<->GPU copies."))

    def __post_init__(self) -> None:
        if self.gpus is not None and not isinstance(self.gpus, str):
            object.__setattr__(self, "gpus", as_text(self.gpus))
        object.__setattr__(self, "size", self.size if isinstance(self.size, int) else parse_size(self.size))
        check(self)
        if self.size < 1:
            raise UsageError(f"--size {self.size}: a copy needs at least 1 B (P2PConfig.size)")
        if self.no_host and self.no_peer:
            raise UsageError("no host and no peer copies leave nothing to measure")
        if self.gpus is not None:
            parse_gpus(self.gpus)  # the list's syntax first: it needs no engine


@dataclass(kw_only=True)
class P2PResult:
    run_id: str
    bytes: int
    gpus: tuple[int, ...]
    results: list[CopyResult]
    unidirectional_gbps: list[list[float | None]]
    bidirectional_gbps: list[list[float | None]]
    host: bool = True
    peers: bool = True

    @property
    def host_results(self) -> list[CopyResult]:
        return [r for r in self.results if r.copy_kind == "host"]

    def host_gbps(self, gpu: int, direction: str) -> float | None:
        return next((r.gbps for r in self.host_results if r.direction == direction and f"GPU{gpu}" in (r.src, r.dst)),
                    None)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "bytes": self.bytes, "gpus": list(self.gpus),
                "unidirectional_gbps": self.unidirectional_gbps, "bidirectional_gbps": self.bidirectional_gbps,
                "host_gbps": {f"GPU{g}": {d: self.host_gbps(g, d) for d in ("h2d", "d2h", "bidir")}
                              for g in self.gpus} if self.host else {},
                "records": [r.__dict__ for r in self.results]}


def p2p(config: P2PConfig, *, out: str | None = None, plot: str | None = None) -> P2PResult:
    """Copy bandwidth between every GPU pair (uni- and bidirectional) and between host and each GPU, by the
    compiled engine (cudaMemcpyPeerAsync; pinned host memory). GB/s = bytes / median time (measuring/copy.py).
    `out`: the JSONL records (kind "copy") are appended there; `plot`: checked before anything is measured
    (measuring/copy_format.plot draws it)."""
    expect_config(config, P2PConfig, "p2p")
    nbytes, iters, warmup = config.size, config.iters, config.warmup
    host, peers = not config.no_host, not config.no_peer
    check_plot_path(plot)
    gpus = config.gpus
    eng = copying.engine()
    gpu_t = default_gpus(gpus)
    _check_fits(eng, gpu_t, nbytes, host=host, peers=peers)
    run_id = new_run_id()
    writer = open_output(out, run_id, "default")
    head = header("copy", run_id=run_id, fabric="default")
    try:
        results = measure_all(gpu_t, nbytes, warmup, iters, peers=peers, host=host, eng=eng,
                              on_result=lambda r: writer.write(r.to_record(head, list(gpu_t))))
    finally:
        writer.close()
    res = P2PResult(run_id=run_id, bytes=nbytes, gpus=tuple(gpu_t), results=results, host=host, peers=peers,
                    unidirectional_gbps=matrix(results, gpu_t, "uni"),
                    bidirectional_gbps=matrix(results, gpu_t, "bidir"))
    return res


def _check_fits(eng, gpu_t, nbytes: int, *, host: bool, peers: bool) -> None:
    """A copy of S bytes both ways holds 2 x S on a GPU (csrc/copy.cpp) and 2 x S of pinned host memory:
    refuse sizes that cannot be allocated, with the arithmetic, before the first copy."""
    need = 2 * nbytes
    gib = 2**30
    avail = host_available_bytes()
    if host and avail is not None and need > avail:
        raise UsageError(f"size {format_size(nbytes)}: host copies pin 2 x {format_size(nbytes)} = "
                         f"{need / gib:.1f} GiB but {avail / gib:.1f} GiB of host memory is available; "
                         f"lower size or leave host copies out")
    devices = getattr(eng, "devices", None)
    if devices is None:  # a stand-in engine without device facts
        return
    for d in devices(list(gpu_t)):
        if need > d["free_bytes"]:
            raise UsageError(f"size {format_size(nbytes)}: a copy both ways needs 2 x {format_size(nbytes)} = "
                             f"{need / gib:.1f} GiB on GPU{d['index']} but {d['free_bytes'] / gib:.1f} GiB is "
                             f"free; lower size")
