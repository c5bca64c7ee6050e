"""Where a CPU rank's floor is: what `import torch`, then torch._dynamo, cost in a fresh process, and whether
DDP's constructor and AdamW's constructor each import torch._dynamo (so that no fabricbench change can avoid it).

    python3 benchmarks/startup/dynamo_floor.py [--runs 3]

Each probe is a fresh `python -c`; the figures are the best and median of --runs. torch._dynamo is ~2 s of
CPU on this project's VM: DDP's __init__ reads torch._dynamo.utils.get_optimize_ddp_mode() and AdamW's first
add_param_group runs under torch._disable_dynamo, and either one imports it whole.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

PROBES = {
    "import torch": "import time; t=time.perf_counter(); import torch; print(time.perf_counter()-t)",
    "import torch._dynamo, after torch": (
        "import time, torch; t=time.perf_counter(); import torch._dynamo; print(time.perf_counter()-t)"),
    "DDP(model) on 1 gloo rank, after torch and init": (
        "import os, sys, time, torch, torch.distributed as d; os.environ.update(MASTER_ADDR='127.0.0.1', "
        "MASTER_PORT=str(29600 + os.getpid() % 300)); d.init_process_group('gloo', rank=0, world_size=1); "
        "m=torch.nn.Linear(4, 4); t=time.perf_counter(); torch.nn.parallel.DistributedDataParallel(m); "
        "print(time.perf_counter()-t, 'torch._dynamo' in sys.modules)"),
    "AdamW(params), after torch": (
        "import sys, time, torch; m=torch.nn.Linear(4, 4); t=time.perf_counter(); torch.optim.AdamW(m.parameters()); "
        "print(time.perf_counter()-t, 'torch._dynamo' in sys.modules)"),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    import os
    print(f"# benchmarks/startup/dynamo_floor.py --runs {a.runs}; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    for name, code in PROBES.items():
        times, loaded = [], set()
        for _ in range(a.runs):
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
            times.append(float(out[0]))
            loaded.update(out[1:])
        extra = f"; torch._dynamo imported by it: {', '.join(sorted(loaded))}" if loaded else ""
        print(f"{name}: best {min(times):.2f} s, median {statistics.median(times):.2f} s over {a.runs}{extra}")
    print(f"load at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
