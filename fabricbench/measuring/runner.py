"""Running a sweep: open a Session, time each Case, turn Timings into CollectiveResults.

    fabricbench sweep ...                 -> run_sweep() in this process (native: one process, all GPUs)
    fabricbench sweep --nprocs 4 ...      -> run_sweep() starts 4 local ranks (fabricbench/measuring/launch.py)
    torchrun ... -m fabricbench sweep     -> every rank runs run_rank(); rank 0 writes

Only rank 0 emits records. Per iteration the slowest rank's time is kept (stats.combine_slowest), wrong
elements are summed over ranks, and bandwidth comes from the collective's own formula.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import uuid
from typing import Any, Callable

from fabricbench.collectives import COLLECTIVES
from fabricbench.errors import CollectiveTimeout, UsageError
from fabricbench.measuring.config import SweepConfig
from fabricbench.measuring.engines import ENGINES
from fabricbench.measuring.plan import PlanItem, build_plan, check_fits
from fabricbench.measuring.session import Case, DistContext, Session, Timing
from fabricbench.measuring.stats import combine_slowest, summarize
from fabricbench.results.schema import CollectiveResult, header

Emit = Callable[[dict[str, Any]], None]


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def make_result(*, item: PlanItem, times: list[float] | None, wrong: int | None, nranks: int,
                config: SweepConfig, info: dict[str, Any], extra: dict[str, Any], run_id: str,
                status: str | None = None, message: str | None = None) -> CollectiveResult:
    coll = COLLECTIVES.get(item.op)
    factor = coll.busbw_factor(nranks)
    case = item.case
    st = summarize(times) if times else None
    algbw = busbw = None
    if st is not None and case is not None:
        algbw, busbw = coll.bandwidth(case.bytes, st.median, nranks)
    note = None
    if factor == 0:
        note = f"n = {nranks}: the bus-bandwidth factor {coll.factor_text} is 0, so busbw says nothing"
        busbw = None
    if status is None:
        status = "wrong" if wrong else "ok"
    if "hosts" in info:
        extra = {**extra, "hosts": info["hosts"]}
    gpus = info["gpus"] if "gpus" in info else list(config.gpus or info.get("devices", []))
    return CollectiveResult(
        op=item.op, dtype=item.dtype, bytes=case.bytes if case else 0, requested_bytes=item.requested_bytes,
        count=case.count if case else 0, nranks=nranks, gpus=gpus, inplace=item.inplace,
        graph=config.graph, iters=st.n if st else 0,
        time_us=st.median if st else None, mean_us=st.mean if st else None, min_us=st.min if st else None,
        max_us=st.max if st else None, p95_us=st.p95 if st else None, cv=st.cv if st else None,
        ci95_rel=st.ci95_rel if st else None, algbw_gbps=algbw, busbw_gbps=busbw, busbw_factor=factor,
        busbw_note=note, wrong=wrong, status=status, message=message, engine=config.engine,
        backend=info.get("backend"), timing_rule=info.get("timing_rule", "slowest GPU per iteration"),
        nccl_version=info.get("nccl_version"), nccl_library=info.get("nccl_library"),
        cuda_driver=info.get("cuda_driver"), cuda_runtime=info.get("cuda_runtime"),
        gpu_names=list(info.get("gpu_names", [])), extra=extra,
        context=header("collective", run_id=run_id, fabric=config.fabric))


class _Gather:
    """Per-case exchange of timings over the store: every rank posts, rank 0 combines."""

    def __init__(self, dist: DistContext | None, run_id: str) -> None:
        self.dist, self.run_id = dist, run_id

    def combine(self, key: str, timing: Timing) -> tuple[list[float], int | None]:
        if self.dist is None or self.dist.world_size == 1:
            return timing.times_us, timing.wrong
        d = self.dist
        d.store.set(f"{self.run_id}/{key}/{d.rank}", json.dumps([timing.times_us, timing.wrong]))
        if d.rank != 0:
            return timing.times_us, timing.wrong  # only rank 0's combination is reported
        posted = [json.loads(d.store.get(f"{self.run_id}/{key}/{r}")) for r in range(d.world_size)]
        times = combine_slowest([p[0] for p in posted])
        wrongs = [p[1] for p in posted]
        return times, None if any(w is None for w in wrongs) else sum(wrongs)

    def decide(self, key: str, more: int) -> int:
        """Rank 0's adaptive decision, shared so that every rank runs the same number of iterations."""
        if self.dist is None or self.dist.world_size == 1:
            return more
        if self.dist.rank == 0:
            self.dist.store.set(f"{self.run_id}/{key}/more", str(more))
            return more
        return int(self.dist.store.get(f"{self.run_id}/{key}/more"))


