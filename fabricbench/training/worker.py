"""One rank of one strategy run; started by the launcher (fabricbench/training/launch.py), never by hand.

    python -m torch.distributed.run --nproc-per-node 2 -m fabricbench.training.worker SPEC.json

Builds the Accelerator of the strategy, a randomly initialised model, AdamW, and trains --steps steps on
its batches, timing each step (device synchronised on both ends); with a target CI it goes on until the
median step's 95% CI is within it (at most max_steps). Between backward and the optimizer
step of step 1 it counts what it holds (verify.py). After every step it rewrites <run_dir>/rank-<r>.json
whole (a temporary file, then os.replace) with "status": Status.RUNNING and the steps so far, so that a rank
that dies later keeps them. Then --trace-steps more steps run under torch.profiler, untimed, for the
communication trace (trace.py), and the file gets its final status; the launcher joins the ranks into
one record. Progress (start-up phases, each step) and the channel pulse go over the job's channel
(fabricbench/jobs/channel.py), so the launcher names a rank that stops answering within --timeout.
Out of memory is written as status "oom" and the process exits
with OOM_EXIT so that the launcher tears the other ranks down instead of letting them wait.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from fabricbench.exitcodes import Exit
from fabricbench.jobs import channel, heartbeat
from fabricbench.measuring import failures
from fabricbench.statistics.figures import summarize
from fabricbench.results.status import Status
from fabricbench.training import data, faults, lean, models, one_node, phases, trace, verify
from fabricbench.training.spec import RankSpec
from fabricbench.training.strategies import STRATEGIES

OOM_EXIT = Exit.OUT_OF_MEMORY  # a status of its own: the launcher reads the rank file, a person the number
STALL_EXIT = heartbeat.STALL_EXIT  # the one code for a rank the stall watchdog ended (jobs/heartbeat.py)
VERIFY_STEP = 1  # the second step: Adam's state exists, gradients are alive before step()


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _memory(device: Any) -> dict[str, int | None]:
    import torch

    if device.type != "cuda":
        return {"peak_allocated_bytes": None, "peak_reserved_bytes": None}
    return {"peak_allocated_bytes": int(torch.cuda.max_memory_allocated(device)),
            "peak_reserved_bytes": int(torch.cuda.max_memory_reserved(device))}


_WRITE = threading.Lock()  # the main thread and the stall watchdog's both write the rank file


def _write_atomic(path: Path, doc: dict[str, Any]) -> None:
    """Replace the rank file whole: a reader (the launcher, after a crash) sees the old or the new one."""
    with _WRITE:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(doc, default=str))
        os.replace(tmp, path)


def _on_stall(out: dict[str, Any], rank_file: Path, ch: channel.Channel | None):
    """The watchdog's verdict -> this rank's file says who stalled (the steps so far kept), the launcher is
    told at once over the channel, and this rank exits (its peers' watchdogs do the same)."""
    def stalled(message: str, ranks: list[int]) -> None:
        out.update(status=Status.ERROR, message=message, culprit_ranks=ranks, stalled=True)
        try:
            _write_atomic(rank_file, dict(out))
            if ch is not None:
                ch.error("RankStalled", message, stalled=f"rank {ranks[0]}", ranks=ranks)
        finally:
            sys.stderr.flush()
            os._exit(STALL_EXIT)
    return stalled


def _gather(out: dict[str, Any], rank_file: Path, world: int) -> None:
    """Across nodes: every rank's file reaches every node (the ranks of the other nodes write theirs on
    their own disks), so that rank 0's record holds every rank's memory, holdings, trace and host."""
    import torch

    dist = torch.distributed
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if world < 2 or local >= world or not dist.is_initialized():
        return
    docs: list[Any] = [None] * world
    dist.all_gather_object(docs, out)
    if int(os.environ.get("LOCAL_RANK", 0)) != 0:
        return
    for doc in docs:
        r = int((doc or {}).get("rank", -1))
        path = rank_file.with_name(f"rank-{r}.json")
        if r >= 0 and not path.exists():
            _write_atomic(path, doc)


def _trace(one_step: Callable[[int], tuple[float, float]], *, steps: int, device: Any, world: int, run_dir: Path,
           name: str) -> dict[str, Any]:
    """`steps` more steps under the profiler -> this rank's summary (trace.py).

    A step that fails fails the rank as any step does (its peers must not wait for it in a collective);
    a profiler that will not start (on every rank alike) or a profile that cannot be read is a note in the
    record, and the timed steps stand."""
    prof = trace.profiler(device.type, steps)
    try:
        prof.start()
    except Exception as e:  # noqa: BLE001 - e.g. no CUPTI: the trace is an addition
        return {"error": f"the profiler did not start: {type(e).__name__}: {str(e)[:200]}"}
    times = []
    try:
        dropped = trace.warmup_steps(device.type)
        for i in range(dropped + steps):
            with trace.step_mark():
                t, _loss = one_step(-1)
            prof.step()
            if i >= dropped:  # the warm-up's events are dropped, and its time with them
                times.append(t)
    finally:
        prof.stop()
    try:
        with trace.collector_paused():
            events = trace.export_events(prof, run_dir / f"profile-{name}.json")
            return trace.rank_summary(events, device_type=device.type, world_size=world, steps=steps,
                                      step_times_s=times, groups=trace.group_sizes())
    except Exception as e:  # noqa: BLE001 - the trace is an addition; never lose the measured steps for it
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]}


