"""Native engine vs torch engine on the same GPUs, or fabricbench vs nccl-tests (when pointed at its binaries).

    python benchmarks/parity/compare_engines.py --gpus 0 --out engines.jsonl
    python benchmarks/parity/compare_engines.py --gpus 0 --nccl-tests /opt/nccl-tests/build \\
        --nccl-lib /usr/lib/x86_64-linux-gnu/libnccl.so.2 --tables results/

Without --nccl-tests: per op and size the median time of each engine and the ratio torch/native, then the
one-H200 targets (all_reduce at 8 B <= 7 us eager and <= 1.5 us in graph mode, >= 2100 GB/s algbw at 8 GiB).

With --nccl-tests (its all_reduce_perf, all_gather_perf, reduce_scatter_perf): a parity table per mode
(eager, graph) with, per op and size, fabricbench's time, nccl-tests' time and the ratio, for both buffer
modes. Both load the same NCCL (--nccl-lib; nccl-tests through LD_LIBRARY_PATH), float32, out-of-place,
and both time the same way: fabricbench with --timing loop, nccl-tests' own method (a host clock around n
launches, or G launches of a graph of n, to the last completion, divided by the count).

  reuse   the matched mode: fabricbench --buffers reuse --timing loop --alloc nccl (one buffer set from
          ncclMemAlloc, as nccl-tests allocates) against nccl-tests run at that one size (-b S -e S: with
          max bytes = S its per-iteration offset shift has a single step, so every iteration reuses one
          buffer). Same memory, same allocator, same clock, same counts and warm-up. "1st" pairs
          fabricbench's first loop with nccl-tests' first cycle (what each prints by default: --timing loop
          runs one loop, nccl-tests -N 1 one cycle); "median" pairs the medians over --reps loops of one
          run and --reps cycles (-N), where nccl-tests' later cycles follow its in-place pass and data
          check. The column "cuda" is fabricbench with cudaMalloc'd buffers (its default allocator).

    python benchmarks/parity/compare_engines.py --from-json parity.json --tables DIR   (re-print saved tables)
  rotate  fabricbench --buffers rotate --timing loop --alloc nccl (sets spanning ~2x L2, at most 16)
          against nccl-tests' usual one-process sweep (-b 8 -e 8G -f 2), which shifts iteration i to
          offset (i mod max/S) x S inside its max-size buffers: its footprint is min(n, max/S) x S, so the
          two differ in how much of the L2 is warm, not in how they time.
  events  fabricbench's default for reference: rotate, cudaMalloc, CUDA events per iteration behind a
          blocking kernel (device time without host launch cost).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fabricbench.measuring.api import make_config
from fabricbench.measuring.runner import run_sweep
from fabricbench.results.writer import ResultWriter
from fabricbench.sizes import SizeSweep, format_size

NCCL_TESTS_BIN = {"all_reduce": "all_reduce_perf", "all_gather": "all_gather_perf",
                  "reduce_scatter": "reduce_scatter_perf"}
TARGETS = {"eager_8B_us": 7.0, "graph_8B_us": 1.5, "algbw_8GiB_gbps": 2100.0}
TARGET_US = 15_000  # timed work per matched measurement: launch, upload and sync overheads stay ~0.1%
WARMUP_US = 30_000  # untimed work first, so the GPU's clocks are up after the idle of a process start
STANDARD = {"eager": {"n": 50, "G": 0}, "graph": {"n": 20, "G": 10}}  # the one-process nccl-tests sweep
WARMUP = 5  # the standard sweep's warm-up iterations (nccl-tests' -w)
PARITY_FROM = 1 << 20  # the bound: within 1% from 1 MiB up


# -- nccl-tests ------------------------------------------------------------------------------------------
def matched_counts(size: int, graph: bool, warmup_us: int = WARMUP_US) -> tuple[int, int, int]:
    """(n, G, warm-up) for one size: n launches (eager), or G launches of a graph of n, ~TARGET_US of work,
    after ~warmup_us of warm-up launches. The device time of a one-GPU copy is ~size / 2e6 us (read + write
    at ~4 TB/s); eager launches take ~4 us each at least (~6 in practice: hence the cap)."""
    est = max(1.0, size / 2e6)
    warm = max(5, min(round(5000 * warmup_us / WARMUP_US), round(warmup_us / max(est, 4.0))))
    if not graph:
        return max(20, min(4000, round(TARGET_US / max(est, 4.0)))), 0, warm
    n = 100 if size < (256 << 20) else 10
    return n, max(2, min(200, round(TARGET_US / (n * est)))), warm


def run_nccl_tests(exe: Path, lo: int, hi: int, n: int, graph_launches: int, reps: int, gpus: int, env: dict,
                   json_path: Path, log, warmup: int = WARMUP, extra: tuple[str, ...] = (),
                   prefix: tuple[str, ...] = ()) -> tuple[dict[int, list[float]], str | None]:
    """nccl-tests' out-of-place times per size (one per cycle, us) and the NCCL version it ran with;
    `prefix` goes before the binary (e.g. taskset -c N)."""
    cmd = [*prefix, str(exe), "-b", str(lo), "-e", str(hi), "-f", "2", "-g", str(gpus), "-n", str(n), "-w", str(warmup),
           "-N", str(reps), "-G", str(graph_launches), "-d", "float", "-J", str(json_path), *extra]
    json_path.unlink(missing_ok=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, env=env)
    log.write(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}\n")
    if proc.returncode != 0:
        raise RuntimeError(f"{exe.name} exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
    times: dict[int, list[float]] = {}
    version = None
    try:
        doc = json.loads(json_path.read_text())
        for rec in _records(doc):
            times.setdefault(int(rec["size"]), []).append(float(rec["out_of_place"]["time"]))
    except (OSError, ValueError, KeyError, TypeError):  # older builds: the 2-decimal stdout columns
        for line in proc.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 8 and parts[0].isdigit() and re.match(r"^[\d.]+$", parts[5]):
                times.setdefault(int(parts[0]), []).append(float(parts[5]))
    m = re.search(r"nccl-library=(\d+)", proc.stdout)  # e.g. 22803 -> 2.28.3 (the library it ran with)
    if m:
        code = int(m.group(1))
        version = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return times, version


def _records(doc):
    """Every result object in nccl-tests' JSON (those with a size and an out_of_place part)."""
    if isinstance(doc, dict):
        if "size" in doc and "out_of_place" in doc:
            yield doc
        for v in doc.values():
            yield from _records(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _records(v)


# -- fabricbench -----------------------------------------------------------------------------------------
class Fabricbench:
    """One native session; each call times one Case the way the table needs."""

    def __init__(self, gpus: tuple[int, ...], nccl_lib: str | None) -> None:
        from fabricbench.measuring.config import SweepConfig
        from fabricbench.measuring.engines.native import open_session

        self.session = open_session(SweepConfig(gpus=gpus, nccl_lib=nccl_lib, timeout_s=600.0), None)
        self.nranks = self.session.nranks

    def time(self, op: str, size: int, *, graph: bool, buffers: str, timing: str, n: int, launches: int,
             reps: int, alloc: str = "cuda", warmup: int = WARMUP) -> tuple[list[float], int]:
        """Per repetition the per-iteration time (us), and the buffer sets used. With timing "loop" the
        repetitions are loops of one run, on the same buffers (as nccl-tests' -N cycles); with "events"
        one run per repetition, its median."""
        from fabricbench.collectives import COLLECTIVES
        from fabricbench.measuring.session import Case

        sz = COLLECTIVES.get(op).size(size, 4, self.nranks)
        iters = launches if graph else n
        case = Case(op=op, dtype="float32", requested_bytes=size, bytes=sz.bytes, count=sz.count,
                    nccl_count=sz.nccl_count, send_bytes=sz.send_bytes, recv_bytes=sz.recv_bytes, inplace=False,
                    graph=graph, check=False, warmup=warmup, iters=iters, graph_iters=n if graph else 1,
                    buffers=buffers, timing=timing, alloc=alloc, loops=reps if timing == "loop" else 1)
        if timing == "loop":
            t = self.session.measure(case)
            return list(t.times_us), t.extra["rotate"]
        values, rotate = [], 1
        for _ in range(reps):
            t = self.session.measure(case)
            values.append(statistics.median(t.times_us))
            rotate = t.extra["rotate"]
        return values, rotate


def parity(args) -> int:
    from fabricbench.gpus import parse_gpus

    bins = {op: args.nccl_tests / NCCL_TESTS_BIN[op] for op in args.ops.split(",")}
    missing = [str(p) for p in bins.values() if not p.is_file()]
    if missing:
        print(f"Error: --nccl-tests {args.nccl_tests}: missing {', '.join(missing)} (build nccl-tests there)",
              file=sys.stderr)
        return 2
    gpus = parse_gpus(args.gpus)
    reuse_sizes = {x for part in args.reuse_sizes.split(",") for x in SizeSweep.parse(part).expand()}
    sizes = sorted(set(SizeSweep.parse(args.sizes).expand()) | reuse_sizes)
    tables = Path(args.tables) if args.tables else None
    work = tables or Path(".")
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if args.nccl_lib:  # nccl-tests links libnccl.so.2: make it find the very file fabricbench loads
        env["LD_LIBRARY_PATH"] = f"{Path(args.nccl_lib).resolve().parent}:{env.get('LD_LIBRARY_PATH', '')}"
    nt_extra = tuple(shlex.split(args.nt_args))
    fb = Fabricbench(gpus, args.nccl_lib)
    fb_nccl = fb.session.info["nccl_version"]
    rows = []
    nt_versions = set()
    t_start = time.monotonic()
    # nccl-tests' JSON (full-precision times) also lists the whole environment: kept in a temporary folder
    scratch = tempfile.TemporaryDirectory(prefix="fb-parity-")
    nt_json = Path(scratch.name) / "nt.json"
    with scratch, open(work / "nccl-tests.log", "w", encoding="utf-8") as log:
        for mode in ("eager", "graph"):
            graph = mode == "graph"
            std = STANDARD[mode]
            for op in args.ops.split(","):
                standard, v = run_nccl_tests(bins[op], min(sizes), max(sizes), std["n"], std["G"], 3,
                                             len(gpus), env, nt_json, log, extra=nt_extra)
                nt_versions.add(v)
                for size in sizes:
                    row = {"mode": mode, "op": op, "size": size, "t": round(time.monotonic() - t_start, 1)}
                    if size in reuse_sizes:
                        n, g, warm = matched_counts(size, graph)
                        one, v = run_nccl_tests(bins[op], size, size, n, g, args.reps, len(gpus), env, nt_json,
                                                log, warmup=warm, extra=nt_extra)
                        nt_versions.add(v)
                        row["counts_reuse"] = [n, g, warm]
                        row["nt_reuse_all"] = one.get(size)
                        row["fb_reuse_all"], _ = fb.time(op, size, graph=graph, buffers="reuse", timing="loop",
                                                         n=n, launches=g, reps=args.reps, alloc="nccl", warmup=warm)
                        row["fb_cuda_all"], _ = fb.time(op, size, graph=graph, buffers="reuse", timing="loop",
                                                        n=n, launches=g, reps=3, alloc="cuda", warmup=warm)
                    row["nt_shift_all"] = standard.get(size)
                    row["fb_rotate_all"], row["rotate"] = fb.time(op, size, graph=graph, buffers="rotate",
                                                                  timing="loop", n=std["n"], launches=std["G"],
                                                                  reps=3, alloc="nccl")
                    row["fb_events_all"], _ = fb.time(op, size, graph=graph, buffers="rotate", timing="events",
                                                      n=std["n"], launches=max(std["G"], 20), reps=1)
                    for key in ("nt_reuse", "fb_reuse", "fb_cuda", "nt_shift", "fb_rotate", "fb_events"):
                        if row.get(key + "_all"):
                            row[key] = statistics.median(row[key + "_all"])
                    rows.append(row)
                    print(_line(row), flush=True)
                _write(tables, rows, fb, gpus, fb_nccl, nt_versions)
    fb.session.close()
    _write(tables, rows, fb, gpus, fb_nccl, nt_versions, final=True)
    return 0


def _write(tables, rows, fb, gpus, fb_nccl, nt_versions, final=False) -> None:
    """The tables so far (after every op, so that a run cut short still leaves them), printed at the end."""
    versions = sorted(v for v in nt_versions if v)
    head = (f"fabricbench {fb.session.info['gpu_names'][0]} x{len(gpus)}, float32 out-of-place; NCCL "
            f"{fb_nccl} ({fb.session.info['nccl_library']}) in fabricbench, {', '.join(versions)} in nccl-tests")
    for mode in ("eager", "graph"):
        mine = [r for r in rows if r["mode"] == mode]
        if not mine:
            continue
        text = _table(head, mode, mine)
        if final:
            print(text)
        if tables:
            (tables / f"parity_{mode}.txt").write_text(text + "\n")
    if tables:
        (tables / "parity.json").write_text(json.dumps({"head": head, "rows": rows}, indent=1) + "\n")


def _ratio(a, b) -> str:
    return f"{a / b:6.3f}" if a and b else "     -"


def _us(v) -> str:
    return f"{v:9.2f}" if v else "        -"


def _first(r, key):
    return r[key][0] if r.get(key) else None


def _line(r) -> str:
    """One size: matched first loop vs nccl-tests' first cycle (each tool's default single figure), the
    medians over all loops / cycles, the cudaMalloc figure, the rotate pair, the default figure, spread."""
    fb1, nt1 = _first(r, "fb_reuse_all"), _first(r, "nt_reuse_all")
    return (f"{r['mode']:5s} {r['op']:15s} {format_size(r['size']):>6s} {_us(fb1)} {_us(nt1)} {_ratio(fb1, nt1)} "
            f"{_us(r.get('fb_reuse'))} {_us(r.get('nt_reuse'))} {_ratio(r.get('fb_reuse'), r.get('nt_reuse'))} "
            f"{_us(r.get('fb_cuda'))}  {_us(r.get('fb_rotate'))} {_us(r.get('nt_shift'))} "
            f"{_ratio(r.get('fb_rotate'), r.get('nt_shift'))} {r['rotate']:3d}  {_us(r.get('fb_events'))} {_spread(r)}")


def _spread(r) -> str:
    """The larger of the two tools' own spreads over their matched repetitions, (max - min) / median."""
    parts = [r.get(k) for k in ("fb_reuse_all", "nt_reuse_all")]
    if not all(parts):
        return "      -"
    return f"{max((max(p) - min(p)) / statistics.median(p) for p in parts) * 100:6.1f}%"


def _worst(rows, lo, hi, fb_of, nt_of):
    ratios = [(fb_of(r) / nt_of(r), r) for r in rows if lo <= r["size"] < hi and fb_of(r) and nt_of(r)]
    if not ratios:
        return None
    x, r = max(ratios, key=lambda t: abs(t[0] - 1))
    return f"{x:.3f} ({abs(x - 1) * 100:.1f}%, {r['op']} {format_size(r['size'])})"


def _table(head: str, mode: str, rows: list[dict]) -> str:
    std = STANDARD[mode]
    how = (f"n = {std['n']}" if mode == "eager" else f"a graph of n = {std['n']}, G = {std['G']} launches")
    reps = max((len(r["fb_reuse_all"]) for r in rows if r.get("fb_reuse_all")), default=0)
    lines = [head, f"mode {mode}; times in us per iteration (ratio = fabricbench / nccl-tests)",
             f"matched: fabricbench --buffers reuse --timing loop --alloc nccl vs nccl-tests -b S -e S (one "
             f"buffer, ncclMemAlloc), same counts per size (~{TARGET_US // 1000} ms of work after "
             f"~{WARMUP_US // 1000} ms of warm-up).",
             f"  1st: fabricbench's first loop vs nccl-tests' first cycle, the figure each prints by default "
             f"(loops 1, -N 1); median: over {reps} loops of one run vs {reps} cycles (-N {reps}), where "
             f"nccl-tests' later cycles follow its in-place pass and data check",
             "  cuda: fabricbench's median with --alloc cuda (cudaMalloc) instead",
             f"rotate: fabricbench --buffers rotate --timing loop --alloc nccl vs nccl-tests -b 8 -e 8G -f 2 "
             f"(its shifted buffers), {how}, medians of 3; k: fabricbench's buffer sets",
             "events: fabricbench's default (rotate, cudaMalloc, CUDA events behind a blocking kernel)",
             "spread: the larger of the two tools' own (max - min) / median over the matched repetitions", "",
             f"{'':22s} {'---------- matched, 1st ----------':>33s} {'--------- matched, median ---------':>33s} "
             f"{'':9s}  {'-------------- rotate --------------':>36s}",
             f"{'op':15s} {'size':>6s} {'fb':>9s} {'nt':>9s} {'ratio':>6s} {'fb':>9s} {'nt':>9s} {'ratio':>6s} "
             f"{'cuda':>9s}  {'fb':>9s} {'nt shift':>9s} {'ratio':>6s} {'k':>3s}  {'events':>9s} {'spread':>7s}"]
    for r in rows:
        lines.append(_line(r)[6:])
    bands = [(PARITY_FROM, 8 << 20), (8 << 20, 32 << 20), (32 << 20, 1 << 62)]
    lines.append("")
    lines.append("worst matched ratio per size band (1st | median):")
    for lo, hi in bands:
        first = _worst(rows, lo, hi, lambda r: _first(r, "fb_reuse_all"), lambda r: _first(r, "nt_reuse_all"))
        med = _worst(rows, lo, hi, lambda r: r.get("fb_reuse"), lambda r: r.get("nt_reuse"))
        top = format_size(hi) if hi < (1 << 62) else "8G"
        if first:
            lines.append(f"  {format_size(lo)}-{top}{' (excl.)' if hi < (1 << 62) else ''}: {first} | {med}")
    return "\n".join(lines)


def render(path: Path, tables: Path | None) -> int:
    """The tables again from a saved parity.json (e.g. after a change to this layout)."""
    doc = json.loads(path.read_text())
    if tables:
        tables.mkdir(parents=True, exist_ok=True)
    for mode in ("eager", "graph"):
        mine = [r for r in doc["rows"] if r["mode"] == mode]
        if mine:
            text = _table(doc["head"], mode, mine)
            print(text)
            if tables:
                (tables / f"parity_{mode}.txt").write_text(text + "\n")
    return 0


# -- native vs torch -------------------------------------------------------------------------------------
def engines(args) -> int:
    writer = ResultWriter(args.out)
    common = dict(gpus=args.gpus, ops=args.ops, sizes=args.sizes, iters=args.iters, warmup=5)
    ngpus = len(make_config(**common).gpus)
    # Both placements on the native side: torch.distributed's all_reduce and broadcast are in-place only,
    # so those rows compare against the native engine's in-place run (on one rank both are no-ops).
    native = run_sweep(make_config(engine="native", inplace="both", **common), writer=writer)
    graph = run_sweep(make_config(engine="native", graph=True, **{**common, "sizes": "8,1K,64K"}), writer=writer)
    torch_cfg = make_config(engine="torch", backend="nccl", nprocs=ngpus if ngpus > 1 else None, **common)
    torch_res = run_sweep(torch_cfg, writer=writer)
    writer.close()

    def by(rs, inplace=False):
        return {(r.op, r.bytes): r for r in rs if r.time_us is not None and r.inplace == inplace}

    n, n_in, g = by(native), by(native, True), by(graph)
    t = {(r.op, r.bytes): r for r in torch_res if r.time_us is not None}
    torch_inplace = {op for (op, _), r in t.items() if r.extra.get("torch_inplace")}
    hdr = f"{'op':15s} {'place':5s} {'size':>6s} {'native us':>11s} {'graph(out)':>10s} {'torch us':>11s} {'torch/nat':>9s}"
    hdr += f" {'native algbw':>12s} {'torch algbw':>11s}"
    print(hdr)
    for (op, size), r_out in sorted(n.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        tr = t.get((op, size))
        r = n_in.get((op, size), r_out) if op in torch_inplace else r_out
        gr = g.get((op, size))
        line = (f"{op:15s} {'in' if r.inplace else 'out':5s} {format_size(size):>6s} {r.time_us:11.2f} {gr.time_us if gr else float('nan'):10.2f} "
                f"{tr.time_us if tr else float('nan'):11.2f} "
                f"{(tr.time_us / r.time_us) if tr else float('nan'):9.2f}")
        line += f" {r.algbw_gbps:12.1f} {tr.algbw_gbps if tr else float('nan'):11.1f}"
        print(line)
    summary = {}
    print("torch.distributed has no out-of-place all_reduce/broadcast: those rows pair with native in-place")
    ar8 = n.get(("all_reduce", 8))
    ar8g = g.get(("all_reduce", 8))
    big = n.get(("all_reduce", 8 << 30))
    if ar8:
        summary["eager_8B_us"] = ar8.time_us
    if ar8g:
        summary["graph_8B_us"] = ar8g.time_us
    if big:
        summary["algbw_8GiB_gbps"] = big.algbw_gbps
    for k, v in summary.items():
        target = TARGETS[k]
        ok = v >= target if k.startswith("algbw") else v <= target
        print(f"target {k}: {v:.2f} ({'<=' if not k.startswith('algbw') else '>='} {target}) "
              f"{'PASS' if ok else 'MISS'}")
    print(json.dumps({"gpus": args.gpus, "summary": summary,
                      "torch_all_gather_8B_us": t.get(("all_gather", 8)).time_us if t.get(("all_gather", 8)) else None}))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="0")
    ap.add_argument("--ops", default="all_reduce,all_gather,reduce_scatter")
    ap.add_argument("--sizes", default=None, help="default 8-8G:x8 (engines), 8-8G:x4 (with --nccl-tests: the "
                    "rotate table; the matched table adds --reuse-sizes)")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--nccl-tests", type=Path, default=None, help="folder with all_reduce_perf etc.: parity tables")
    ap.add_argument("--nccl-lib", default=None, help="libnccl.so.2 for fabricbench and (LD_LIBRARY_PATH) nccl-tests")
    ap.add_argument("--reuse-sizes", default="1M-8G:x2",
                    help="sizes of the matched (reuse) table, comma-separated ranges: one nccl-tests process each")
    ap.add_argument("--reps", type=int, default=5, help="repetitions of each matched figure (median), both tools")
    ap.add_argument("--tables", default=None, help="folder for parity_eager.txt, parity_graph.txt, parity.json")
    ap.add_argument("--out", default=None, help="JSONL of every record (engines mode)")
    ap.add_argument("--nt-args", default="", help="more nccl-tests arguments for every run, e.g. '-c 0' (no "
                    "data check) to see whether its check moves its later cycles")
    ap.add_argument("--from-json", type=Path, default=None, help="re-print the tables of a saved parity.json")
    args = ap.parse_args()
    if args.from_json:
        return render(args.from_json, Path(args.tables) if args.tables else None)
    if args.nccl_tests:
        if not args.nccl_tests.is_dir():
            print(f"Error: --nccl-tests {args.nccl_tests}: not a folder", file=sys.stderr)
            return 2
        args.sizes = args.sizes or "8-8G:x4"
        return parity(args)
    args.sizes = args.sizes or "8-8G:x8"
    return engines(args)


if __name__ == "__main__":
    sys.exit(main())
