"""Makes the small gloo traces in this folder: two plain PyTorch loops (DDP, FSDP2 fully_shard) on 2 CPU
ranks, profiled as a user would (torch.profiler, record_shapes on, prof.step() after each step).

    python3 tests/data/traces/make_gloo_traces.py tests/data/traces

Each writes one trace per rank, gzip-compressed: {ddp,fsdp}_gloo_2ranks/rank{0,1}.json.gz.
"""

import gzip
import os
import shutil
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, schedule

PORT = 29631


def loop(rank: int, world: int, out: str, kind: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(PORT + (kind == "fsdp")))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(4)])
    if kind == "ddp":
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.25)
    else:
        from torch.distributed.fsdp import fully_shard

        for layer in model:
            fully_shard(layer)
        fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 256)
    folder = os.path.join(out, f"{kind}_gloo_2ranks")
    os.makedirs(folder, exist_ok=True)

    def save(p) -> None:
        raw = os.path.join(folder, f"rank{rank}.json")
        p.export_chrome_trace(raw)
        with open(raw, "rb") as src, gzip.open(raw + ".gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.remove(raw)

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=3, repeat=1), on_trace_ready=save) as prof:
        for _ in range(5):
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
            prof.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    for kind in ("ddp", "fsdp"):
        mp.spawn(loop, args=(2, sys.argv[1], kind), nprocs=2)
