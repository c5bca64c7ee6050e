"""A study across two emulated nodes (fabricbench/cluster/lab.py: network namespaces on a tc-shaped link),
run as docs/multinode.md's recipe: the same `fabricbench study` on each node with its --node-rank. Keeps
node 0's study folder (results.jsonl, report.md) and both nodes' terminal output under --out, and prints
the report's "Across nodes" section and each node's wall time.

    python3 benchmarks/multinode_study_lab.py --out benchmarks/results/cpu-lab/multinode-study
    python3 benchmarks/multinode_study_lab.py --rate 500mbit --strategies ddp --repeats 1 --out /tmp/mn

Needs root, iproute2 and unshare (the lab says what is missing). Each node runs --nprocs gloo ranks; the
link between the nodes is --rate, each way.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from fabricbench.cluster import lab


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for the study and the nodes' output (replaced)")
    ap.add_argument("--rate", default="1gbit", help="the link between the nodes (tc tbf rate)")
    ap.add_argument("--nprocs", type=int, default=2, help="gloo ranks per node")
    ap.add_argument("--strategies", default="ddp,fsdp")
    ap.add_argument("--model", default="tiny-mistral")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sizes", default="64K,256K,1M,4M")
    ap.add_argument("--port", type=int, default=29460)
    a = ap.parse_args()
    why = lab.unavailable()
    if why:
        print(f"Error: {why}", file=sys.stderr)
        return 2
    out = Path(a.out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    with lab.cluster(2, rate=a.rate) as nodes:
        procs, t0 = [], time.monotonic()
        for nd in nodes:
            argv = [sys.executable, "-m", "fabricbench", "study", "--device", "cpu", "--nprocs", str(a.nprocs),
                    "--nnodes", str(len(nodes)), "--node-rank", str(nd.index), "--master-addr", nodes[0].addr,
                    "--master-port", str(a.port), "--strategies", a.strategies, "--fabrics", "default",
                    "--model", a.model, "--steps", str(a.steps), "--warmup-steps", "2", "--batch-size", "2",
                    "--seq-len", "32", "--repeats", str(a.repeats), "--target-ci", "0", "--sizes", a.sizes,
                    "--out", str(out / "study")]
            log = open(out / f"{nd.name}.txt", "w")
            log.write("$ " + " ".join(argv) + "\n")
            log.flush()
            env = dict(os.environ, GLOO_SOCKET_IFNAME="eth0", OMP_NUM_THREADS="1", TMPDIR=str(out))
            procs.append(nd.popen(argv, env=env, stdout=log, stderr=log))
        lab.wait_all(procs, 3000)
        walls = time.monotonic() - t0
    left = lab.leftovers(nodes)  # after the lab is taken down: what it failed to remove
    for nd, p in zip(nodes, procs):
        print(f"{nd.name}: exit {p.returncode}")
    print(f"wall: {walls:.0f} s; left behind: {left or 'nothing'}")
    for junk in out.glob("torchelastic_*"):
        shutil.rmtree(junk, ignore_errors=True)
    report = (out / "study" / "report.md").read_text() if (out / "study" / "report.md").exists() else ""
    section = report.split("## Across nodes", 1)[1].split("\n## ", 1)[0] if "## Across nodes" in report else ""
    print("## Across nodes" + section if section else "no Across nodes section (see the nodes' output)")
    return 0 if all(p.returncode == 0 for p in procs) and not left else 1


if __name__ == "__main__":
    sys.exit(main())
