"""The library behind `p2p`: copy bandwidth between every GPU pair and between host and each GPU.

    import fabricbench
    res = fabricbench.p2p(gpus="0-3", size="256M")              # res.unidirectional_gbps[i][j]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from fabricbench.errors import UsageError
from fabricbench.gpus import default_gpus, parse_gpus
from fabricbench.measuring import copy as copying
from fabricbench.measuring.compare import as_text, check_plot_path, open_output
from fabricbench.measuring.copy import matrix, measure_all
from fabricbench.measuring.plan import host_available_bytes
from fabricbench.measuring.runner import new_run_id
from fabricbench.results.schema import header
from fabricbench.sizes import format_size, parse_size

MAX_COPIES = 1_000_000  # p2p: timed or untimed copies per measurement


@dataclass(kw_only=True)
class P2PResult:
    run_id: str
    bytes: int
    gpus: tuple[int, ...]
    results: list[Any]  # measuring/copy.CopyResult
    unidirectional_gbps: list[list[float | None]]
    bidirectional_gbps: list[list[float | None]]
    host: bool = True
    peers: bool = True

    @property
    def host_results(self) -> list[Any]:
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


def p2p(*, gpus: str | Sequence[int] | None = None, size: str | int = "256M", iters: int = 20, warmup: int = 5,
        host: bool = True, peers: bool = True, out: str | None = None, plot: str | None = None) -> P2PResult:
    """Copy bandwidth between every GPU pair (uni- and bidirectional) and between host and each GPU, by the
    compiled engine (cudaMemcpyPeerAsync; pinned host memory). GB/s = bytes / median time (measuring/copy.py)."""

    nbytes = size if isinstance(size, int) else parse_size(size)
    if not 1 <= iters <= MAX_COPIES:
        raise UsageError(f"iters {iters}: need 1 to {MAX_COPIES:,} timed copies")
    if not 0 <= warmup <= MAX_COPIES:
        raise UsageError(f"warmup {warmup}: 0 to {MAX_COPIES:,} untimed copies")
    if not host and not peers:
        raise UsageError("no host and no peer copies leave nothing to measure")
    check_plot_path(plot)
    gpus = as_text(gpus)
    if gpus is not None:
        parse_gpus(gpus)  # the list's syntax first: it needs no engine
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
