"""Prove that the strategy asked for is the one that ran: wrapper, ZeRO stage, world size, bytes per rank.

    fabricbench train --strategy zero2 --model tiny-mistral --device cpu --nprocs 2

Accelerate falls back silently (to DDP, or to one process) when a plugin does not apply, and resident
memory on CPU shows nothing. So each rank counts what it holds, between backward and the optimizer step
of one step after the first (so Adam's state exists and gradients are still alive):
- params: the storages behind the model's parameters (DeepSpeed ZeRO-1/2: the flat bf16 buffer they view;
  ZeRO-3: each parameter's ds_tensor partition; FSDP2: the DTensor local shards);
- grads: the storages of every gradient the rank keeps (param.grad, DeepSpeed's averaged-gradient
  partitions, ZeRO-3's flat gradient-partition buffer);
- optimizer: Adam's exp_avg / exp_avg_sq tensors (DeepSpeed: of its fp32 partitions);
- master: DeepSpeed's fp32 master partitions (none elsewhere: the fp32 parameter is the master).
Element counts are compared with Ψ: a kind the strategy shards must hold at most about Ψ/n per rank.
A kind it does not shard is not required to be whole: DeepSpeed ZeRO-1 frees its full gradients once they
are reduced at the accumulation boundary, so with no accumulation it holds Ψ/n of them between backward
and step, like ZeRO-2 (during backward it held them whole; the estimate counts that peak).
Storages are counted once each (data_ptr), whole: a view into a buffer holds the buffer.

DeepSpeed ZeRO-1/2 keep a parameter's gradient whole on every rank whose 1/n of the flat buffer the
parameter touches (stage_1_and_2.py: `grads_in_partition` is sized Σ numel of `params_in_partition`, a
straddling parameter included whole). On a model of few large tensors that is far above Ψ/n: lab-mistral
(Ψ = 656,000, two 131,072-element embeddings, 21 tensors) at 3 ranks holds 0.350, 0.450 and 0.350 of Ψ,
which is exactly the whole tensors its thirds touch. So a rank's grads bound is the larger of Ψ/n and
those whole tensors (`touched`, computed here from the tensors' sizes and flat order, not from DeepSpeed's
own partition lists, so a DeepSpeed that kept every gradient still fails the check).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
import math
from typing import Any, Iterable

from fabricbench.training.strategies.base import GRADS, OPTIMIZER, PARAMS, Strategy

SHARD_SLACK = 1.10  # a sharded kind may hold up to 1.10 * Psi / n (padding to alignment, unsplittable tensors)


@dataclass(kw_only=True)
class Holdings:
    """What one rank holds: bytes and elements per kind (elements: of params, grads, m+v)."""

    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    master_bytes: int
    params_numel: int
    grads_numel: int
    optimizer_numel: int  # exp_avg + exp_avg_sq elements (2 Psi when whole)
    # elements of the whole tensors whose flat range touches this rank's 1/n (DeepSpeed ZeRO-1/2, which keep
    # those gradients whole: module docstring); 0 where gradients are sharded exactly (or not at all)
    grads_touched_numel: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def _local(t: Any) -> Any:
    return t.to_local() if hasattr(t, "to_local") else t  # DTensor (FSDP2) -> this rank's shard


def _storages(tensors: Iterable[Any]) -> tuple[int, int]:
    """(bytes, elements) of the distinct storages behind `tensors`."""
    seen: dict[int, tuple[int, int]] = {}
    for t in tensors:
        if t is None:
            continue
        t = _local(t)
        st = t.untyped_storage()
        if st.nbytes() == 0:
            continue
        seen[st.data_ptr()] = (st.nbytes(), st.nbytes() // t.element_size())
    return sum(b for b, _ in seen.values()), sum(n for _, n in seen.values())


def touched(numels: list[int], n: int, rank: int) -> int:
    """Elements of the tensors (in flat order, sizes `numels`) whose range meets rank's part of the flat
    buffer split into n equal parts (the last rounded up, as DeepSpeed pads it): what a ZeRO-1/2 rank keeps
    of the gradients, whole tensors (module docstring)."""
    if n <= 1 or not numels:
        return sum(numels)
    part = math.ceil(sum(numels) / n)
    lo, hi = rank * part, (rank + 1) * part
    total, start = 0, 0
    for k in numels:
        if start < hi and start + k > lo:
            total += k
        start += k
    return total


def _deepspeed_touched(zopt: Any) -> int:
    """touched() over each of DeepSpeed's parameter groups (each partitioned on its own)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return 0
    n, rank = dist.get_world_size(), dist.get_rank()
    groups = getattr(zopt, "round_robin_bit16_groups", None) or getattr(zopt, "bit16_groups", [])  # flat order
    return sum(touched([p.numel() for p in group], n, rank) for group in groups)


