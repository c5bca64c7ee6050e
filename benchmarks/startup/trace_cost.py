"""Where a run's "trace" phase goes: the profiler's start, the profiled steps, its stop, the chrome-trace
export (and the file's size), reading it back, and the rank's summary of it.

    python3 benchmarks/startup/trace_cost.py --case cpu --runs 2 [--results DIR]
    python3 benchmarks/startup/trace_cost.py --case gpu --runs 2 [--results DIR]   (one GPU, the 1B config)
    ... --pair      (each run twice in a row, the order alternating: as shipped, and with the garbage collector
                     left on while the trace is read and summarised, trace.collector_paused made a no-op)

Each run is the real `fabricbench train` in a fresh process; a sitecustomize.py put first on the ranks'
PYTHONPATH wraps fabricbench.training.trace's profiler, export_events and rank_summary with timers (the worker
calls them as module attributes), and each rank appends its parts to a file here. The record's own "trace"
phase is printed beside the parts' sum, so the wrapping's own cost shows.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from own_config import CPU, GPU, LLAMA_1B, ONE_RUN  # noqa: E402

SITE = r'''
import json, os, time
from pathlib import Path

_OUT = Path(os.environ["FB_TRACE_COST"])


def _note(part, s, **extra):
    with open(_OUT / f"{os.getpid()}.jsonl", "a") as f:
        f.write(json.dumps({"part": part, "s": s, "rank": os.environ.get("RANK"), **extra}) + "\n")


try:
    from fabricbench.training import trace as _t
except Exception:  # not a process that trains
    _t = None

if _t is not None:
    _profiler, _export, _summary = _t.profiler, _t.export_events, _t.rank_summary

    class _Timed:
        def __init__(self, prof):
            self._p, self._t0 = prof, None

        def start(self):
            t = time.perf_counter(); self._p.start(); _note("start", time.perf_counter() - t)
            self._t0 = time.perf_counter()

        def step(self):
            self._p.step()

        def stop(self):
            _note("steps", time.perf_counter() - self._t0)
            t = time.perf_counter(); self._p.stop(); _note("stop", time.perf_counter() - t)

        def __getattr__(self, name):
            return getattr(self._p, name)

    def profiler(device_type, steps):
        return _Timed(_profiler(device_type, steps))

    def export_events(prof, path):
        p = getattr(prof, "_p", prof)
        t = time.perf_counter(); p.export_chrome_trace(str(path)); w = time.perf_counter() - t
        _note("export", w, bytes=path.stat().st_size)
        os.rename(path, str(path) + ".kept")
        t = time.perf_counter()
        try:
            return json.loads(Path(str(path) + ".kept").read_text())["traceEvents"]
        finally:
            _note("read", time.perf_counter() - t)
            os.unlink(str(path) + ".kept")

    def rank_summary(*a, **k):
        t = time.perf_counter()
        try:
            return _summary(*a, **k)
        finally:
            _note("summary", time.perf_counter() - t)

    _t.profiler, _t.export_events, _t.rank_summary = profiler, export_events, rank_summary
    if os.environ.get("FB_TRACE_COST_GC_ON"):
        import contextlib
        _t.collector_paused = contextlib.nullcontext
'''

PARTS = ("start", "steps", "stop", "export", "read", "summary")


def run_once(args: list[str], work: Path, k: int | str, gc_on: bool = False) -> dict:
    parts_dir = work / f"parts-{k}"
    parts_dir.mkdir()
    out = work / f"run-{k}.jsonl"
    env = dict(os.environ, FB_TRACE_COST=str(parts_dir),
               PYTHONPATH=os.pathsep.join([str(work / "site"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    env.pop("FB_TRACE_COST_GC_ON", None)
    if gc_on:
        env["FB_TRACE_COST_GC_ON"] = "1"
    p = subprocess.run([sys.executable, "-m", "fabricbench", "train", *args, *ONE_RUN, "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=600)
    rec = json.loads(out.read_text().splitlines()[-1]) if out.exists() else {}
    by_rank: dict[str, dict[str, float]] = {}
    size = 0
    for f in parts_dir.glob("*.jsonl"):
        for line in f.read_text().splitlines():
            d = json.loads(line)
            by_rank.setdefault(d["rank"] or "?", {})[d["part"]] = d["s"]
            size = max(size, d.get("bytes", 0))
    return {"rc": p.returncode, "err": p.stderr.strip()[-300:], "phase": (rec.get("phases") or {}).get("trace"),
            "total": (rec.get("phases") or {}).get("total"), "ranks": by_rank, "bytes": size}


def report(lines: list[str], results: Path | None, name: str) -> int:
    """Print the lines, and write them to results/name where --results was given."""
    text = "\n".join(lines)
    print(text)
    if results:
        results.mkdir(parents=True, exist_ok=True)
        (results / name).write_text(text + "\n")
    return 0


def paired(a, args: list[str], work: Path, lines: list[str]) -> int:
    """--pair: per round, the run as shipped and the run with the collector on (order alternating); each
    rank's read + summary seconds, and the ratio shipped / collector-on by round (median and range)."""
    ratios = []
    for k in range(a.runs):
        arms = {}
        for gc_on in ((False, True) if k % 2 == 0 else (True, False)):
            r = run_once(args, work, f"{k}-{'on' if gc_on else 'off'}", gc_on=gc_on)
            if r["rc"] != 0:
                lines.append(f"round {k} ({'collector on' if gc_on else 'as shipped'}): exit {r['rc']}: {r['err']}")
                continue
            rs = [p.get("read", 0) + p.get("summary", 0) for p in r["ranks"].values()]
            arms[gc_on] = max(rs) if rs else None
            lines.append(f"round {k} {'collector on' if gc_on else 'as shipped  '}: read + summary "
                         + ", ".join(f"{x:.3f}" for x in rs) + f" s by rank; the record's trace phase {r['phase']} s"
                         f" of {r['total']} s; trace file {r['bytes'] / 1e6:.1f} MB")
        if arms.get(False) and arms.get(True):
            ratios.append(arms[False] / arms[True])
    if ratios:
        lines.append(f"shipped / collector on, read + summary of the slowest rank, by round: median "
                     f"{statistics.median(ratios):.3f}, range [{min(ratios):.3f}, {max(ratios):.3f}] over "
                     f"{len(ratios)} rounds")
    return report(lines, a.results, f"trace-cost-{a.case}-pair.txt")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--results", type=Path)
    ap.add_argument("--pair", action="store_true")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fb-trace-cost-"))
    (work / "site").mkdir()
    (work / "site" / "sitecustomize.py").write_text(SITE)
    if a.case == "gpu":
        cfg = work / "llama-1b.json"
        cfg.write_text(json.dumps(LLAMA_1B))
        args = [*GPU, "--model-config", str(cfg)]
    else:
        args = [*CPU, "--model", "tiny-mistral"]
    lines = [f"# trace_cost.py --case {a.case} --runs {a.runs}{' --pair' if a.pair else ''}: fabricbench train "
             f"{' '.join(args)}"]
    if a.pair:
        return paired(a, args, work, lines)
    sums: dict[str, list[float]] = {p: [] for p in PARTS}
    for k in range(a.runs):
        r = run_once(args, work, k)
        if r["rc"] != 0:
            lines.append(f"run {k}: exit {r['rc']}: {r['err']}")
            continue
        for rank, parts in sorted(r["ranks"].items()):
            shown = "  ".join(f"{p} {parts.get(p, float('nan')):.3f}" for p in PARTS)
            lines.append(f"run {k} rank {rank}: {shown}  sum {sum(parts.values()):.3f} s")
            for p in PARTS:
                if p in parts:
                    sums[p].append(parts[p])
        lines.append(f"run {k}: the record's trace phase {r['phase']} s of its {r['total']} s; trace file "
                     f"{r['bytes'] / 1e6:.1f} MB")
    lines.append("median per rank: " + "  ".join(
        f"{p} {statistics.median(v):.3f}" for p, v in sums.items() if v))
    return report(lines, a.results, f"trace-cost-{a.case}.txt")


if __name__ == "__main__":
    raise SystemExit(main())
