"""Copy bandwidth over the fabric, measured by the compiled engine: GPU to GPU and host to/from GPU.

    fabricbench p2p --gpus 0-7 --size 256M

GPU pairs: cudaMemcpyPeerAsync src -> dst (unidirectional), and both ways at once (bidirectional; the
slower direction's time counts). Host: pinned memory, h2d, d2h and both at once. Decimal GB/s from the
median time: GB/s = bytes / t (bidirectional: 2 x bytes / t, both directions' bytes). The diagonal of the
peer matrix (src == dst) is a copy inside one GPU's memory, shown for reference.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any, Callable

from fabricbench.errors import EngineUnavailable
from fabricbench.statistics.figures import summarize

NOT_BUILT = ("fabricbench p2p needs the compiled engine (fabricbench._engine), which is not built here: "
             "install the CUDA toolkit and run `pip install --no-build-isolation --no-deps -e .`")


def engine() -> Any:
    if importlib.util.find_spec("fabricbench._engine") is None:
        raise EngineUnavailable(NOT_BUILT)
    return importlib.import_module("fabricbench._engine")


@dataclass(frozen=True, kw_only=True)
class CopyResult:
    copy_kind: str  # "peer" (GPU to GPU) or "host"; not `kind`, which the header owns
    src: str  # "GPU0" or "host"
    dst: str
    direction: str  # "uni", "bidir" (peer); "h2d", "d2h", "bidir" (host)
    bytes: int  # per direction
    iters: int
    time_us: float  # median
    min_us: float
    max_us: float
    gbps: float  # moved bytes / median time, 1e9
    peer_access: bool | None = None

    def to_record(self, head: dict[str, Any], gpus: list[int]) -> dict[str, Any]:
        return {**head, **self.__dict__, "gpus": gpus,
                "formula": "GB/s = bytes x directions / median time (1e9)"}


def gbps(nbytes: int, time_us: float, directions: int = 1) -> float:
    """Decimal GB/s: directions x bytes over the time (in µs)."""
    assert time_us > 0
    return directions * nbytes / (time_us * 1e-6) / 1e9


def _result(kind, src, dst, direction, nbytes, times, directions, peer_access=None) -> CopyResult:
    st = summarize(times)  # the statistics every record uses (fabricbench/statistics/figures.py)
    return CopyResult(copy_kind=kind, src=src, dst=dst, direction=direction, bytes=nbytes, iters=st.n,
                      time_us=st.median, min_us=st.min, max_us=st.max, gbps=gbps(nbytes, st.median, directions),
                      peer_access=peer_access)


def measure_all(gpus: tuple[int, ...], nbytes: int, warmup: int, iters: int, *, peers: bool = True,
                host: bool = True, eng: Any = None,
                on_result: Callable[[CopyResult], None] | None = None) -> list[CopyResult]:
    """Every ordered GPU pair (uni and bi) and every GPU's host links; `eng` may be a stand-in for tests."""
    eng = eng if eng is not None else engine()
    out: list[CopyResult] = []

    def keep(r: CopyResult) -> None:
        out.append(r)
        if on_result is not None:
            on_result(r)

    if peers:
        for s in gpus:
            for d in gpus:
                for bidir in (False, True):
                    if bidir and s == d:
                        continue
                    r = eng.copy_peer(s, d, nbytes, warmup, iters, bidir)
                    keep(_result("peer", f"GPU{s}", f"GPU{d}", "bidir" if bidir else "uni", nbytes,
                                 r["times_us"], 2 if bidir else 1, bool(r.get("peer_access"))))
    if host:
        for g in gpus:
            for direction in ("h2d", "d2h", "bidir"):
                r = eng.copy_host(g, nbytes, warmup, iters, direction)
                src, dst = ("host", f"GPU{g}") if direction != "d2h" else (f"GPU{g}", "host")
                keep(_result("host", src, dst, direction, nbytes, r["times_us"], 2 if direction == "bidir" else 1))
    return out


def matrix(results: list[CopyResult], gpus: tuple[int, ...], direction: str) -> list[list[float | None]]:
    """Peer GB/s with rows = src, columns = dst (None where not measured)."""
    by = {(r.src, r.dst): r.gbps for r in results if r.copy_kind == "peer" and r.direction == direction}
    return [[by.get((f"GPU{s}", f"GPU{d}")) for d in gpus] for s in gpus]
