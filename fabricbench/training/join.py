"""The ranks' files of one strategy run -> the record's body: a finished run joined (status, verification,
timing, memory), or an unfinished one diagnosed (which rank died or stalled, after how many steps, with the
steps every rank finished kept).

    fabricbench train --strategy ddp --model tiny-mistral --device cpu --nprocs 2 --steps 6

Used by training/launch.py after each run of a strategy's ranks; the rank files are training/worker.py's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fabricbench.errors import UsageError
from fabricbench.results.status import Status
from fabricbench.training import metrics, trace, verify
from fabricbench.training.config import TrainConfig
from fabricbench.training.strategies import STRATEGIES


def rank_files(run_dir: Path) -> list[dict[str, Any]]:
    """The ranks' files in rank order; one torn or half-written is skipped (the worker replaces it whole)."""
    ranks = []
    for p in sorted(run_dir.glob("rank-*.json"), key=lambda p: int(p.stem.split("-")[1])):
        try:
            ranks.append(json.loads(p.read_text()))
        except (OSError, ValueError):
            continue
    return ranks


def setup_failure(ranks: list[dict[str, Any]]) -> UsageError | None:
    """A rank that failed on what this host lacks (the worker's measuring.failures.setup_error: an interface
    the fabric named) -> that error, which stops the command: every strategy after it would fail alike."""
    said = next((r for r in ranks if r.get("error_kind") == UsageError.__name__), None)
    return UsageError(str(said.get("message"))) if said is not None else None


def unfinished(config: TrainConfig, ranks: list[dict[str, Any]], *, rc: int | None, log: str,
                timed_out: bool, stalled: int | None = None, why: str | None = None, culprit: int | None = None,
                exits: dict[int | None, int | None] | None = None) -> dict[str, Any] | None:
    """A run that ended with a rank still "running" (killed, crashed in C, timed out), with a rank of this
    node that never wrote its file, or with a rank whose stall watchdog named a peer (maybe on another
    node: jobs/heartbeat.py) -> status "error" naming the rank (and its host) and its step count, with the
    steps every rank of this node finished kept (slowest rank per step, as join_ranks times them). A
    rendezvous that never completed names the nodes that did not join. `culprit`, `exits`: the rank the job
    layer named and each rank's exit status, where it started the ranks itself (one node; under torchrun
    its log says them). None: every rank finished."""
    by_rank = {int(r.get("rank", i)): r for i, r in enumerate(ranks)}
    local = list(config.local_ranks)
    missing = [r for r in local if r not in by_rank]
    running = [r for r, doc in sorted(by_rank.items()) if doc.get("status") == Status.RUNNING]
    named = next((d for _, d in sorted(by_rank.items()) if d.get("culprit_ranks")), None)
    if named is None and not missing and not running:
        return None
    if not by_rank and not timed_out and stalled is None:
        met = rendezvous_failure(config, log)
        if met is not None:
            return {"status": Status.ERROR, "message": met[0], "launcher_rc": rc, "rank_died": None,
                    "nodes_missing": met[1], "steps_completed": 0, "step_times_s": []}
    if named is None and stalled is None and not timed_out and \
            any(d.get("status") == Status.OOM for d in by_rank.values()):
        # A rank out of memory is the run's outcome, a result (join_ranks): torchrun or the job layer then
        # stops the other ranks with SIGTERM, and one stopped before its own step would otherwise be named as the cause.
        return None
    steps = {r: len(doc.get("step_times_s") or []) for r, doc in by_rank.items()}
    if named is not None:  # a watchdog's verdict: the rank (and host) that stalled or died, any node
        dead = int(named["culprit_ranks"][0])
        msg = f"{named['message']}; every rank was killed"
    else:
        root = _root_cause(log)
        culprit = stalled if stalled is not None else (root if root is not None else culprit)
        dead = culprit if culprit is not None and (culprit in running or culprit in missing) else \
            (missing or running)[0]
        k = steps.get(dead, 0)
        how = _exit_text(log, dead) or _how((exits or {}).get(dead))
        if stalled is not None and dead == stalled:
            msg = f"{why}; every rank was killed"
        elif timed_out:
            msg = f"timed out after {config.budget_s:g} s with rank {dead} at {k} of {config.steps} steps"
        else:
            msg = f"rank {dead} died after {k} of {config.steps} steps{how}"
    others = [f"rank {r}: {str(doc.get('message'))[:160]}" for r, doc in sorted(by_rank.items())
              if doc is not named and doc.get("status") not in (Status.RUNNING, Status.OK) and doc.get("message")]
    if others:
        msg += "; then " + "; ".join(others)
    out: dict[str, Any] = {"status": Status.ERROR, "message": msg, "launcher_rc": rc, "rank_died": dead,
                           **kept_steps(config, by_rank), **_where(ranks)}
    if named is not None:
        out["ranks_died"] = [int(r) for r in named["culprit_ranks"]]
    return out


