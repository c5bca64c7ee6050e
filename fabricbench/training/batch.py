"""The per-GPU batch a study trains with when none is given: the one that keeps the GPU busy.

    python3 -m fabricbench.training.batch --model dinov2-base --gpu 0 --image-size 224      (the study's
    "batch" unit runs this; prints one JSON object: the chosen batch, why, and the curve)

A small batch leaves the step host-bound (dinov2-base at batch 32 on an H200: the GPU busy ~30% of the
step, samples/s differing by 30% between fresh processes): the figure then measures the host's launch
rate, and a fabric's effect hides behind it. One process, one GPU, plain DDP's recipe at world size 1
(Accelerate's bf16 autocast, fused AdamW): the batch doubles from --start while samples/s still rises
by more than --gain (10%) per doubling; the batch before the doubling that gained less is chosen.
Out of memory ends the doubling as in Accelerate's find_executable_batch_size (there the batch halves
until it fits; here the last batch that fitted is kept). Each point is the median of --steps timed steps
after 2 untimed ones.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from dataclasses import dataclass
from typing import Any

from fabricbench.jobs.configs import Job
from fabricbench.results.status import Status
from fabricbench.training import data, models
from fabricbench.training.strategies import STRATEGIES, default_precision

WARMUP = 2


@dataclass(frozen=True, kw_only=True)
class BatchJob(Job):
    """A child `python -m fabricbench.training.batch` (the per-GPU batch that keeps a GPU busy), as study
    starts one."""

    PROGRAM = ("fabricbench.training.batch",)  # this module
    model: str | None = None
    model_config: str | None = None
    gpu: int = 0
    seq_len: int | None = None
    image_size: int | None = None
    precision: str | None = None


def probe(*, model: str | None, model_config: str | None, gpu: int, seq_len: int, image_size: int,
          precision: str | None, start: int = 8, limit: int = 1024, gain: float = 0.10,
          steps: int = 6) -> dict[str, Any]:
    """The curve and the choice (see the module docstring)."""
    import statistics

    import torch

    torch.cuda.set_device(gpu)
    device = torch.device("cuda", gpu)
    resolved = models.resolve(name=model, config_file=model_config)
    module = models.build(resolved, device=device)
    models.freeze_unused(module)
    prec = precision or default_precision("cuda")
    acc = STRATEGIES.get("ddp").make_accelerator(batch_size=start, layer_classes=[], device="cuda", precision=prec)
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-4, weight_decay=0.0, fused=True)
    net, optimizer = acc.prepare(module, optimizer)
    curve: list[dict[str, Any]] = []
    chosen, why = start, f"the first batch ({start})"
    batch = start
    while batch <= limit:
        try:
            feed = data.batches(task=resolved.task, config=resolved.config, batch_size=batch, seq_len=seq_len,
                                image_size=image_size, dataset=None, rank=0, world=1, device=device)
            times = []
            for i in range(WARMUP + steps):
                b = next(feed)
                torch.cuda.synchronize(device)
                t0 = time.perf_counter()
                loss = net(**b).loss
                acc.backward(loss)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                torch.cuda.synchronize(device)
                if i >= WARMUP:
                    times.append(time.perf_counter() - t0)
            step = statistics.median(times)
            point = {"batch": batch, "status": Status.OK, "step_s": step, "samples_per_s": batch / step,
                     "peak_allocated_bytes": int(torch.cuda.max_memory_allocated(device))}
        except torch.cuda.OutOfMemoryError:
            point = {"batch": batch, "status": Status.OOM}
        finally:
            optimizer.zero_grad(set_to_none=True)
            gc.collect()
            torch.cuda.empty_cache()
        curve.append(point)
        if point["status"] == Status.OOM:
            why = f"batch {batch} ran out of memory; {chosen} was the last that fitted"
            break
        prev = [p for p in curve[:-1] if p["status"] == Status.OK]
        if prev:
            rise = point["samples_per_s"] / prev[-1]["samples_per_s"] - 1
            point["rise"] = rise
            if rise <= gain:
                why = (f"doubling {chosen} -> {batch} raised samples/s by {rise:+.1%}, not more than "
                       f"{gain:.0%}")
                break
        chosen = batch
        why = f"samples/s still rose by more than {gain:.0%} per doubling up to the limit {limit}"
        batch *= 2
    return {"chosen": chosen, "why": why, "curve": curve, "model": resolved.name, "precision": prec,
            "rule": f"double from {start} while samples/s rises by more than {gain:.0%} per doubling and memory "
                    f"allows (out of memory probed); median of {steps} steps per batch, DDP recipe, one GPU",
            "gpu_name": torch.cuda.get_device_name(device)}


def parser() -> argparse.ArgumentParser:
    """The options (jobs.configs' job kind for this child builds its argv from the same names)."""
    ap = argparse.ArgumentParser(prog="python3 -m fabricbench.training.batch")
    ap.add_argument("--model")
    ap.add_argument("--model-config")
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--precision", default=None)
    ap.add_argument("--start", type=int, default=8)
    ap.add_argument("--limit", type=int, default=1024)
    ap.add_argument("--gain", type=float, default=0.10)
    return ap


def main() -> None:
    a = parser().parse_args()
    print(json.dumps(probe(model=a.model, model_config=a.model_config, gpu=a.gpu, seq_len=a.seq_len,
                           image_size=a.image_size, precision=a.precision, start=a.start, limit=a.limit,
                           gain=a.gain)))


if __name__ == "__main__":
    main()
