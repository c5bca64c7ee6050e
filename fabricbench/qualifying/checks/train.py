"""train: a training smoke test — a strategy trains a few steps, the loss falls, throughput stays above
a floor.

    [[check]]
    name = "ddp_smoke"
    kind = "train"
    strategy = "ddp"
    model = "tiny-mistral"
    steps = 6
    loss_falls = true
    min_samples_per_s = 2.0

Runs `fabricbench train` (torchrun, fresh processes). device follows [run]: gloo ranks train on CPU with
[run] nprocs processes, otherwise one process per visible GPU. A strategy that cannot run here
(DeepSpeed missing) comes back waived with the reason.
"""

from __future__ import annotations

from fabricbench.qualifying.checks.base import Check, CheckKind, Invalid
from fabricbench.qualifying.fields import Field
from fabricbench.qualifying.verdict import Item, at_least, equal, error, waived
from fabricbench.results import records
from fabricbench.results.schema import TrainResult
from fabricbench.results.status import TIMED_TRAIN, Status
from fabricbench.training.config import TrainConfig
from fabricbench.training.models import MODELS
from fabricbench.training.strategies import STRATEGIES

FIELDS = {
    "strategy": Field("str", "ddp, zero1, zero2, zero3 or fsdp", default="ddp"),
    "model": Field("str", "a built-in model (fabricbench train --list)", default="tiny-mistral"),
    "steps": Field("int", "steps in all, warm-up included", default=6, at_least=3),
    "warmup_steps": Field("int", "untimed first steps", default=2, at_least=1),
    "batch_size": Field("int", "samples per process per step", default=4, at_least=1),
    "seq_len": Field("int", "tokens per sample (causal LM)", default=64, at_least=1),
    "fabric": Field("fabric", "the fabric it trains under", default="default"),
    "loss_falls": Field("bool", "the last loss must be below the first"),
    "min_samples_per_s": Field("number", "throughput floor, samples/s over all ranks", positive=True),
}


def validate(p: dict) -> None:
    if p["strategy"] not in STRATEGIES:
        raise Invalid("strategy", f"unknown strategy {p['strategy']!r}; choose from {', '.join(STRATEGIES.names())}")
    if p["model"] not in MODELS:  # the check's TrainConfig refuses it too, but mid-run: the spec says it first
        raise Invalid("model", f"unknown model {p['model']!r}; choose from {', '.join(MODELS.names())}")
    if p["steps"] < p["warmup_steps"] + 2:
        raise Invalid("steps", f"steps = {p['steps']} with warmup_steps = {p['warmup_steps']} leaves fewer "
                               f"than 2 timed steps")


def judge(check: Check, ctx) -> list[Item]:
    p = check.params
    if ctx.distributed:
        return [waived("train", "runs per node: qualify without torchrun for training smoke tests")]
    # a smoke test: exactly `steps` steps, one run (train steps on and repeats by default)
    job = dict(strategies=p["strategy"], model=p["model"], steps=p["steps"], warmup_steps=p["warmup_steps"],
               batch_size=p["batch_size"], seq_len=p["seq_len"], fabric=p["fabric"], repeats=1, target_ci=0.0,
               timeout_s=ctx.run.unit_timeout_s)
    if ctx.run.cpu_ranks:
        job.update(device="cpu", nprocs=ctx.run.nprocs)
    else:
        n = ctx.visible_gpus()
        if n == 0:
            return [error("train", "no CUDA GPU is visible here (a CPU smoke test needs [run] backend = \"gloo\")")]
        job.update(device="cuda", gpus=f"0-{n - 1}" if n > 1 else "0")
    res = ctx.train(TrainConfig(**job))  # the child's argv, environment and key from the config (jobs/configs.py)
    runs, damaged = records.typed(res.records, TrainResult, source="the training child")
    if not runs:
        why = damaged[0] if damaged else res.error or "unknown reason"
        return [error("train", f"no training record came back: {why}")]
    run = runs[0]
    subj = f"{p['strategy']} {p['model']}, {run.nranks} ranks"
    if run.status == Status.WAIVED:
        return [waived("train", run.message or "waived", subject=subj)]
    if run.status not in TIMED_TRAIN:  # error, oom, timeout: nothing was timed to judge
        return [error("train", f"{run.status}: {run.message}", subject=subj)]
    items: list[Item] = []
    if p.get("loss_falls"):
        first, last = run.reached("first_loss"), run.reached("last_loss")
        items.append(equal("loss_falls", f"{first:.4f} -> {last:.4f}" if first is not None and last is not None
                           else None, "falling", subject=subj, ok=bool(run.reached("loss_decreased"))))
    if p.get("min_samples_per_s") is not None:
        sps = run.samples_per_s
        if sps is None:
            items.append(error("samples_per_s", "no throughput in the record", subject=subj))
        else:
            items.append(at_least("samples_per_s", sps, p["min_samples_per_s"], unit="samples/s", subject=subj))
    return items


TRAIN = CheckKind(name="train", description="a strategy trains a few steps: loss falls, throughput floor",
                  fields=FIELDS, judge=judge, validate=validate,
                  threshold_keys=("loss_falls", "min_samples_per_s"))