def _measure(session: Session, case: Case, config: SweepConfig, gather: _Gather, key: str):
    timing = session.measure(case)
    times, wrong = gather.combine(f"{key}/0", timing)
    extra = dict(timing.extra)
    if config.adaptive is None:
        return times, wrong, extra
    # Adaptive: more rounds of `iters` until the median's 95% CI is within the target fraction.
    rounds = 0
    while True:
        st = summarize(times)
        enough = st.ci95_rel is not None and st.ci95_rel <= config.adaptive
        more = 0 if enough or len(times) >= config.max_iters else min(config.iters, config.max_iters - len(times))
        more = gather.decide(f"{key}/{rounds}", more)
        if more == 0:
            break
        rounds += 1
        t = session.measure(dataclasses.replace(case, iters=more, warmup=0, check=False))
        more_times, _ = gather.combine(f"{key}/{rounds}", t)
        times = times + more_times
    extra["adaptive_target"] = config.adaptive
    extra["adaptive_converged"] = enough
    return times, wrong, extra


def run_rank(config: SweepConfig, dist: DistContext | None, emit: Emit, *, run_id: str,
             seed: int) -> None:
    """What every rank does. Records go to `emit` on rank 0 only."""
    engine = ENGINES.get(config.engine)
    session = engine.open_session(config, dist)
    is_root = dist is None or dist.rank == 0
    try:
        info = _all_ranks_info(dist, run_id, session.info)
        plan = build_plan(config, session.nranks, seed=seed)
        reason = check_fits(plan, session.free_bytes())
        if reason:
            raise UsageError(reason)
        gather = _Gather(dist, run_id)
        for i, item in enumerate(plan):
            if item.case is None:
                if is_root:
                    emit(make_result(item=item, times=None, wrong=None, nranks=session.nranks, config=config,
                                     info=info, extra={}, run_id=run_id, status="waived",
                                     message=item.waived).to_dict())
                continue
            try:
                times, wrong, extra = _measure(session, item.case, config, gather, f"c{i}")
            except CollectiveTimeout as e:
                if is_root:
                    emit(make_result(item=item, times=None, wrong=None, nranks=session.nranks, config=config,
                                     info=info, extra={}, run_id=run_id, status="timeout",
                                     message=str(e)).to_dict())
                raise
            if is_root:
                emit(make_result(item=item, times=times, wrong=wrong, nranks=session.nranks, config=config,
                                 info=info, extra=extra, run_id=run_id).to_dict())
    finally:
        session.close()


def _all_ranks_info(dist: DistContext | None, run_id: str, info: dict[str, Any]) -> dict[str, Any]:
    """With one rank per process, rank 0 learns every rank's GPUs and host, so records name them all."""
    if dist is None or dist.world_size == 1:
        return info
    import socket

    mine = {"devices": info.get("devices", []), "gpu_names": info.get("gpu_names", []),
            "host": socket.gethostname()}
    dist.store.set(f"{run_id}/info/{dist.rank}", json.dumps(mine))
    if dist.rank != 0:
        return info
    ranks = [json.loads(dist.store.get(f"{run_id}/info/{r}")) for r in range(dist.world_size)]
    return {**info, "gpus": [d for r in ranks for d in r["devices"]],
            "gpu_names": [n for r in ranks for n in r["gpu_names"]],
            "hosts": sorted({r["host"] for r in ranks})}


def dist_from_env() -> DistContext | None:
    """A DistContext when launched by torchrun/srun-style env:// variables, else None."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return None
    import torch.distributed as tdist

    world = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ["RANK"])
    store, rank, world = next(tdist.rendezvous("env://", rank, world))
    store = tdist.PrefixStore("fabricbench", store)
    local = int(os.environ.get("LOCAL_RANK", rank))
    return DistContext(rank=rank, world_size=world, local_rank=local, store=store)


def run_sweep(config: SweepConfig, *, writer=None, on_result: Callable[[CollectiveResult], None] | None = None,
              run_id: str | None = None) -> list[CollectiveResult]:
    """Run a whole sweep and return its results; each is also written to `writer` as it is measured."""
    run_id = run_id or new_run_id()
    seed = config.seed if config.seed is not None else random.SystemRandom().randrange(1, 2**31)
    results: list[CollectiveResult] = []

    def emit(record: dict[str, Any]) -> None:
        if writer is not None:
            writer.write(record)
        res = CollectiveResult.from_dict(record)
        results.append(res)
        if on_result is not None:
            on_result(res)

    if config.nprocs:
        from fabricbench.measuring.launch import launch_local

        launch_local(config, emit, run_id=run_id, seed=seed)
    else:
        dist = dist_from_env()
        if dist is not None:
            run_id, seed = _agree(dist, run_id, seed)
        run_rank(config, dist, emit, run_id=run_id, seed=seed)
    return results


def _agree(dist: DistContext, run_id: str, seed: int) -> tuple[str, int]:
    """Rank 0's run id and check seed for every rank: the store keys and the --check inputs depend on them."""
    if dist.rank == 0:
        dist.store.set("run", json.dumps([run_id, seed]))
    got = json.loads(dist.store.get("run"))
    return got[0], int(got[1])