def nccl_loaded() -> dict[str, Any]:
    """The NCCL this process loaded: torch's ncclGetVersion and the library's path from the process's own
    memory map (never the NCCL_VERSION variable a container image sets, which names no library)."""
    import torch

    try:
        v = torch.cuda.nccl.version()
        version = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception as e:  # noqa: BLE001 - a torch without NCCL: say so, the run goes on
        return {"version": None, "library": None, "note": f"{type(e).__name__}: {e}"[:200]}
    path = None
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            if "libnccl" in line and "/" in line:
                path = line[line.index("/"):].strip()
                break
    except OSError:
        pass
    return {"version": version, "library": path}


def _more_steps(spec: RankSpec, *, world: int, device: Any) -> Callable[[list[float]], bool]:
    """Whether to run one more step after the minimum (spec.steps): until the median's 95% CI of the
    timed steps is within spec.target_ci (as `sweep --adaptive` does), at most spec.max_steps in all.
    Rank 0 decides on its own times and the decision is broadcast (outside the timed window), so that every
    rank runs the same steps and none waits in a collective for a peer that stopped."""
    import torch

    target, cap = spec.target_ci, spec.max_steps
    if not target or cap <= spec.steps:
        return lambda times: False
    warm = spec.warmup_steps
    dist = torch.distributed
    flag_device = device if dist.is_initialized() and dist.get_backend() == "nccl" else torch.device("cpu")

    def more(times: list[float]) -> bool:
        if len(times) >= cap:
            return False
        ci = summarize(times[warm:]).ci95_rel if len(times) > warm else None
        go = ci is None or ci > target
        if world > 1 and dist.is_initialized():
            flag = torch.tensor([1 if go else 0], dtype=torch.int32, device=flag_device)
            dist.broadcast(flag, src=0)
            go = bool(flag.item())
        return go

    return more


def _imports(engine: str, resolved: models.ResolvedModel) -> Any:
    """What this strategy needs, imported before anything is timed as init: torch, Accelerate, the model's
    class; DeepSpeed only for the ZeRO strategies (DDP and FSDP never load it). -> the store rank 0 hosts
    early (one_node.early_store), to be kept until the process group is made."""
    import torch  # noqa: F401
    import torch.distributed  # noqa: F401

    store = one_node.early_store()
    from accelerate import Accelerator  # noqa: F401

    models.model_class(resolved)
    if engine == "deepspeed":
        import deepspeed  # noqa: F401
    return store


def _init(spec: RankSpec, strategy: Any, out: dict[str, Any]) -> bool:
    """CUDA (the rank's device) and the process group -> whether this rank is on a GPU."""
    import torch

    on_gpu = spec.device == "cuda"
    if on_gpu and spec.local_devices:
        # Several ranks on one GPU (the gloo lab): Accelerate and DeepSpeed take the device from
        # LOCAL_RANK, which would name a GPU that is not there; each rank gets its GPU's index instead.
        os.environ["LOCAL_RANK"] = str(spec.local_devices[int(os.environ.get("LOCAL_RANK", 0))])
    if on_gpu:  # initialise on the GPU: a 7e9 model takes minutes on the host and 29 GB of its memory
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        out["nccl"] = nccl_loaded()
    if "WORLD_SIZE" in os.environ and not torch.distributed.is_initialized():
        # the process group on the decided backend (gloo on GPUs: the one-GPU lab), here rather than inside
        # Accelerate, so that its cost is the init phase's; Accelerate and DeepSpeed take it as it is. (A
        # rank run by hand, with no launcher's variables, is one process: Accelerate needs no group.)
        torch.distributed.init_process_group(backend=spec.backend)
        if strategy.engine == "deepspeed":
            import deepspeed

            deepspeed.init_distributed(dist_backend=spec.backend)
    return on_gpu


