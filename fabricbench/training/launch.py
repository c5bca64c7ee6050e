"""Run strategies one after another, each in fresh processes, and write one record each.

    fabricbench train --strategy all --model tiny-mistral --device cpu --nprocs 2 --steps 6 --out t.jsonl

For every strategy: "waived" when it cannot run here (DeepSpeed missing), else its ranks of
fabricbench/training/worker.py (one process per GPU, the fabric's environment): on one node started by the
job layer itself with the variables torchrun would set (rank_commands: no agent, no rendezvous to pay for),
across nodes under torchrun (`python -m torch.distributed.run`, where nodes must meet). They run as a job
(fabricbench/jobs): each rank reports its start-up and every step over the job's channel, so a rank
silent for --timeout s is named ("rank 1 stopped answering") and every process is killed then, not when a
whole-run limit runs out. The ranks' files are joined into one
kind "train" record:
- status "ok"; "error" when a rank failed or when what ran is not the strategy asked for (verify.py; the
  message says what actually ran), never a result; "oom" with the estimate beside it; "flagged" when the
  loss did not fall; "waived" with the reason.
- the step-time statistics and throughput of the steps after the warm-up (metrics.py), peak memory per
  rank beside the framework recipe's estimate (estimate.py), the bytes each rank held.
An "oom" or an "error" does not stop the strategies after it; a rank that failed on what this host lacks
(an interface the fabric named: join.setup_failure) stops the command with that one line (exit 2).

What a run is (TrainConfig, checked when built) lives in training/config.py; joining the rank files and
naming the rank that failed, in training/join.py.
"""

from __future__ import annotations

import math
import os
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import fabricbench
from fabricbench import hostload, jobs, procs
from fabricbench.cluster import nodewatch
from fabricbench.fabrics import get_fabric
from fabricbench.progress import Progress
from fabricbench.results import ResultWriter, header
from fabricbench.results.context import package_version
from fabricbench.results.schema import UNSET, TrainResult
from fabricbench.results.status import Status
from fabricbench.training import data, estimate, faults, metrics, models, phases, repeats
from fabricbench.training.config import STARTUP_S, TrainConfig, local_devices
from fabricbench.training.join import interrupted, rank_files, unfinished, join_ranks, setup_failure
from fabricbench.training.spec import RankSpec
from fabricbench.training.strategies import STRATEGIES
from fabricbench.training.strategies.base import accelerate_precision

LIBRARIES = ("torch", "accelerate", "transformers", "deepspeed")
MIN_RDZV_S = 5.0  # the shortest rendezvous bound handed to torchrun
WATCHDOG_FIRST_S = 10.0  # this process's own stall verdict waits this long past --stall-timeout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_env(config: TrainConfig) -> dict[str, str]:
    """The ranks' environment before the fabric is applied (jobs.run applies it)."""
    env = dict(os.environ)
    root = str(Path(fabricbench.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("ACCELERATE_USE_DEEPSPEED", None)  # the zero strategies set it themselves, in their processes
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    if config.device == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, dict.fromkeys(config.gpus)))
    else:
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["DS_ACCELERATOR"] = "cpu"  # DeepSpeed's CPU accelerator (gloo)
        env.setdefault("OMP_NUM_THREADS", "1")
    env.update(config.extra_env)
    return env


def launch_command(config: TrainConfig, spec_path: Path, *, rdzv_s: float | None = None) -> list[str]:
    """torchrun, where nodes must meet (--nnodes above 1), whose ranks start under fabricbench.procs' guard:
    torchrun puts each rank in a session of its own, out of reach of a group kill, so each rank asks for
    the death signal itself. `rdzv_s`: the nodes' rendezvous bound (default --timeout)."""
    port = config.master_port if config.master_port is not None else _free_port()
    # --timeout bounds the nodes' meeting too: the static rendezvous's store waits `timeout` s for every
    # node (else its own 600 s, whatever --timeout says)
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={config.procs_per_node}",
            f"--nnodes={config.nnodes}", f"--node-rank={config.node_rank}",
            f"--master-addr={config.master_addr}", f"--master-port={port}",
            f"--rdzv-conf=timeout={max(1, math.ceil(config.timeout_s if rdzv_s is None else rdzv_s))}",
            *procs.guard_argv("fabricbench.training.worker", str(spec_path))]