def interrupted(config: TrainConfig, ranks: list[dict[str, Any]], *, by: str) -> dict[str, Any]:
    """A run stopped by Ctrl-C, SIGTERM or SIGHUP (`by` says which) -> status "interrupted", with the steps
    every rank of this node finished kept, as a stalled rank's run keeps them."""
    by_rank = {int(r.get("rank", i)): r for i, r in enumerate(ranks)}
    kept = kept_steps(config, by_rank)
    return {"status": Status.INTERRUPTED, "launcher_rc": None, "rank_died": None, **kept, **_where(ranks),
            "message": f"stopped by {by} after {kept['steps_completed']} of {config.steps} steps; the steps "
                       f"every rank finished are kept"}


def kept_steps(config: TrainConfig, by_rank: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The steps every rank of this node finished: their count, each one's time (the slowest rank's, as
    join_ranks times a finished run), rank 0's losses and, past warm-up, the step-time statistics."""
    local = list(config.local_ranks)
    done = min([len(by_rank.get(r, {}).get("step_times_s") or []) for r in local] or [0])
    per_step = [max(d["step_times_s"][i] for d in by_rank.values() if len(d.get("step_times_s") or []) > i)
                for i in range(done)]
    r0 = by_rank.get(0) or by_rank.get(local[0], {})
    out: dict[str, Any] = {"steps_completed": done, "step_times_s": per_step,
                           "losses": (r0.get("losses") or [])[:done]}
    timed = per_step[config.warmup_steps:]
    if timed:
        out["step_time"] = {**metrics.step_stats(timed), "timed_steps": len(timed),
                            "rule": "slowest rank per step (the steps every rank finished)"}
    return out


def rendezvous_failure(config: TrainConfig, log: str) -> tuple[str, list[int]] | None:
    """torchrun's static rendezvous ended at --timeout before any rank started -> (message naming the
    nodes that did not join, their node ranks); None when the log says something else. Node 0 hosts the
    store and counts the nodes that joined ("1/2 clients joined"); another node names node 0 when it
    could not reach it."""
    import re

    where = f"{config.master_addr}:{config.master_port}"
    ppn = config.procs_per_node

    def node(k: int) -> str:
        first = k * ppn
        return f"node {k} (rank{'s' if ppn > 1 else ''} {first}{f'-{first + ppn - 1}' if ppn > 1 else ''})"

    m = re.search(r"(\d+)/(\d+) clients joined", log)
    if m:
        joined, n = int(m.group(1)), int(m.group(2))
        absent = n - joined
        if n == 2 or absent == n - 1:
            gone = list(range(1, n))[-absent:] if absent else []
            names = ", ".join(node(k) for k in gone)
            return (f"{names} did not join within --timeout {config.timeout_s:g} s ({joined} of {n} nodes at "
                    f"the rendezvous {where}, this node {config.node_rank} among them)"), gone
        return (f"{absent} of nodes 1-{n - 1} did not join within --timeout {config.timeout_s:g} s ({joined} of "
                f"{n} nodes at the rendezvous {where}; torchrun's static rendezvous counts, it does not name "
                f"them)"), []
    if re.search(r"client socket has timed out|Connection refused|failed to connect|timed out.*connect",
                 log, re.I) and config.node_rank != 0:
        return (f"{node(0)} did not join: its rendezvous store at {where} gave no answer within --timeout "
                f"{config.timeout_s:g} s"), [0]
    return None


