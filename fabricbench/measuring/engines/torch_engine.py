"""The `torch` engine: the same Cases through torch.distributed (backends nccl and gloo).

    fabricbench sweep --engine torch --backend gloo --nprocs 2     (no GPU needed)
    fabricbench sweep --engine torch --backend gloo --nprocs 2 --gpus 0   (2 ranks sharing GPU 0: the lab)
    torchrun --nproc-per-node 8 -m fabricbench sweep --engine torch

It shows what a PyTorch user would measure, cross-checks the native engine, and lets the whole sweep run
on machines with no GPU. Timing: with nccl, CUDA events around every iteration on the rank's stream,
after a device-side sleep that lets every launch queue up first (torch.cuda._sleep plays the role of the
native engine's blocking kernel); with gloo, which runs on the calling thread, a host clock around each
call. Each rank returns its own per-iteration times; the runner keeps the slowest rank per iteration.
With --timing loop (nccl-tests' method) a host clock runs around the whole loop of calls up to the last
completion instead, one figure per loop. --buffers rotate cycles buffer sets spanning 128 MiB; reuse runs
every iteration on one set.

torch.distributed has only in-place all_reduce and broadcast: "out-of-place" runs them in place and the
record says so in extra.torch_inplace.
"""

from __future__ import annotations

import os
import time
from typing import Any

from fabricbench.collectives import COLLECTIVES
from fabricbench.errors import EngineUnavailable, UsageError
from fabricbench.measuring.check import count_wrong, input_values
from fabricbench.measuring.config import SweepConfig, default_backend
from fabricbench.measuring.plan import host_available_bytes
from fabricbench.measuring.session import Case, DistContext, Timing

TORCH_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16", "float64": "float64",
                "int32": "int32", "int8": "int8", "uint8": "uint8"}
ROTATE_TARGET_BYTES = 128 << 20  # rotate buffer sets until they span this much: past any L2 / LLC
MAX_ROTATE = 16
CHUNK = 200  # iterations queued behind one device sleep
SLEEP_CYCLES_PER_ITER = 100_000  # GPU clock cycles (~50 us at ~2 GHz) of stream hold per queued iteration