def rank_commands(config: TrainConfig, spec_path: Path, env: dict[str, str]) -> dict[str, list[str]]:
    """One node: the ranks started by the job layer itself, one named process each, with torchrun's
    variables set here (added to `env`). torchrun's agent would cost a Python with torch imported and a
    rendezvous before any rank starts, for nothing that one node needs: the job layer already supervises
    each rank (its group, its death with us, its stall, its exit)."""
    port = config.master_port if config.master_port is not None else _free_port()
    n = config.procs_per_node
    env.update(MASTER_ADDR=config.master_addr, MASTER_PORT=str(port), WORLD_SIZE=str(n),
               LOCAL_WORLD_SIZE=str(n), GROUP_RANK="0", NODE_RANK="0", GROUP_WORLD_SIZE="1")
    # what torchrun's agent sets unless the user did, so that a rank runs as it did under torchrun: one
    # OpenMP thread per rank where there are several (torch/distributed/run.py), NCCL's watchdog tearing a
    # failed rank down (elastic/agent/server/local_elastic_agent.py)
    if n > 1:
        env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    return {f"rank {r}": [sys.executable, "-m", "fabricbench.training.worker", str(spec_path), "--rank", str(r)]
            for r in range(n)}


def _rank_of(who: str | None) -> int | None:
    """"rank 3" -> 3; None for anything else."""
    return int(who.split()[-1]) if who and who.startswith("rank ") and who.split()[-1].isdigit() else None


def run_strategy(config: TrainConfig, name: str, resolved: models.ResolvedModel, psi: int | None, *,
                 on_progress=None, rdzv_s: float | None = None, begun: float | None = None) -> dict[str, Any]:
    """One strategy in fresh processes -> the record body (without the header); `on_progress(who, data)`
    sees each rank's steps (jobs.run); `rdzv_s`: the nodes' rendezvous bound (default --timeout). `psi`
    None: a model with no formula, whose ranks count Ψ on the model they build (their files say it).
    `begun`: when the user's wait for this run began (the command's start for its first run; default now),
    the start of its phases."""
    begun = time.time() if begun is None else begun
    strategy = STRATEGIES.get(name)
    body = _base_body(config, name, resolved, psi)
    why = strategy.unavailable()
    if why:
        return {**body, "status": Status.WAIVED, "message": why}
    fabric = get_fabric(config.fabric)
    body.update(fabric_env=fabric.public_variables, shaped_rate_bps=fabric.rate_bps)
    env = worker_env(config)
    try:  # the launcher decides once whether a test asked for a fault; the ranks' step has no fault point
        fault = faults.armed("oom", name, env)
    except ValueError as e:
        return {**body, "status": Status.ERROR, "message": str(e)}
    spawned: list[float] = []
    with jobs.workspace(f"train-{name}") as run_dir:  # removed on Ctrl-C/SIGTERM too; after a SIGKILL, next start
        spec_path = run_dir / "spec.json"
        RankSpec.of(config, name, run_dir=run_dir, fabric=fabric.name, fault=fault,
                    local_devices=local_devices(config)).write(spec_path)
        argv = launch_command(config, spec_path, rdzv_s=rdzv_s) if config.nnodes > 1 else \
            rank_commands(config, spec_path, env)
        # jobs.run: the fabric applied (environment; the ranks inside the namespace of shaped:RATE), each
        # process in its own process group, dead with us; a rank silent for --timeout s (or --stall-timeout),
        # a rank's own stall watchdog naming a peer (on any node), a rank that failed (one node), the budget
        # or Ctrl-C/SIGTERM end every rank before this returns or raises.
        # (the ranks' own watchdogs speak first: they see every node, this process only its own ranks)
        stall_s = min(config.timeout_s, (config.stall_timeout_s or math.inf) + WATCHDOG_FIRST_S)
        try:
            res = jobs.run(argv, workspace=run_dir, env=env, fabric=fabric,
                           stall_s=stall_s, startup_s=max(config.timeout_s, STARTUP_S),
                           budget_s=config.budget_s, on_start=lambda _launch: spawned.append(time.time()),
                           expect=[f"rank {r}" for r in config.local_ranks], on_progress=on_progress)
        except KeyboardInterrupt as e:  # the ranks are ended; their files still here say the steps they finished
            e.partial = {**body, **interrupted(config, rank_files(run_dir), by=procs.said_by(e))}  # type: ignore
            raise
        gone = time.time()
        for w in res.warnings:
            print(f"warning: {w}", file=sys.stderr)
        if res.waived:
            return {**body, "status": Status.WAIVED, "message": res.waived}
        rc, log = res.returncode, res.stdout + res.stderr
        if res.message:
            log = f"{res.message}; the ranks{' and torchrun' if config.nnodes > 1 else ''} were killed\n{log}"
        ranks = rank_files(run_dir)
    setup = setup_failure(ranks)
    if setup is not None:  # this host lacks what the run named: said once, and no strategy retries it
        raise setup
    exits = {_rank_of(w): code for w, code in res.returncodes.items()}
    cut = unfinished(config, ranks, rc=rc, log=log, timed_out=res.timed_out, stalled=_rank_of(res.stalled),
                     why=res.message, culprit=_rank_of(res.failed), exits=exits)
    if psi is None:  # counted by the ranks on the model they built (the same on every rank)
        psi = next((r["params"] for r in ranks if isinstance(r.get("params"), int)), None)
        body = _base_body(config, name, resolved, psi)
    if cut is None and psi is None:
        cut = {"status": Status.ERROR, "message": "no rank reported the model's parameter count"}
    out = {**body, **(cut if cut is not None else
                      join_ranks(config, strategy.name, ranks, rc=rc, log=log, psi=psi))}
    local = [r for r in ranks if r.get("rank") in config.local_ranks]
    timing = phases.join(local, begun=begun, spawned=spawned[0] if spawned else begun, gone=gone)
    if timing is not None:
        out["phases"] = timing
    return out


