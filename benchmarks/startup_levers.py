"""What each start-up lever of issue 38 can save, in CPU seconds (user + sys: less moved by other jobs' load
than the wall), each part alone in a fresh process.

    python3 benchmarks/startup_levers.py [--runs 3] [--out benchmarks/results/cpu-startup/levers.txt]

A rank of the CPU case imports torch, transformers' model class (which loads accelerate, torch._dynamo,
torch.distributed.tensor and scipy.optimize itself) and fabricbench's worker; the command's own process
imports the CLI; torchrun's agent, where it is used, is a third Python with torch imported. The lines show
which of these a lever removes: the agent (one node: the job layer starts the ranks), the command's torch and
transformers (training/models.resolve_shape), accelerate for DDP (nothing: transformers loads it anyway),
scipy (only by patching transformers: not done).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MISTRAL = "import torch, torch.distributed\nfrom transformers.models.mistral.modeling_mistral import MistralForCausalLM\n"
CASES = {  # what is timed -> python code (None: torchrun's agent starting 2 ranks that do nothing)
    "python -c pass": "pass",
    "import torch (the floor of any rank)": "import torch",
    "torch + transformers' Mistral class (a rank's imports)": MISTRAL,
    "... + accelerate (transformers loaded it already)": MISTRAL + "import sys\nassert 'accelerate' in sys.modules\n"
                                                          "from accelerate import Accelerator",
    "torch + scipy.optimize (transformers' losses load it)": "import torch, scipy.optimize",
    "the command's own imports (no torch, no transformers)": "import fabricbench.cli, fabricbench.training.launch\n"
                                                             "import sys\nassert 'torch' not in sys.modules\n"
                                                             "assert 'transformers' not in sys.modules",
    "torchrun's agent and rendezvous, 2 idle ranks": None,
}
TORCHRUN = ["-m", "torch.distributed.run", "--nproc-per-node=2", "--nnodes=1", "--master-addr=127.0.0.1",
            "--master-port=0", "-m", "json.tool", "--help"]


def cpu_s(argv: list[str]) -> float:
    """CPU seconds of one fresh process and everything it started."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, *argv], check=True, capture_output=True, timeout=300, env=env)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    lines = [f"# CPU seconds (user+sys), median of {a.runs}, a fresh process each; {os.cpu_count()} CPUs, "
             f"load {os.getloadavg()[0]:.1f} at start"]
    for name, code in CASES.items():
        argv = TORCHRUN if code is None else ["-c", code]
        lines.append(f"  {name:<58} {statistics.median(cpu_s(argv) for _ in range(a.runs)):6.2f}")
    lines.append(f"# load {os.getloadavg()[0]:.1f} at the end")
    print("\n".join(lines))
    if a.out:
        Path(a.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