def rotate_count(case: Case) -> int:
    """Buffer sets one Case cycles through: enough to span ROTATE_TARGET_BYTES (at most MAX_ROTATE), or 1
    with buffers "reuse"."""
    per_set = case.send_bytes + case.recv_bytes
    if case.buffers == "reuse" or per_set >= ROTATE_TARGET_BYTES:
        return 1
    return max(1, min(MAX_ROTATE, -(-ROTATE_TARGET_BYTES // max(per_set, 1))))


def _loaded_nccl_path() -> str | None:
    """The libnccl this process loaded, from its memory map (what ncclGetVersion's figure belongs to; never
    the NCCL_VERSION variable of a container image)."""
    try:
        for line in open("/proc/self/maps", encoding="utf-8", errors="replace"):
            if "libnccl" in line and "/" in line:
                return line[line.index("/"):].strip()
    except OSError:
        pass
    return None


class TorchSession:
    def __init__(self, config: SweepConfig, dist_ctx: DistContext | None) -> None:
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        self.backend = config.backend or default_backend()  # the one rule, measuring/config.py
        self.timing = config.timing
        if self.backend not in ("nccl", "gloo"):
            raise UsageError(f"--backend {self.backend}: the torch engine runs nccl or gloo")
        if self.backend == "nccl" and not torch.cuda.is_available():
            raise EngineUnavailable("--backend nccl needs a CUDA GPU and none is visible; "
                                    "use --backend gloo (CPU) instead")
        self.rank = dist_ctx.rank if dist_ctx else 0
        self.nranks = dist_ctx.world_size if dist_ctx else 1
        if self.backend == "nccl":
            gpus = config.gpus or tuple(range(torch.cuda.device_count()))
            if dist_ctx is None and len(gpus) > 1:
                raise UsageError(f"--engine torch drives one GPU per process; for --gpus "
                                 f"{','.join(map(str, gpus))} add --nprocs {len(gpus)} (or use torchrun)")
            self.device = torch.device("cuda", dist_ctx.gpu(gpus) if dist_ctx else gpus[0])
            torch.cuda.set_device(self.device)
        elif config.gpus:
            # gloo on GPUs: CUDA tensors, staged through the host by gloo; several ranks may share one GPU
            # (the one-GPU lab; NCCL refuses that with "Duplicate GPU detected")
            self.device = torch.device("cuda", dist_ctx.gpu(config.gpus) if dist_ctx else config.gpus[0])
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        if not dist.is_initialized():
            import datetime

            if dist_ctx is not None:
                store = dist_ctx.store
            else:
                store = dist.HashStore()
            kwargs: dict[str, Any] = {}
            if self.backend == "nccl":
                kwargs["device_id"] = self.device
            dist.init_process_group(self.backend, store=store, rank=self.rank, world_size=self.nranks,
                                    timeout=datetime.timedelta(seconds=config.timeout_s), **kwargs)
        self.info = self._info()

    def _info(self) -> dict[str, Any]:
        torch = self.torch
        rule = ("slowest rank per iteration" if self.timing == "events"
                else "host clock around the loop / iterations (nccl-tests' method); slowest rank")
        info: dict[str, Any] = {"backend": self.backend, "torch_version": torch.__version__, "timing_rule": rule}
        if self.backend == "nccl":
            v = torch.cuda.nccl.version()
            info["nccl_version"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
            info["nccl_library"] = _loaded_nccl_path() or "torch (bundled)"
            info["cuda_runtime"] = torch.version.cuda
            info["gpu_names"] = [torch.cuda.get_device_name(self.device)]
            info["devices"] = [self.device.index]
        elif self.device.type == "cuda":
            info["gpu_names"] = [torch.cuda.get_device_name(self.device)]
            info["devices"] = [self.device.index]
        else:
            info["gpu_names"] = []
            info["devices"] = []
        return info

    def free_bytes(self) -> int | None:
        if self.backend != "nccl":  # CPU ranks: their share of the host's available memory
            avail = host_available_bytes()
            return None if avail is None else avail // self.host_ranks()
        free, _ = self.torch.cuda.mem_get_info(self.device)
        return int(free)

    def host_ranks(self) -> int | None:
        """Ranks sharing this host's memory (CPU tensors), None for GPU ranks."""
        if self.backend == "nccl":
            return None
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE") or self.nranks))

    # -- measuring ------------------------------------------------------------------------------------
    def _buffers(self, case: Case, coll, k: int):
        torch = self.torch
        dtype = getattr(torch, TORCH_DTYPES[case.dtype])
        esize = torch.empty((), dtype=dtype).element_size()
        sets = []
        for _ in range(k):
            if coll.torch_inplace_only:
                buf = torch.empty(case.recv_bytes // esize, dtype=dtype, device=self.device)
                sets.append((buf, buf))
            elif case.inplace:
                big = torch.empty(max(case.send_bytes, case.recv_bytes) // esize, dtype=dtype,
                                  device=self.device)
                part = case.nccl_count
                if case.recv_bytes > case.send_bytes:  # all_gather: input is this rank's slot of the output
                    sets.append((big.narrow(0, self.rank * part, part), big))
                else:  # reduce_scatter: output is this rank's slot of the input
                    sets.append((big, big.narrow(0, self.rank * part, part)))
            else:
                sets.append((torch.empty(case.send_bytes // esize, dtype=dtype, device=self.device),
                             torch.empty(case.recv_bytes // esize, dtype=dtype, device=self.device)))
        for send, recv in sets:
            # Non-zero data. In-place all_reduce multiplies it by n each iteration, so long runs reach inf
            # (or wrap, in integer types); NCCL and gloo have no data-dependent paths, so times do not move.
            send.fill_(1)
            recv.fill_(1)
        return sets, dtype

    def measure(self, case: Case) -> Timing:
        coll = COLLECTIVES.get(case.op)
        if case.inplace and not coll.supports_inplace:
            raise UsageError(f"{case.op} has no in-place form")
        k = rotate_count(case)
        sets, dtype = self._buffers(case, coll, k)
        call = coll.torch_call
        extra: dict[str, Any] = {"buffers": case.buffers, "rotate": k, "timing": case.timing,
                                 "alloc": case.alloc if self.backend == "nccl" else "cpu"}
        if coll.torch_inplace_only and not case.inplace:
            extra["torch_inplace"] = True
        if case.graph:
            extra["graph_ignored"] = "the torch engine does not capture graphs; eager times"
        for i in range(case.warmup):
            s, r = sets[i % k]
            call(s, r)
        self._sync()
        if case.gap_s:
            extra["gap_s"] = case.gap_s
        if case.timing == "loop":
            times = self._time_loop(case, sets, call)
        elif self.backend == "nccl" and not case.gap_s:
            times = self._time_gpu(case, sets, call)
        else:
            times = self._time_host(case, sets, call)
        del sets  # free the timed buffers before the check allocates its own
        wrong = self._check(case, coll, dtype) if case.check else None
        return Timing(times_us=times, wrong=wrong, extra=extra)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def _time_host(self, case: Case, sets, call) -> list[float]:
        """Host clock around each call and its device sync. With case.gap_s (sweep --gap; with nccl too,
        launch included) each call comes alone after every rank idled that long (a barrier, then a sleep):
        what a collective that follows compute pays on a link with a token bucket, which banks while idle
        (credit.py); the barrier's few bytes cross the link before the gap, so the bucket refills in it.
        A sleep, not a spin: with more ranks than cores, spinning ranks keep gloo's threads off the cores
        (3 ranks on 2 cores at shaped:6gbit, a 1.3 MB all-gather: 8.1 ms after a spin, 4.4 ms after a
        sleep, 4.6 ms back to back: benchmarks/relate/results/cpu-lab/gap-spin-vs-sleep), and on the H100 lab a spin did not
        remove the 0.1-0.5 ms a gapped call paid over back to back at 3-6 Gbit/s either (one run slept,
        another spun, on two machines): a cost of the first call after idling that is not the link's, which
        relate's clamp reads as no credit (credit.realised_fraction)."""
        self.dist.barrier()
        times = []
        k = len(sets)
        for i in range(case.iters):
            s, r = sets[i % k]
            if case.gap_s:
                self._sync()
                self.dist.barrier()
                time.sleep(case.gap_s)
            t0 = time.perf_counter()
            call(s, r)
            self._sync()  # gloo on CUDA tensors copies back on a stream: done when the device is
            times.append((time.perf_counter() - t0) * 1e6)
        return times

    def _time_loop(self, case: Case, sets, call) -> list[float]:
        """nccl-tests' method: one host-clock figure for the whole loop, up to its last completion."""
        self._sync()
        self.dist.barrier()
        k = len(sets)
        t0 = time.perf_counter()
        for i in range(case.iters):
            s, r = sets[i % k]
            call(s, r)
        self._sync()
        return [(time.perf_counter() - t0) * 1e6 / case.iters]

    def _time_gpu(self, case: Case, sets, call) -> list[float]:
        torch = self.torch
        times: list[float] = []
        k = len(sets)
        done = 0
        while done < case.iters:
            n = min(CHUNK, case.iters - done)
            events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
            self.dist.barrier()
            # Hold the stream while the host queues n iterations (~20-40 us of launch each through
            # c10d), so that launch gaps stay out of device time: ~50 us of spin per iteration.
            torch.cuda._sleep(int(max(2e6, n * SLEEP_CYCLES_PER_ITER)))
            events[0].record()
            for i in range(n):
                s, r = sets[(done + i) % k]
                call(s, r)
                events[i + 1].record()
            events[-1].synchronize()
            times.extend(events[i].elapsed_time(events[i + 1]) * 1e3 for i in range(n))
            done += n
        return times

    def _check(self, case: Case, coll, dtype) -> int:
        sets, _ = self._buffers(case, coll, 1)
        send, recv = sets[0]
        seed = case.seed
        # Poison the output so that an element nothing wrote counts as wrong (inputs are never 0 or NaN).
        recv.fill_(float("nan") if dtype.is_floating_point else 0)
        send.copy_(input_values(seed, self.rank, 0, send.numel()))
        coll.torch_call(send, recv)
        self._sync()
        part = case.nccl_count
        expected = coll.expected(lambda r, off, n: input_values(seed, r, off, n), self.rank, self.nranks, part)
        return count_wrong(recv, expected)

    def close(self) -> None:
        if self.dist.is_initialized():
            self.dist.destroy_process_group()


def open_session(config: SweepConfig, dist: DistContext | None) -> TorchSession:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise EngineUnavailable("the torch engine needs PyTorch: pip install torch") from None
    return TorchSession(config, dist)
