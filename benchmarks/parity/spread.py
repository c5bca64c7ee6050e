"""How much of the fabricbench / nccl-tests gap at 1-16 MiB is the tools, and how much is the process.

On one GPU, NCCL turns every collective into a cudaMemcpyAsync of the buffer onto itself (2.28's
enqueue.cc: nRanks == 1 -> ncclLaunchOneRank), and from 1 to 16 MiB both tools take ~4 us per launch: the
host's launch rate, not the wire. compare_engines.py pairs one nccl-tests process per size with one run of a
long-lived fabricbench process; this script asks whether the pairing itself decides the ratio. For each
(mode, op, size) it starts REPS fresh processes of each tool, alternating (nccl-tests, fabricbench, ...), with
the matched settings and counts of compare_engines.py, optionally pinned to one CPU core (--cpu), and also
times REPS fresh buffer sets in one fabricbench process (--inproc: does the allocation matter?).

    python benchmarks/parity/spread.py --nccl-tests /tmp/nccl-tests/build \\
        --nccl-lib /usr/lib/x86_64-linux-gnu/libnccl.so.2 --sizes 1M-16M:x2 --reps 5 --out DIR

Prints, per size: each tool's median, min and max over its processes, the ratio of the medians, and the
spread; writes DIR/spread.json (every figure) and DIR/spread.txt (the table).

    python benchmarks/parity/spread.py --pool DIR/spread.json [MORE.json ...] [--max-size 8M]

pools every eager process of each tool over the sizes of a run (per file, op and warm-up), up to the size
where the time per launch stops depending on the size (the host's launch rate): quartiles, and the ratio
of fabricbench's to nccl-tests' at each.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from compare_engines import NCCL_TESTS_BIN, Fabricbench, matched_counts, run_nccl_tests

from fabricbench.results.writer import read_results
from fabricbench.sizes import SizeSweep, format_size, parse_size


def fb_process(op: str, size: int, graph: bool, n: int, g: int, warm: int, env: dict, pin: list[str],
               scratch: Path, log) -> float | None:
    """One fresh `fabricbench sweep` in the matched mode; its per-iteration time (us)."""
    out = scratch / "fb.jsonl"
    out.unlink(missing_ok=True)
    cmd = [*pin, sys.executable, "-m", "fabricbench", "sweep", "--engine", "native", "--gpus", "0", "--ops", op,
           "--sizes", str(size), "--buffers", "reuse", "--timing", "loop", "--alloc", "nccl",
           "--warmup", str(warm), "--quiet", "--out", str(out)]
    cmd += ["--graph", "--graph-iters", str(n), "--iters", str(g)] if graph else ["--iters", str(n)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, check=False)
    log.write(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}\n")
    times = [r["time_us"] for r in read_results(out, kind="collective") if r.get("time_us")] if out.exists() else []
    return times[-1] if times else None


def summary(xs: list[float]) -> dict:
    xs = [x for x in xs if x]
    if not xs:
        return {}
    med = statistics.median(xs)
    return {"median": med, "min": min(xs), "max": max(xs), "spread": (max(xs) - min(xs)) / med, "all": xs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nccl-tests", type=Path)
    ap.add_argument("--nccl-lib", default=None)
    ap.add_argument("--ops", default="all_reduce,all_gather")
    ap.add_argument("--sizes", default="1M-16M:x2")
    ap.add_argument("--modes", default="eager", help="eager, graph or eager,graph")
    ap.add_argument("--reps", type=int, default=5, help="fresh processes per tool and size")
    ap.add_argument("--cpu", default=None, help="pin every process to this CPU core (taskset -c)")
    ap.add_argument("--inproc", action="store_true", help="also REPS fresh buffer sets in one fabricbench process")
    ap.add_argument("--warmup-ms", default="30",
                    help="warm-up work before timing, both tools (compare_engines: 30 ms); a list, e.g. 30,1000, "
                         "measures each (does a process's spread come from clocks still ramping?)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--pool", type=Path, nargs="+", help="spread.json files to pool (no measuring)")
    ap.add_argument("--max-size", default="8M", help="--pool: sizes up to this one")
    args = ap.parse_args()
    if args.pool:
        return pool(args.pool, parse_size(args.max_size))
    if args.out is None or args.nccl_tests is None:
        ap.error("--nccl-tests DIR and --out DIR are required to measure")
    args.out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if args.nccl_lib:
        env["LD_LIBRARY_PATH"] = f"{Path(args.nccl_lib).resolve().parent}:{env.get('LD_LIBRARY_PATH', '')}"
        env["FABRICBENCH_NCCL_LIBRARY"] = args.nccl_lib
    pin = ["taskset", "-c", args.cpu] if args.cpu else []
    sizes = SizeSweep.parse(args.sizes).expand()
    fb = Fabricbench((0,), args.nccl_lib) if args.inproc else None
    rows = []
    head = (f"{'warm ms':>7s} {'mode':5s} {'op':12s} {'size':>5s} | {'nt med':>7s} {'min':>6s} {'max':>6s} | "
            f"{'fb med':>7s} {'min':>6s} {'max':>6s} | {'ratio':>6s} | {'in-proc':>7s} {'min':>6s} {'max':>6s}")
    print(head, flush=True)
    with tempfile.TemporaryDirectory(prefix="fb-spread-") as tmp, \
            open(args.out / "spread.log", "w", encoding="utf-8") as log:
        scratch = Path(tmp)
        for warm_ms, mode in ((w, m) for w in args.warmup_ms.split(",") for m in args.modes.split(",")):
            graph = mode == "graph"
            for op in args.ops.split(","):
                exe = args.nccl_tests / NCCL_TESTS_BIN[op]
                for size in sizes:
                    n, g, warm = matched_counts(size, graph, warmup_us=round(float(warm_ms) * 1000))
                    nt, fbp = [], []
                    for _ in range(args.reps):
                        times, _ = run_nccl_tests(exe, size, size, n, g, 1, 1, env, scratch / "nt.json", log,
                                                  warmup=warm, prefix=tuple(pin))
                        nt += times.get(size, [])
                        fbp.append(fb_process(op, size, graph, n, g, warm, env, pin, scratch, log))
                    row = {"mode": mode, "op": op, "size": size, "counts": [n, g, warm], "cpu": args.cpu,
                           "warmup_ms": float(warm_ms),
                           "nt": summary(nt), "fb": summary(fbp)}
                    if fb:
                        inproc = [fb.time(op, size, graph=graph, buffers="reuse", timing="loop", n=n,
                                          launches=g, reps=1, alloc="nccl", warmup=warm)[0][0]
                                  for _ in range(args.reps)]
                        row["fb_inproc"] = summary(inproc)
                    rows.append(row)
                    print(_line(row), flush=True)
                    _write(args.out, head, rows)  # after every size: a run cut short keeps what it measured
    if fb:
        fb.session.close()
    return 0


def pool(files: list[Path], max_size: int) -> int:
    """Quartiles of every process's time per launch, pooled over the sizes up to max_size, per tool."""
    print(f"{'run':34s} {'warm':>5s} {'mode':5s} {'op':10s} {'tool':4s} {'n':>3s} | {'min':>5s} {'p25':>5s} "
          f"{'med':>5s} {'p75':>5s} {'max':>5s} | fb/nt at min, p25, median, p75, max")
    for f in files:
        # eager only: in graph mode the time is the GPU's and grows with the size (compare per size there)
        rows = [r for r in json.loads(f.read_text()) if r["size"] <= max_size and r["mode"] == "eager"]
        groups: dict[tuple, dict[str, list[float]]] = {}
        for r in rows:
            g = groups.setdefault((r.get("warmup_ms", 30.0), r["mode"], r["op"]), {"nt": [], "fb": []})
            for tool in g:
                g[tool] += (r[tool] or {}).get("all", [])
        for (warm, mode, op), g in groups.items():
            q = {tool: _quartiles(v) for tool, v in g.items() if v}
            for tool, qs in q.items():
                ratio = (" ".join(f"{a / b:5.3f}" for a, b in zip(q["fb"], q["nt"]))
                         if tool == "fb" and "nt" in q else "")
                print(f"{str(f.parent)[-34:]:34s} {warm:5g} {mode:5s} {op:10s} {tool:4s} {len(g[tool]):3d} | "
                      + " ".join(f"{x:5.2f}" for x in qs) + f" | {ratio}")
    return 0


def _quartiles(xs: list[float]) -> list[float]:
    xs = sorted(xs)
    q1, med, q3 = statistics.quantiles(xs, n=4) if len(xs) > 1 else (xs[0],) * 3
    return [xs[0], q1, med, q3, xs[-1]]


def _write(out: Path, head: str, rows: list[dict]) -> None:
    (out / "spread.txt").write_text("\n".join([head] + [_line(r) for r in rows]) + "\n")
    (out / "spread.json").write_text(json.dumps(rows, indent=1) + "\n")


def _line(r) -> str:
    def trio(s):
        return f"{s['median']:7.2f} {s['min']:6.2f} {s['max']:6.2f}" if s else f"{'-':>7s} {'-':>6s} {'-':>6s}"
    ratio = (f"{r['fb']['median'] / r['nt']['median']:6.3f}" if r["fb"] and r["nt"] else f"{'-':>6s}")
    return (f"{r.get('warmup_ms', 30):7g} {r['mode']:5s} {r['op']:12s} {format_size(r['size']):>5s} | "
            f"{trio(r['nt'])} | {trio(r['fb'])} | {ratio} | {trio(r.get('fb_inproc') or {})}")


if __name__ == "__main__":
    sys.exit(main())
