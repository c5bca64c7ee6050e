"""A plain FSDP2 (fully_shard) training loop, PyTorch alone: what a user brings to `fabricbench exec` and
`relate --trace`.

    torchrun --nproc-per-node 2 benchmarks/own_job/fsdp2_loop.py --steps 20 --result fsdp2.json
    torchrun --nproc-per-node 2 benchmarks/own_job/fsdp2_loop.py --profile prof/fsdp2   (one trace per rank)

Each transformer block is a unit of its own and the root holds the rest (embedding, head): parameters are
all-gathered before each unit's forward and backward, gradients reduce-scattered after. gloo ranks, on CPU
or (--device cuda) on the visible GPUs; the median step as in ddp_loop.py.
"""

import contextlib
import time

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.profiler import profile, schedule, tensorboard_trace_handler

import tinylm

args = tinylm.arguments(__doc__.splitlines()[0])
device = tinylm.setup(args)
rank = torch.distributed.get_rank()
mesh = init_device_mesh(device.type, (torch.distributed.get_world_size(),))
model = tinylm.TinyLM(args.vocab, args.dim, args.layers, args.seq).to(device)
params = sum(p.numel() for p in model.parameters())
for block in model.blocks:
    fully_shard(block, mesh=mesh)
fully_shard(model, mesh=mesh)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
gen = torch.Generator().manual_seed(args.seed + rank)


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
tinylm.finish(args, times, "fsdp2", params)