def engine_of(model: Any) -> tuple[str, int | None]:
    """("ddp" | "deepspeed" | "fsdp" | "none", zero stage) of a prepared model."""
    kind = type(model).__name__
    if kind == "DeepSpeedEngine":
        return "deepspeed", int(model.zero_optimization_stage())
    if kind == "DistributedDataParallel":
        return "ddp", None
    if kind.startswith("FSDP") or kind == "FullyShardedDataParallel":
        return "fsdp", None
    return "none", None


def holdings(model: Any, optimizer: Any) -> Holdings:
    """Count what this rank holds now (call between backward and step)."""
    kind, stage = engine_of(model)
    params = list(model.parameters())
    master: list[Any] = []
    grads_touched = 0
    if kind == "deepspeed":
        zopt = model.optimizer
        inner = zopt.optimizer
        if stage == 3:
            param_tensors = [p.ds_tensor for p in params]
            master = list(zopt.fp32_partitioned_groups_flat)
            grad_tensors = [getattr(zopt, "grad_partitions_flat_buffer", None)]
        else:
            param_tensors = [p.data for p in params]
            master = list(zopt.single_partition_of_fp32_groups)
            grad_tensors = [p.grad for p in params]
            grads_touched = _deepspeed_touched(zopt)
        for group in getattr(zopt, "averaged_gradients", {}).values():
            grad_tensors.extend(group or [])
        grad_tensors.extend(m.grad for m in master)
    else:
        inner = getattr(optimizer, "optimizer", optimizer)  # Accelerate's AcceleratedOptimizer wraps torch's
        param_tensors = [p.data if not hasattr(p, "to_local") else p for p in params]
        grad_tensors = [p.grad for p in params]
    moments = [v for state in inner.state.values() for k, v in state.items() if k in ("exp_avg", "exp_avg_sq")]
    pb, pn = _storages(param_tensors)
    gb, gn = _storages(grad_tensors)
    ob, on = _storages(moments)
    mb, _ = _storages(master)
    return Holdings(params_bytes=pb, grads_bytes=gb, optimizer_bytes=ob, master_bytes=mb, params_numel=pn,
                    grads_numel=gn, optimizer_numel=on, grads_touched_numel=grads_touched)


def check(strategy: Strategy, *, engine: tuple[str, int | None], world_size: int, expected_world: int, psi: int,
          held: list[Holdings]) -> list[str]:
    """Everything that contradicts `strategy`; empty when what ran is what was asked for.

    `engine` is engine_of(prepared model); `held` has one Holdings per rank.
    """
    problems: list[str] = []
    kind, stage = engine
    ran = f"{kind}" + (f" (ZeRO stage {stage})" if stage is not None else "")
    if kind == "none" and strategy.engine == "ddp" and world_size == 1 == expected_world:
        pass  # one process: Accelerate leaves the model unwrapped, which is what DDP at n = 1 computes
    elif kind != strategy.engine:
        problems.append(f"asked for {strategy.name} ({strategy.engine}) but what ran is {ran}")
    elif strategy.zero_stage is not None and stage != strategy.zero_stage:
        problems.append(f"asked for {strategy.name} but DeepSpeed runs ZeRO stage {stage}")
    if world_size != expected_world:
        problems.append(f"asked for {expected_world} processes but the world size is {world_size}")
    n = max(expected_world, 1)  # the shares asked for: a run that fell back to one process holds it all
    per_kind = {PARAMS: (lambda h: h.params_numel, psi), GRADS: (lambda h: h.grads_numel, psi),
                OPTIMIZER: (lambda h: h.optimizer_numel, 2 * psi)}
    for what, (get, whole) in per_kind.items():
        for rank, h in enumerate(held):
            frac = get(h) / whole
            if what not in strategy.shards or frac <= SHARD_SLACK / n:
                continue
            # DeepSpeed ZeRO-1/2: whole gradients of the tensors this rank's part touches (module docstring)
            bound = h.grads_touched_numel / whole if what == GRADS else 0.0
            if frac <= SHARD_SLACK * bound:
                continue
            why = (f", more than {SHARD_SLACK:.2f}/{n} and {SHARD_SLACK:.2f} x the {bound:.3f} that the whole "
                   f"tensors its 1/{n} touches make" if bound else f", more than {SHARD_SLACK:.2f}/{n}")
            problems.append(f"{what} not sharded: rank {rank} holds {get(h)} elements = {frac:.3f} of the "
                            f"model{why}")
    return problems
