"""The per-GPU batch a study trains with when none is given: the one that keeps the GPU busy.

    python3 -m fabricbench.training.batch --model dinov2-base --gpu 0 --image-size 224      (the study's
    "batch" unit runs this; prints one JSON object: the chosen batch, why, and the curve)

A small batch leaves the step host-bound (dinov2-base at batch 32 on an H200: the GPU busy ~30% of the
step, samples/s differing by 30% between fresh processes): the figure then measures the host's launch
rate, and a fabric's effect hides behind it. One process, one GPU, plain DDP's recipe at world size 1
(Accelerate's bf16 autocast, fused AdamW): the batch doubles from --start while samples/s still rises
by more than --gain (10%) per doubling; the batch before the doubling that gained less is chosen.
Out of memory ends the doubling as in Accelerate's find_executable_batch_size (there the batch halves
until it fits; here the last batch that fitted is kept). Each point times --steps steps after 2 untimed ones.

The decision is made robust to its own noise (rises of 6.4-9.6% against a 10% rule flipped the
batch between identical studies): a doubling counts only when the rise clears --gain by its own 95%
interval (Welch on the log step times of the two batches, measuring/comparison.log_ratio_interval); when
the interval straddles --gain, both points are timed again (--steps more steps each, pooled) up to
AGAIN times; still straddling, the smaller batch is kept (a doubling must show that it pays). The record
keeps each decision's rise, its interval and its clearance (how far the interval clears --gain; not a
comparison's ±margin, which is a different number).
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from dataclasses import dataclass
from typing import Any

from fabricbench.statistics.comparison import log_ratio_interval
from fabricbench.jobs.configs import Job
from fabricbench.results.status import Status
from fabricbench.training import data, models
from fabricbench.training.strategies import STRATEGIES, default_precision

WARMUP = 2
AGAIN = 2  # times a straddling pair of points is measured again before the smaller batch is kept


def decide(prev_times: list[float], prev_batch: int, times: list[float], batch: int, gain: float) -> dict[str, Any]:
    """Whether doubling prev_batch -> batch paid: {"verdict": "double" | "stop" | "again", "rise",
    "rise_ci95", "clearance"}. double: the rise's interval lies wholly above gain; stop: wholly at or below
    it; again: it straddles gain. clearance: how far the interval clears gain (> 0 when decided)."""
    # samples/s = batch / step: the rise is (batch / prev_batch) × (prev step / step) − 1
    r, lo, hi = log_ratio_interval(prev_times, times)
    k = batch / prev_batch
    rise, rise_lo, rise_hi = k * r - 1, k * lo - 1, k * hi - 1
    if rise_lo > gain:
        verdict, clearance = "double", rise_lo - gain
    elif rise_hi <= gain:
        verdict, clearance = "stop", gain - rise_hi
    else:
        verdict, clearance = "again", -min(rise_hi - gain, gain - rise_lo)
    return {"verdict": verdict, "rise": rise, "rise_ci95": [rise_lo, rise_hi], "clearance": clearance}


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
    resolved = models.resolve(name=model, config_file=model_config, seq_len=seq_len)
    module = models.build(resolved, device=device)
    models.freeze_unused(module)
    prec = precision or default_precision("cuda")
    acc = STRATEGIES.get("ddp").make_accelerator(batch_size=start, layer_classes=[], device="cuda", precision=prec)
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-4, weight_decay=0.0, fused=True)
    net, optimizer = acc.prepare(module, optimizer)
    curve: list[dict[str, Any]] = []
    chosen, why = start, f"the first batch ({start})"
    decision: dict[str, Any] | None = None

    def timed(batch: int) -> list[float] | None:
        """`steps` step times at this batch after WARMUP untimed ones; None when it ran out of memory."""
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
            return times
        except torch.cuda.OutOfMemoryError:
            return None
        finally:
            optimizer.zero_grad(set_to_none=True)
            gc.collect()
            torch.cuda.empty_cache()

    batch, prev_times = start, None
    while batch <= limit:
        times = timed(batch)
        if times is None:
            curve.append({"batch": batch, "status": Status.OOM})
            why = f"batch {batch} ran out of memory; {chosen} was the last that fitted"
            break
        point = {"batch": batch, "status": Status.OK, "step_s": statistics.median(times),
                 "samples_per_s": batch / statistics.median(times),
                 "peak_allocated_bytes": int(torch.cuda.max_memory_allocated(device))}
        curve.append(point)
        if prev_times is not None:
            d, prev_times, times = _settle(timed, prev_times, chosen, times, batch, gain)
            point.update(rise=d["rise"], rise_ci95=d["rise_ci95"], steps_timed=len(times))
            decision = {"from": chosen, "to": batch, **d, "gain": gain}
            if d["verdict"] != "double":
                why = (f"doubling {chosen} -> {batch} raised samples/s by {d['rise']:+.1%} "
                       f"[{d['rise_ci95'][0]:+.1%}, {d['rise_ci95'][1]:+.1%}], "
                       + (f"not more than {gain:.0%}" if d["verdict"] == "stop" else
                          f"not clearly more than {gain:.0%} after {AGAIN} more timings"))
                break
        chosen, prev_times = batch, times
        why = f"samples/s still rose by more than {gain:.0%} per doubling up to the limit {limit}"
        batch *= 2
    return {"chosen": chosen, "why": why, "curve": curve, "model": resolved.name, "precision": prec,
            "decision": decision, "clearance": decision["clearance"] if decision else None,
            "rule": f"double from {start} while samples/s rises by more than {gain:.0%} per doubling, clear of it "
                    f"by its 95% interval (a straddling pair timed again up to {AGAIN} times), and memory "
                    f"allows (out of memory probed); {steps} steps per batch, DDP recipe, one GPU",
            "gpu_name": torch.cuda.get_device_name(device)}


def _settle(timed, prev_times: list[float], prev_batch: int, times: list[float], batch: int,
            gain: float) -> tuple[dict[str, Any], list[float], list[float]]:
    """decide() on the doubling prev_batch -> batch; near the threshold ("again") both points are timed
    again by `timed` and pooled, up to AGAIN times. Returns the decision and the pooled step times."""
    d = decide(prev_times, prev_batch, times, batch, gain)
    for _ in range(AGAIN):  # near the threshold: both points again, pooled
        if d["verdict"] != "again":
            break
        more_prev, more = timed(prev_batch), timed(batch)
        if more_prev is None or more is None:
            break
        prev_times, times = prev_times + more_prev, times + more
        d = decide(prev_times, prev_batch, times, batch, gain)
    return d, prev_times, times


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
