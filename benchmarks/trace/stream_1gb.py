"""Does `relate --trace` read a 1 GB trace in bounded memory? Peak memory and time of reading one, against
the memory json.load would need.

    python3 benchmarks/trace/stream_1gb.py                         (both kinds, 1 GB each; ~10 min on 2 cores)
    python3 benchmarks/trace/stream_1gb.py --gb 0.1 --kind gloo-cpu     (a quick look)

Each kind's trace is a real profiled step repeated until the file reaches the size (each copy shifted in
time, as a long profile of the same loop would be), written as torch.profiler writes it:
- gloo-cpu: tests/data/traces/ddp_gloo_2ranks/rank0 (plain DDP on 2 CPU ranks, torch 2.13): host ops
  only, the worst case for a reader that re-reads the step thread's ops in a second pass;
- nccl-gpu: tests/data/traces/hta_nccl_2ranks_allreduce (Holistic Trace Analysis' 2-GPU DDP trace, NCCL
  2.17): kernels, runtime calls and flows, the compute kernels held as 16-byte pairs.
Each read runs in a fresh process (fabricbench.relating.usertrace.read, what `relate --trace` runs), whose
peak resident memory (ru_maxrss) is set against the same process reading the one-step source (the
interpreter and the imports) and against json.load of the first REF_MB of the same trace in a fresh
process, scaled to the whole file (json.load holds every event: its memory grows with the file). The read
is checked: as many steps as copies (at most the first 100, which the reader reads: kineto.MAX_STEPS), the
source's collectives in each.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {"gloo-cpu": ROOT / "tests/data/traces/ddp_gloo_2ranks/rank0.json.gz",
           "nccl-gpu": ROOT / "tests/data/traces/hta_nccl_2ranks_allreduce.json.gz"}
REF_MB = 100  # json.load's memory is measured on a trace this large and scaled
MAX_STEPS = 100  # the steps the reader reads (fabricbench/training/kineto.py MAX_STEPS); the rest it passes over

READ = """
import json, resource, sys, time
t = time.perf_counter()
from fabricbench.relating import usertrace
job = usertrace.read([sys.argv[1]])
print(json.dumps({"wall_s": time.perf_counter() - t, "maxrss_b": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                  * 1024, "steps": len(job.step_times_s), "collectives": job.collectives,
                  "exposed_fraction": (job.comm.get("timeline") or {}).get("exposed_fraction")}))
"""
LOAD = """
import json, resource, sys, time
t = time.perf_counter()
doc = json.load(open(sys.argv[1]))
print(json.dumps({"wall_s": time.perf_counter() - t, "events": len(doc["traceEvents"]),
                  "maxrss_b": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def source(kind: str) -> tuple[dict, list[dict], float, float]:
    doc = json.load(gzip.open(SOURCES[kind], "rt"))
    events = doc.pop("traceEvents")
    lo, hi = min((e["ts"], e["ts"] + e["dur"]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
    return doc, events, lo, hi


def write(kind: str, path: Path, target_bytes: int) -> tuple[int, int]:
    """The kind's first profiled step repeated until the file holds target_bytes -> (copies, events)."""
    header, events, lo, hi = source(kind)
    meta = [e for e in events if e.get("ph") == "M"]
    step = [e for e in events if e.get("ph") != "M" and lo <= e.get("ts", lo - 1) < hi]
    copies = n = 0
    with path.open("w") as fh:
        fh.write(json.dumps(header)[:-1] + ', "traceEvents": [\n')
        fh.write(",\n".join(json.dumps(e) for e in meta))
        n += len(meta)
        while copies == 0 or fh.tell() < target_bytes:
            shift = copies * (hi - lo + 100.0)
            fh.write("".join(",\n" + json.dumps({**e, "ts": e["ts"] + shift}) for e in step))
            copies += 1
            n += len(step)
        fh.write("\n]}\n")
    return copies, n


def child(code: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(kind: str, gb: float, tmp: Path) -> dict:
    big, small, ref = tmp / f"{kind}.json", tmp / f"{kind}-one.json", tmp / f"{kind}-ref.json"
    t = time.perf_counter()
    copies, events = write(kind, big, int(gb * 1e9))
    made_s = time.perf_counter() - t
    write(kind, small, 1)  # one copy: the reader's own floor
    _, ref_events = write(kind, ref, REF_MB * 10**6)
    size, ref_size = big.stat().st_size, ref.stat().st_size
    got, floor, load = child(READ, big), child(READ, small), child(LOAD, ref)
    one = child(READ, small)["collectives"]
    big.unlink()
    ok = got["steps"] == min(copies, MAX_STEPS) and got["collectives"] == one
    load_full = load["maxrss_b"] * size / ref_size
    return {"kind": kind, "bytes": size, "events": events, "steps": copies, "write_s": round(made_s, 1),
            "read_s": round(got["wall_s"], 1), "read_mb_per_s": round(size / 1e6 / got["wall_s"], 1),
            "peak_rss_b": got["maxrss_b"], "floor_rss_b": floor["maxrss_b"],
            "peak_over_floor_b": got["maxrss_b"] - floor["maxrss_b"],
            "json_load_rss_b_at_ref": load["maxrss_b"], "ref_bytes": ref_size,
            "json_load_rss_b_scaled": int(load_full), "ratio_json_load_over_peak": round(load_full / got["maxrss_b"], 1),
            "steps_read": got["steps"], "collectives_as_source": got["collectives"] == one, "checked": ok,
            "exposed_fraction": got["exposed_fraction"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--kind", choices=["both", *SOURCES], default="both")
    ap.add_argument("--out", type=Path, default=None, help="append each kind's figures here as a JSON line")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="fabricbench-trace-") as tmp:
        for kind in (SOURCES if args.kind == "both" else [args.kind]):
            r = run(kind, args.gb, Path(tmp))
            rows.append(r)
            mb = 1 << 20
            print(f"{kind}: {r['bytes'] / 1e9:.2f} GB, {r['events']:,} events, {r['steps']:,} steps: read in "
                  f"{r['read_s']} s ({r['read_mb_per_s']} MB/s); peak RSS {r['peak_rss_b'] / mb:.0f} MiB, "
                  f"{r['peak_over_floor_b'] / mb:.0f} MiB over the same reader on one step "
                  f"({r['floor_rss_b'] / mb:.0f} MiB); json.load: {r['json_load_rss_b_at_ref'] / mb:.0f} MiB for "
                  f"{r['ref_bytes'] / 1e6:.0f} MB, scaled {r['json_load_rss_b_scaled'] / mb:.0f} MiB for the file: "
                  f"{r['ratio_json_load_over_peak']}x the reader's peak; read checked: {r['checked']}", flush=True)
            if args.out:
                with args.out.open("a") as fh:
                    fh.write(json.dumps(r) + "\n")
    return 0 if all(r["checked"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
