"""Running a sweep: open a Session, time each Case, turn Timings into CollectiveResults.

    fabricbench sweep ...                 -> run_sweep() in this process (native: one process, all GPUs)
    fabricbench sweep --nprocs 4 ...      -> run_sweep() starts 4 local ranks (fabricbench/measuring/launch.py)
    torchrun ... -m fabricbench sweep     -> every rank runs run_rank(); rank 0 writes

Only rank 0 emits records. Per iteration the slowest rank's time is kept (stats.combine_slowest), wrong
elements are summed over ranks, and bandwidth comes from the collective's own formula.

Imports go one way: measuring/local_rank.py (a local rank's process) -> runner.py -> launch.py (the parent
side, which knows no rank code).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import uuid
from typing import Any, Callable

from fabricbench import hostload
from fabricbench.collectives import COLLECTIVES
from fabricbench.errors import CollectiveTimeout, UsageError
from fabricbench.fabrics import get_fabric
from fabricbench.fabrics.apply import in_force, stamp
from fabricbench.jobs import heartbeat
from fabricbench.measuring import resume as resuming
from fabricbench.measuring.child import sweep_under_fabric
from fabricbench.measuring.config import SweepConfig
from fabricbench.measuring.engines import ENGINES
from fabricbench.measuring.failures import translate
from fabricbench.measuring.launch import launch_local
from fabricbench.measuring.rendezvous import agree, all_ranks_info, dist_from_env, share
from fabricbench.measuring.plan import PlanItem, build_plan, check_fits
from fabricbench.measuring.session import Case, DistContext, Session, Timing
from fabricbench.statistics.figures import combine_slowest, summarize
from fabricbench.results.context import nccl_choice
from fabricbench.results.schema import CollectiveResult, header
from fabricbench.results.status import Status

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
        status = Status.WRONG if wrong else Status.OK
    if "hosts" in info:
        extra = {**extra, "hosts": info["hosts"]}
    gpus = record_gpus(config, info)
    algo, proto = nccl_choice() if info.get("backend", "nccl") == "nccl" else (None, None)
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
        gpu_names=list(info.get("gpu_names", [])), nccl_algo=algo, nccl_proto=proto, extra=extra,
        context=header("collective", run_id=run_id, fabric=config.fabric))


def record_gpus(config: SweepConfig, info: dict[str, Any]) -> list[int]:
    """The GPUs a record names: every rank's (gathered by rank 0), else this process's."""
    return info["gpus"] if "gpus" in info else list(config.gpus or info.get("devices", []))


def _translated(e: BaseException, timeout_s: float) -> BaseException:
    err = translate(e, timeout_s)
    return e if err is None else err


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


def run_rank(config: SweepConfig, dist: DistContext | None, emit: Emit, *, run_id: str, seed: int,
             prior: list[dict[str, Any]] | None = None, reused: Emit | None = None,
             on_skip: Callable[[int, int], None] | None = None) -> None:
    """What every rank does. Records go to `emit` on rank 0 only.

    `prior` (rank 0's, --resume): records of earlier runs. A planned item one of them holds is skipped on
    every rank, and rank 0 hands that record to `reused` instead; on_skip(skipped, planned) once."""
    engine = ENGINES.get(config.engine)
    try:
        session = engine.open_session(config, dist)
    except Exception as e:
        err = _translated(e, config.timeout_s)
        if err is e:
            raise
        raise err from None
    is_root = dist is None or dist.rank == 0
    settings = resuming.settings(config)
    try:
        info = all_ranks_info(dist, run_id, session.info)
        for host, snap in (info.get("node_topologies") or {}).items() if is_root else ():
            # another node's wiring (sweep_run.py wrote this one's): the file names every node's
            emit({**header("topology", run_id=run_id, fabric=config.fabric), **snap, "host": host})
        plan = build_plan(config, session.nranks, seed=seed)
        reason = check_fits(plan, session.free_bytes(), host_ranks=session.host_ranks())
        if reason:
            raise UsageError(reason)
        held: dict[int, dict[str, Any]] = {}
        if is_root and prior:
            held = resuming.match(plan, prior, config, nranks=session.nranks, gpus=record_gpus(config, info),
                                  backend=info.get("backend"))
        skip = set(share(dist, run_id, "resume", sorted(held)))  # every rank skips the same items
        if is_root and on_skip is not None and prior is not None:
            on_skip(*resuming.skip_counts(plan, skip))
        gather = _Gather(dist, run_id)
        for i, item in enumerate(plan):
            if i in skip:
                if is_root and reused is not None:
                    reused(held[i])
                continue
            if item.case is None:
                if is_root:
                    emit(make_result(item=item, times=None, wrong=None, nranks=session.nranks, config=config,
                                     info=info, extra={"settings": settings}, run_id=run_id, status=Status.WAIVED,
                                     message=item.waived).to_dict())
                continue
            try:
                times, wrong, extra = _measure(session, item.case, config, gather, f"c{i}")
            except Exception as e:
                err = _translated(e, config.timeout_s)
                if is_root and isinstance(err, CollectiveTimeout):  # where it hung, kept in the results
                    emit(make_result(item=item, times=None, wrong=None, nranks=session.nranks, config=config,
                                     info=info, extra={"settings": settings}, run_id=run_id, status=Status.TIMEOUT,
                                     message=str(err)).to_dict())
                if err is e:
                    raise
                raise err from None
            if is_root:
                emit(make_result(item=item, times=times, wrong=wrong, nranks=session.nranks, config=config,
                                 info=info, extra={**extra, "settings": settings}, run_id=run_id).to_dict())
    except Exception as e:
        err = _translated(e, config.timeout_s)
        if err is e:
            raise
        raise err from None
    finally:
        session.close()


def run_sweep(config: SweepConfig, *, writer=None, on_result: Callable[[CollectiveResult], None] | None = None,
              run_id: str | None = None, resume: resuming.Resume | None = None) -> list[CollectiveResult]:
    """Run a whole sweep and return its results in plan order; each is also written to `writer` as it is
    measured. With `resume`, items it already holds are not measured: their records are returned (and
    given to on_result) but not written again; resume.skipped says how many measurements that saved."""
    run_id = run_id or new_run_id()
    seed = config.seed if config.seed is not None else random.SystemRandom().randrange(1, 2**31)
    results: list[CollectiveResult] = []

    delegated = not in_force(config.fabric)
    here = None if delegated else _applied_here(config.fabric)
    if here is not None:  # records name the fabric, never a custom spec's values (extra.settings too)
        config = dataclasses.replace(config, fabric=here.name)

    watch = _host_watch(config) if not delegated else None  # a delegated sweep's child watches its own

    def emit(record: dict[str, Any]) -> None:
        if record.get("kind") == "topology":  # another node's snapshot (all_ranks_info): written, no result
            if writer is not None:
                writer.write(record)
            return
        if here is not None and record.get("kind") == "collective":
            stamp(record, here)  # a parent applied the fabric: the record still says its rate and variables
        lap = watch.lap() if watch is not None and record.get("kind") == "collective" else None
        if lap is not None:  # the other processes' load while it was measured (hostload.LAP_S at least)
            record.setdefault(hostload.FIELD, lap.to_dict())
        if writer is not None:
            writer.write(record)
        reuse(record)

    def reuse(record: dict[str, Any]) -> None:
        res = CollectiveResult.from_dict(record)
        results.append(res)
        if on_result is not None:
            on_result(res)

    def on_skip(skipped: int, planned: int) -> None:
        if resume is not None:
            resume.skipped = skipped
            if resume.on_skip is not None:
                resume.on_skip(skipped, planned)

    prior = list(resume.records) if resume is not None else None
    with watch or contextlib.nullcontext():
        _dispatch(config, delegated, emit, run_id=run_id, seed=seed, prior=prior, reuse=reuse, on_skip=on_skip)
    return results


def _host_watch(config: SweepConfig) -> hostload.Watch | None:
    """Rank 0's watch on the host's load (the rank that writes the records). The run's processes are this
    one's tree; a rank a launcher started (torchrun, srun: WORLD_SIZE without --nprocs) shares the
    launcher's with its sibling ranks, whose CPU is the run's, not another job's."""
    if int(os.environ.get("RANK", "0")) != 0:
        return None
    launched = "WORLD_SIZE" in os.environ and not config.nprocs
    return hostload.watch(root=os.getppid() if launched else os.getpid())


def _dispatch(config: SweepConfig, delegated: bool, emit, *, run_id: str, seed: int, prior, reuse,
              on_skip) -> None:
    """Where the sweep runs: a child under the fabric, --nprocs local ranks, or this process as a rank."""
    if delegated:
        # NCCL reads its variables once per process (and shaped:RATE needs a namespace): the fabric is
        # applied to a fresh child sweep, whose records stream back through emit (measuring/child.py).
        sweep_under_fabric(config, emit, run_id=run_id, prior=prior, reused=reuse, on_skip=on_skip)
    elif config.nprocs:
        launch_local(config, emit, run_id=run_id, seed=seed, prior=prior, reused=reuse, on_skip=on_skip)
    else:
        dist = dist_from_env(config.timeout_s)
        if dist is not None:
            heartbeat.watch_this_rank(config.stall_timeout_s)  # a stopped or lost rank ends every node's run
            run_id, seed = agree(dist, run_id, seed)
        run_rank(config, dist, emit, run_id=run_id, seed=seed, prior=prior if _is_root(dist) else None,
                 reused=reuse, on_skip=on_skip)


def _applied_here(spec: str):
    """The fabric a parent put this process under, when `spec` is a full definition; None for a plain
    fabric, and for the bare name a delegating sweep gives its child (that parent annotates the records)."""
    try:
        fabric = get_fabric(spec)
    except UsageError:
        return None
    return None if fabric.plain else fabric


def _is_root(dist: DistContext | None) -> bool:
    return dist is None or dist.rank == 0