def _base_body(config: TrainConfig, name: str, resolved: models.ResolvedModel,
               psi: int | None) -> dict[str, Any]:
    """What a record says before its ranks run; with `psi` None (not counted yet) no Ψ and no estimate."""
    tps = estimate.tokens_per_sample(resolved.config, task=resolved.task, seq_len=config.seq_len,
                                     image_size=config.image_size)
    precision = config.run_precision
    recipe = "framework-fp32" if precision == "fp32" else "framework"
    act = estimate.activation_bytes(resolved.config, task=resolved.task, batch_size=config.batch_size,
                                    seq_len=config.seq_len, image_size=config.image_size, precision=precision)
    states = estimate.model_states(psi=psi, num_gpus=config.world_size, recipe=recipe)[name] if psi else None
    return {
        "strategy": name, "model": resolved.name, "task": resolved.task, "params": psi,
        "batch_size": config.batch_size, "global_batch": config.batch_size * config.world_size,
        "seq_len": config.seq_len if resolved.task == models.CAUSAL_LM else None,
        "image_size": config.image_size if resolved.task == models.IMAGE_CLS else None,
        "tokens_per_sample": tps, "device": config.device,
        "gpus": list(config.gpus) if config.device == "cuda" else [], "nranks": config.world_size,
        "rank_gpus": config.rank_gpus, "backend": config.run_backend,
        "nnodes": config.nnodes, "procs_per_node": config.procs_per_node, "steps": config.steps, "warmup_steps": config.warmup_steps,
        "lr": config.lr, "optimizer": "AdamW (fused on GPU)",
        "precision": precision, "mixed_precision": accelerate_precision(precision),
        "dataset": config.dataset or "synthetic",
        "estimate": {"recipe": recipe, **states, "activation_bytes": act,
                     "with_activations_bytes": states["total_bytes"] + act} if states else None,
        "versions": {lib: package_version(lib) for lib in LIBRARIES},
    }


def run(config: TrainConfig, writer: ResultWriter, *, echo: Any = None, quiet: bool = False,
        since: float | None = None) -> list[dict[str, Any]]:
    """Every strategy of `config` in rounds of fresh processes, a record per run, written as it ends.

    Rounds interleave the strategies (A B C A B C, never A A A B B B), so that a drift of the machine hits
    all alike. After min_repeats rounds a strategy whose run-to-run CI (repeats.py) is within target_ci,
    or whose run did not end ok (an oom or a waiver repeats itself), runs no more; the others go on up to
    max_repeats rounds while time_budget_s lasts. With `repeats` given, exactly that many rounds.
    Progress (each rank's step) goes to stderr unless quiet (fabricbench/progress.py).

    `since`: when the user's wait began (the CLI passes its own process's start, phases.process_start());
    the first run's phases start there and each later run's where the record before it was written, so that
    the records' phase totals add up to the command's wall. Default: now."""
    since = time.time() if since is None else since
    # the numbers only: this process builds no model, so it never imports transformers for a built-in one
    resolved = models.resolve_shape(name=config.model, config_file=config.model_config, path=config.model_path)
    data.check(task=resolved.task, config=resolved.config, dataset=config.dataset, seq_len=config.seq_len,
               world=config.world_size)  # a dataset that cannot feed the ranks fails here, not in every rank
    psi = resolved.params  # by formula; None: the ranks count it on the model they build, and say it
    run_id = uuid.uuid4().hex[:12]
    records: list[dict[str, Any]] = []
    t0 = time.monotonic()
    todo = list(config.strategies)
    rnd = 0
    # the number of rounds is decided as they go: the bar counts runs and names each rank's step
    # under srun, a node Slurm drains or sets DOWN meanwhile is named within the stall bound (cluster/nodewatch)
    with Progress("train", total=None, quiet=quiet) as bar, nodewatch.watch(bar.say, stall_s=config.stall_timeout_s):
        while todo:
            rnd += 1
            for name in todo:
                label = f"{name} (round {rnd})" if rnd > 1 else name
                bar.update(item=f"{label}: starting")
                # the first meeting of the nodes counts from this command's start (--timeout is what the
                # user waits for a node that never comes); later ones get the whole --timeout
                first = not records and config.nnodes > 1
                rdzv_s = max(MIN_RDZV_S, config.timeout_s - procs.age_s()) if first else None
                watched = None
                try:
                    with hostload.watch() as watched:  # the other processes' CPU on this host while it runs
                        body = run_strategy(config, name, resolved, psi, on_progress=_steps(bar, config, label),
                                            rdzv_s=rdzv_s, begun=since)
                except KeyboardInterrupt as e:  # the running run's finished steps, kept as a stalled rank's are
                    partial = getattr(e, "partial", None)
                    if partial is not None:
                        load = watched.load if watched is not None else None
                        _keep(config, writer, records, _record(config, partial, rnd, run_id, psi, load))
                    e.kept = _kept_line(config, writer, records, partial)  # type: ignore[attr-defined]
                    raise
                psi = psi or body.get("params")
                record = _record(config, body, rnd, run_id, psi, watched.load)
                _keep(config, writer, records, record)
                bar.advance(item=f"{label}: {record.get('status')}")
                if echo is not None:  # on a terminal the bar stays below what echo prints
                    echo(record)
                since = time.time()  # the next run's wait starts once this one's record is out
            todo = repeats.still_to_run(config, records, round_=rnd, elapsed_s=time.monotonic() - t0)
    return records


