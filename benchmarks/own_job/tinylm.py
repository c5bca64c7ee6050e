"""What the two plain training scripts share: a small causal transformer, the step clock and the result file.
PyTorch alone (no fabricbench): these stand for a user's own loop.

    torchrun --nproc-per-node 2 benchmarks/own_job/ddp_loop.py --steps 20 --result ddp.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def arguments(what: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=what)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cuda: every rank on GPU LOCAL_RANK "
                    "modulo the visible GPUs (3 gloo ranks share GPU 0 when one is visible)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps, after --warmup")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=4, help="sequences per rank per step")
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--profile", default=None, help="folder for one torch.profiler trace per rank")
    ap.add_argument("--result", default=None, help="JSON file for the median step time (rank 0 writes it)")
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, max(1, dim // 64), batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=x.device).triu(1)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self, vocab: int, dim: int, layers: int, seq: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(seq, dim) * 0.02)
        self.blocks = nn.ModuleList(Block(dim) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def setup(args: argparse.Namespace) -> torch.device:
    dist.init_process_group("gloo")
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    if args.device == "cuda":
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
        torch.cuda.set_device(dev)
        return dev
    torch.set_num_threads(1)  # one core per rank: the ranks of a CPU lab do not fight over cores
    return torch.device("cpu")


def batch(args: argparse.Namespace, device: torch.device, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    t = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=gen).to(device)
    return t[:, :-1], t[:, 1:]


def loss_of(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def finish(args: argparse.Namespace, times: list[float], what: str, params: int) -> None:
    """Each step's slowest rank, its median over the timed steps, printed and (rank 0) written."""
    t = torch.tensor(times, dtype=torch.float64)
    every = [torch.zeros_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(every, t)  # after the loop (and the profiler): never in a traced step
    slowest = torch.stack(every).max(dim=0).values.tolist()
    timed = slowest[args.warmup:]
    median = statistics.median(timed)
    if dist.get_rank() == 0:
        print(f"{what}: median step {median * 1e3:.1f} ms over {len(timed)} steps, {dist.get_world_size()} ranks, "
              f"{params:,} parameters", flush=True)
        if args.result:
            with open(args.result, "w") as fh:
                json.dump({"script": what, "median_step_s": median, "steps_s": timed, "ranks": dist.get_world_size(),
                           "params": params, "device": args.device, "time": time.time()}, fh)
    dist.destroy_process_group()