def _wrap(spec: RankSpec, strategy: Any, module: Any, layer_classes: list[str], on_gpu: bool,
          out: dict[str, Any]) -> tuple[Any, Any, Any, int, int]:
    """The strategy's Accelerator, the optimizer, prepare -> (acc, model, optimizer, rank, world)."""
    import torch

    acc = strategy.make_accelerator(batch_size=spec.batch_size, layer_classes=layer_classes,
                                    device=spec.device, precision=spec.precision)
    # The world the collectives span. On CPU Accelerate hands DeepSpeed the process group but keeps
    # num_processes = 1 for itself (accelerate/state.py, no backend for cpu=False), so ask torch.
    dist = torch.distributed
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    out.update(world_size=world, accelerate_num_processes=acc.num_processes,
               distributed_type=str(acc.distributed_type), mixed_precision=str(acc.mixed_precision),
               backend=dist.get_backend() if dist.is_initialized() else None)
    # fused on GPU: the foreach form makes whole-model temporaries (sqrt of v...), which alone would
    # push mistral-7b under DDP out of memory; the update is the same AdamW
    optimizer = torch.optim.AdamW(module.parameters(), lr=spec.lr, weight_decay=0.0, fused=on_gpu)
    model, optimizer = acc.prepare(module, optimizer)
    return acc, model, optimizer, rank, world


def _stepper(spec: RankSpec, *, acc: Any, model: Any, optimizer: Any, feed: Any, device: Any, engine: tuple,
             out: dict[str, Any], hb: Any, ch: channel.Channel | None) -> Callable[[int], tuple[float, float]]:
    """One optimizer step -> (seconds, loss), the device synchronised at both ends; step -1 is a profiled
    one. The step holds no fault point: a test's fault wraps it from outside (faults.wrap)."""
    def one_step(step: int) -> tuple[float, float]:
        batch = next(feed)
        _sync(device)
        t0 = time.perf_counter()
        loss = model(**batch).loss
        if engine[0] == "deepspeed":  # what Accelerate's DeepSpeedEngineWrapper.backward does, split
            model.backward(loss)
            if step == VERIFY_STEP:
                out["holdings"] = verify.holdings(model, optimizer).as_dict()
            model.step()
        else:
            acc.backward(loss)
            if step == VERIFY_STEP:
                out["holdings"] = verify.holdings(model, optimizer).as_dict()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        _sync(device)
        took, value = time.perf_counter() - t0, float(loss.detach().float().item())
        if hb is not None:
            hb.progress(step + 1 if step >= 0 else None)
        if ch is not None:  # the launcher's stall clock restarts with every step, profiled ones too
            ch.progress(**({"step": step + 1, "steps": spec.steps} if step >= 0 else {"phase": "profiled step"}))
        return took, value

    if spec.fault:
        return faults.wrap(one_step, spec.fault)
    return one_step


def _train(spec: RankSpec, one_step: Callable[[int], tuple[float, float]], more: Callable[[list[float]], bool], *,
           out: dict[str, Any], rank_file: Path, marks: phases.Marks) -> None:
    """The steps: the first, the other warm-up steps, then the timed ones; the rank file after each."""
    times: list[float] = []
    losses: list[float] = []
    out["status"] = Status.RUNNING
    step = 0
    while step < spec.steps or more(times):
        t, loss = one_step(step)
        times.append(t)
        losses.append(loss)
        out.update(step_times_s=times, losses=losses, phases=marks.as_dict())
        _write_atomic(rank_file, out)  # a rank that dies later keeps its steps
        step += 1
        if step == 1:
            marks.mark("first_step")
        if step == spec.warmup_steps:
            marks.mark("warmup")
    marks.mark("timed")