def _record(config: TrainConfig, body: dict[str, Any], rnd: int, run_id: str, psi: int | None,
            load: Any) -> dict[str, Any]:
    """A run's body -> its train record: header, round, throughput (Ψ known), the host's load beside it."""
    result = TrainResult.from_dict({**body, "repeat": rnd})
    result.context = header("train", run_id=run_id, fabric=config.fabric)
    if psi:
        _add_throughput(result, psi)
    record = result.to_dict()  # the one place a train result becomes a dict
    if load is not None:  # beside the figure it may have moved (busy past hostload's rule)
        record[hostload.FIELD] = load.to_dict()
    note = repeats.host_bound_note(record.get("gpu_busy_fraction"))
    if note:
        record["host_bound"] = note
    return record


def _keep(config: TrainConfig, writer: ResultWriter, records: list[dict[str, Any]],
          record: dict[str, Any]) -> None:
    if config.node_rank == 0:  # node 0 writes the records (they name every node); the others
        writer.write(record)  # return theirs, for their exit status, and write none
    records.append(record)


def _kept_line(config: TrainConfig, writer: ResultWriter, records: list[dict[str, Any]],
               partial: dict[str, Any] | None) -> str:
    """What an interrupted train kept, for the one line the CLI says: the running run's steps and the
    records before it, where they went."""
    where = f"written to {writer.path}" if writer.path is not None and config.node_rank == 0 else \
        "not written (no --out)" if config.node_rank == 0 else "node 0 writes the records"
    if partial is None:
        return f"{len(records)} finished run record(s) {where}"
    run = (f"{partial.get('strategy')}'s run stopped after {partial.get('steps_completed', 0)} of "
           f"{config.steps} steps")
    return f"{run}; it and the {len(records) - 1} run(s) before it {where} (it as status 'interrupted')"


def _steps(bar: Progress, config: TrainConfig, label: str):
    """A rank's progress message -> the bar's text: each rank's step of the most it may run (the cap:
    with --target-ci, --steps is only the minimum, and "step r0 39/6" read as a run past its end), or the
    phase it is in."""
    seen: dict[str, int] = {}
    cap = config.step_cap

    def on_progress(who: str, data: dict[str, Any]) -> None:
        if isinstance(data.get("step"), int):
            seen[who] = data["step"]
            ranks = ", ".join(f"{w.replace('rank ', 'r')} {s}/{cap}" for w, s in sorted(seen.items()))
            bar.update(item=f"{label}: step {ranks}")
        elif data.get("phase"):
            bar.update(item=f"{label}: {who} {data['phase']}")
    return on_progress


def _add_throughput(result: TrainResult, psi: int) -> None:
    st = result.step_times_s
    if st is UNSET or not st:
        return
    timed = st[result.warmup_steps:]
    result.throughput = metrics.throughput(times_s=timed, global_batch=result.global_batch,
                                           tokens_per_sample=result.tokens_per_sample, psi=psi,
                                           nranks=result.nranks,
                                           gpu_name=None if result.gpu_name is UNSET else result.gpu_name)