def _where(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """Which host each rank ran on, and the nodes with their ranks (the record names every node)."""
    hosts = [r.get("host") for r in sorted(ranks, key=lambda r: int(r.get("rank", 0)))]
    nodes: dict[str, list[int]] = {}
    for r in sorted(ranks, key=lambda r: int(r.get("rank", 0))):
        if r.get("host"):
            nodes.setdefault(str(r["host"]), []).append(int(r.get("rank", 0)))
    return {"hosts": hosts, "nodes": [{"host": h, "ranks": rs} for h, rs in nodes.items()]} if nodes else {}


def _root_cause(log: str) -> int | None:
    """The rank torchrun names as the first failure ("Root Cause ... rank: 1 (local_rank: 1)")."""
    import re

    m = re.search(r"Root Cause[\s\S]*?\brank\s*:\s*(\d+)", log)
    return int(m.group(1)) if m else None


def _exit_text(log: str, rank: int) -> str:
    import re

    # torchrun's summary has one block per failed rank ("rank : 1 (local_rank: 1)" then "exitcode : -9"),
    # under "Root Cause" or under "Other Failures": the killed rank is often not the first observed (its
    # peer fails on the closed connection first), so its own block is looked up wherever it is.
    m = re.search(r"\brank\s*:\s*%d\s*\(local_rank[^\n]*\n\s*exitcode\s*:\s*(-?\d+)" % rank, log)
    if not m:
        return ""
    code = int(m.group(1))
    return _how(code) if code else " (exit status 0)"


def _how(code: int | None) -> str:
    """A rank's exit status, as the job layer saw it -> " (killed by SIGKILL)", " (exit status 3)", ""."""
    if not code:
        return ""
    if code < 0:
        import signal

        try:
            return f" (killed by {signal.Signals(-code).name})"
        except ValueError:
            return f" (signal {-code})"
    return f" (exit status {code})"


def join_ranks(config: TrainConfig, name: str, ranks: list[dict[str, Any]], *, rc: int | None, log: str,
               psi: int) -> dict[str, Any]:
    """The rank files of one run -> status, verification, timing, memory."""
    strategy = STRATEGIES.get(name)
    out: dict[str, Any] = {"status": Status.OK, "message": None, "launcher_rc": rc, **_where(ranks)}
    mem = {"peak_allocated_bytes": [r.get("peak_allocated_bytes") for r in ranks],
           "peak_reserved_bytes": [r.get("peak_reserved_bytes") for r in ranks]}
    out["memory"] = {**mem, "max_allocated_bytes": _max(mem["peak_allocated_bytes"]),
                     "max_reserved_bytes": _max(mem["peak_reserved_bytes"])}
    oom = [r for r in ranks if r.get("status") == Status.OOM]
    if oom:
        return {**out, "status": Status.OOM, "message": f"rank {oom[0]['rank']}: {oom[0]['message']}"}
    failed = [r for r in ranks if r.get("status") != Status.OK]
    if failed or not ranks or rc not in (0,) or len(ranks) != config.world_size:
        if failed:
            msg = f"rank {failed[0]['rank']}: {failed[0]['message']}"
        else:
            msg = (f"launcher exit {rc}, {len(ranks)} of {config.world_size} rank(s) reported; "
                   f"log tail: {log.strip()[-600:]}")
        return {**out, "status": Status.ERROR, "message": msg}
    r0 = ranks[0]
    held = [verify.Holdings(**r["holdings"]) for r in ranks]
    problems = verify.check(strategy, engine=(r0["engine"], r0["zero_stage"]), world_size=r0["world_size"],
                            expected_world=config.world_size, psi=psi, held=held)
    out.update(engine=r0["engine"], zero_stage=r0["zero_stage"], wrapper=r0["wrapper"],
               model_impl=r0.get("model_impl"),
               world_size=r0["world_size"], accelerate_num_processes=r0.get("accelerate_num_processes"),
               distributed_type=r0.get("distributed_type"), gpu_name=r0.get("gpu_name"),
               holdings=[h.as_dict() for h in held],
               held_fraction={k: [getattr(h, f"{k}_numel") / (psi * (2 if k == "optimizer" else 1)) for h in held]
                              for k in ("params", "grads", "optimizer")})
    if problems:
        return {**out, "status": Status.ERROR, "message": "strategy check failed: " + "; ".join(problems)}
    n_steps = min(len(r["step_times_s"]) for r in ranks)  # equal: rank 0's stopping rule is broadcast
    per_step = [max(r["step_times_s"][i] for r in ranks) for i in range(n_steps)]
    timed = per_step[config.warmup_steps:]
    out["step_time"] = {**metrics.step_stats(timed, first_index=config.warmup_steps), "timed_steps": len(timed),
                        "rule": "slowest rank per step", "target_ci": config.target_ci,
                        "converged": None}
    if config.target_ci:
        ci = out["step_time"]["ci95_rel"]
        out["step_time"]["converged"] = ci is not None and ci <= config.target_ci
    out["step_times_s"] = per_step
    if r0.get("nccl"):
        out["nccl"] = r0["nccl"]
    if config.trace_steps_run:
        out["comm"] = trace.join([r.get("comm") or {"error": "no trace in the rank file"} for r in ranks],
                                 backend=r0.get("backend") or ("nccl" if config.device == "cuda" else "gloo"),
                                 world_size=r0["world_size"], sends=strategy.textbook_sends, psi=psi,
                                 precision=config.run_precision, timed_step_s=out["step_time"]["median_s"])
    out["gpu_busy_fraction"] = _busy(out.get("comm"), config)
    losses = r0["losses"]
    out.update(first_loss=losses[0], last_loss=losses[-1], losses=losses,
               loss_decreased=losses[-1] < losses[0])
    if not out["loss_decreased"]:
        out.update(status=Status.FLAGGED, message=f"loss did not decrease: {losses[0]:.4f} -> {losses[-1]:.4f}")
    return out


def _busy(comm: Any, config: TrainConfig) -> float | None:
    """Kernel time over step time in the profiled steps (trace.py's timeline, mean over ranks); None on CPU
    or without a trace. Ranks sharing one GPU each see every rank's kernels, so there it is the GPU's own
    busy fraction, as nvidia-smi would give it."""
    tl = (comm or {}).get("timeline") if isinstance(comm, dict) else None
    if config.device != "cuda" or not isinstance(tl, dict):
        return None
    return tl.get("busy_fraction")


def _max(values: list[Any]) -> Any:
    vals = [v for v in values if v is not None]
    return max(vals) if vals else None