def run(spec: RankSpec, rank_file: Path, ch: channel.Channel | None = None,
        marks: phases.Marks | None = None) -> int:
    """This rank's run, start to end -> its exit status (0, OOM_EXIT, 1); its file says what happened."""
    marks = marks or phases.Marks()
    strategy = STRATEGIES.get(spec.strategy)
    out: dict[str, Any] = {"rank": int(os.environ.get("RANK", 0)), "status": Status.OK, "message": None,
                           "host": socket.gethostname(), "node_rank": int(os.environ.get("GROUP_RANK") or os.environ.get("SLURM_NODEID") or 0)}
    resolved = models.resolve(name=spec.model, config_file=spec.model_config, path=spec.model_path,
                              seq_len=spec.seq_len)
    store = _imports(strategy.engine, resolved)  # noqa: F841 - held: the server lives while it does
    marks.mark("imports")
    import torch

    device = torch.device("cpu")
    hb = None
    try:
        torch.manual_seed(spec.seed)
        on_gpu = _init(spec, strategy, out)
        marks.mark("init")
        module = models.build(resolved, device=torch.device("cuda", torch.cuda.current_device()) if on_gpu else None)
        models.freeze_unused(module)
        out["model_impl"] = resolved.impl  # fabricbench's own module, or transformers
        # Ψ as built (shared tensors once): the launcher's figure where the model's family has no formula
        out["params"] = sum(p.numel() for p in module.parameters())
        marks.mark("build")
        acc, model, optimizer, rank, world = _wrap(spec, strategy, module,
                                                   models.block_class_names(module, resolved.layer_class), on_gpu, out)
        device = acc.device
        if world > 1:  # the group exists: its store is where the ranks' heartbeats meet (jobs/heartbeat.py)
            hb = heartbeat.from_env(stall_s=spec.stall_timeout_s, on_stall=_on_stall(out, rank_file, ch))
        if ch is not None:
            ch.progress(phase="prepared")
        engine = verify.engine_of(model)
        out.update(engine=engine[0], zero_stage=engine[1], wrapper=type(model).__name__)
        if device.type == "cuda":
            out["gpu_name"] = torch.cuda.get_device_name(device)
        feed = data.batches(task=resolved.task, config=resolved.config, batch_size=spec.batch_size,
                            seq_len=spec.seq_len, image_size=spec.image_size, dataset=spec.dataset,
                            rank=rank, world=world, device=device, seed=spec.seed)
        marks.mark("wrap")
        one_step = _stepper(spec, acc=acc, model=model, optimizer=optimizer, feed=feed, device=device,
                            engine=engine, out=out, hb=hb, ch=ch)
        _train(spec, one_step, _more_steps(spec, world=world, device=device), out=out, rank_file=rank_file,
               marks=marks)
        out.update(status=Status.OK, **_memory(device))  # the peaks of the timed steps, before the profiler's
        if spec.trace_steps > 0:
            out["comm"] = _trace(one_step, steps=spec.trace_steps, device=device,
                                 world=world, run_dir=rank_file.parent, name=f"{strategy.name}-rank-{rank}")
        marks.mark("trace")
        _gather(out, rank_file, world)
        code = Exit.OK
    except torch.cuda.OutOfMemoryError as e:
        out.update(status=Status.OOM, message=str(e).splitlines()[0][:300], **_memory(device))
        code = OOM_EXIT
    except Exception as e:  # noqa: BLE001 - any failure of a rank becomes the record's message
        # once, on one line: what this host lacks (every strategy would fail alike: the launcher stops the
        # command), else the exception's first line, its traceback in the job's log file (measuring.failures)
        setup = failures.setup_error(e)
        own = str(setup) if setup is not None else failures.first_line(e, f"rank {out['rank']}")
        out.update(status=Status.ERROR, message=own)
        if setup is not None:
            out["error_kind"] = type(setup).__name__
        # a peer that died (its node killed) fails this rank's collective with "Connection reset by peer":
        # the peer whose heartbeat stopped is the cause, named with its host, not this rank
        blame = hb.failed(own) if hb is not None else None
        if blame is not None:
            out.update(message=f"{blame[0]} (rank {out['rank']} then failed: {own[:200]})", culprit_ranks=blame[1])
        code = Exit.FAILED
    if hb is not None:
        hb.finish()
    marks.mark("end")
    out["phases"] = marks.as_dict()
    _write_atomic(rank_file, out)
    if ch is not None and code != 0:  # said before the exit: the job runner names this rank for its reason
        ch.error("OutOfMemory" if code == OOM_EXIT else "RankFailed", str(out.get("message")))
    if code == 0:
        one_node.leave_together()
    return code


def main(argv: list[str]) -> None:
    """`worker SPEC.json [--rank R]`: under torchrun the rank comes from its variables; launched directly
    (one node: training/launch.py) the launcher names it, and the rest of torchrun's variables (WORLD_SIZE,
    MASTER_ADDR, ...) are in the environment all ranks share."""
    marks = phases.Marks()
    if len(argv) == 3 and argv[1] == "--rank":
        os.environ["RANK"] = os.environ["LOCAL_RANK"] = argv[2]
    rank = int(os.environ.get("RANK", 0))
    ch = channel.open_channel(f"rank {rank}")  # first: its pulse covers the start-up too
    spec = RankSpec.read(argv[0])
    # first, before anything imports transformers (a --model-config is read with it): what transformers
    # would import for work no training step does; only here, in a rank's own process
    lean.hide_unused(STRATEGIES.get(spec.strategy).engine)
    code = run(spec, Path(spec.run_dir) / f"rank-{rank}.json", ch, marks)
    sys.stdout.flush()
    os._exit(code)  # skip interpreter teardown: NCCL/DeepSpeed atexit hooks can hang after an OOM


if __name__ == "__main__":
    main(sys.argv[1:])
