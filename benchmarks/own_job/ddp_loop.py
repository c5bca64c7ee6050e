"""A plain DDP training loop, PyTorch alone: what a user brings to `fabricbench exec` and `relate --trace`.

    torchrun --nproc-per-node 2 benchmarks/own_job/ddp_loop.py --steps 20 --result ddp.json
    torchrun --nproc-per-node 2 benchmarks/own_job/ddp_loop.py --profile prof/ddp     (one trace per rank)

gloo ranks, on CPU or (--device cuda) on the visible GPUs. It prints, and writes to --result, the median
over the timed steps of each step's slowest rank (tinylm.finish).
"""

import contextlib
import time

import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import profile, schedule, tensorboard_trace_handler

import tinylm

args = tinylm.arguments(__doc__.splitlines()[0])
device = tinylm.setup(args)
rank = torch.distributed.get_rank()
model = DDP(tinylm.TinyLM(args.vocab, args.dim, args.layers, args.seq).to(device))
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
gen = torch.Generator().manual_seed(args.seed + rank)
params = sum(p.numel() for p in model.parameters())


def train_step() -> None:
    x, y = tinylm.batch(args, device, gen)
    tinylm.loss_of(model, x, y).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


times = []
prof = None
if args.profile:  # the profiler snippet of docs/relate.md "Your own job"
    prof = profile(schedule=schedule(wait=1, warmup=1, active=3, repeat=1), record_shapes=True,
                   on_trace_ready=tensorboard_trace_handler(args.profile, worker_name=f"rank{rank}"))
with prof or contextlib.nullcontext():
    for _ in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        train_step()
        tinylm.sync(device)
        times.append(time.perf_counter() - t0)
        if prof is not None:
            prof.step()
tinylm.finish(args, times, "ddp", params)
