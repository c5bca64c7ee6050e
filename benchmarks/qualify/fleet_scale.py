"""How `qualify --fleet` scales: synthetic gathered results files of 1,000, 5,000 and 12,500 hosts (12
collective records each, as an 8-GPU node's quick qualification writes them), judged end to end.

    python3 benchmarks/qualify/fleet_scale.py [--hosts 1000,5000,12500] [--out benchmarks/qualify/results/cpu-lab]
    python3 benchmarks/qualify/fleet_scale.py --profile 12500      (cProfile's top functions instead)

Each host has all_reduce, all_gather and reduce_scatter at 8 B, 1 MiB, 256 MiB and 16 GiB on GPUs 0-7, with
real-sized records (every header field, ~1.6 kB a line, as results.jsonl holds them). 1% of the hosts
are degraded (busbw x 0.6 on one op) and must come out first in the report, critical. The timed run is
the library entry (`fabricbench.qualifying.fleet.run_fleet`) with every output: fleet.json, junit.xml,
report.md/html and a Prometheus textfile. The target: 12,500 hosts in <= 20 s, linear.
Writes qualify_fleet_scale.json and .txt in --out, naming the machine (CPU model, cores).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import pstats
import random
import sys
import tempfile
import time
from pathlib import Path

from fabricbench.qualifying.config import FleetConfig
from fabricbench.qualifying.fleet import run_fleet

OPS = {"all_reduce": 2 * 7 / 8, "all_gather": 7 / 8, "reduce_scatter": 7 / 8}  # busbw factors, 8 ranks
SIZES = (8, 1 << 20, 256 << 20, 16 << 30)
PEAK = {8: 0.0, 1 << 20: 60.0, 256 << 20: 380.0, 16 << 30: 470.0}  # busbw GB/s, NVLS-era 8x H200


def record(host: str, op: str, size: int, busbw: float, rng: random.Random) -> dict:
    time_us = 20.0 + rng.random() * 3 if busbw == 0 else size / (busbw / OPS[op] * 1e3)
    algbw = size / (time_us * 1e3)
    return {"schema": "fabricbench/1", "kind": "collective", "run_id": f"r{host}", "timestamp":
            "2026-12-04T05:00:00.000+00:00", "fabric": "default", "host": host,
            "platform": "Linux-6.8.0-x86_64-with-glibc2.39", "python": "3.12.3", "fabricbench_version": "0.1.0",
            "env": {"FABRICBENCH_FABRIC_APPLIED": "default", "NCCL_DEBUG": "INFO"}, "op": op, "dtype": "float32",
            "bytes": size, "requested_bytes": size, "count": size // 4, "nranks": 8, "gpus": list(range(8)),
            "inplace": False, "graph": False, "iters": 20, "time_us": time_us, "mean_us": time_us * 1.01,
            "min_us": time_us * 0.97, "max_us": time_us * 1.08, "p95_us": time_us * 1.05,
            "cv": 0.01 + rng.random() * 0.02, "ci95_rel": 0.01, "algbw_gbps": algbw,
            "busbw_gbps": algbw * OPS[op], "busbw_factor": OPS[op], "busbw_note": None, "wrong": None,
            "status": "ok", "message": None, "engine": "native", "backend": None,
            "timing_rule": "slowest rank per iteration", "nccl_version": "2.28.9", "nccl_library": None,
            "cuda_driver": "13.0", "cuda_runtime": "13.0", "gpu_names": ["NVIDIA H200"] * 8,
            "transport": "P2P/CUMEM", "extra": {"rotate": 16, "transport_detail": {"nvls": True, "log_lines": 40}}}


def write_fleet(path: Path, hosts: int, seed: int = 1) -> list[str]:
    """The gathered file; returns the degraded hosts."""
    rng = random.Random(seed)
    bad = set(rng.sample(range(hosts), max(1, hosts // 100)))
    with open(path, "w", encoding="utf-8") as fh:
        for h in range(hosts):
            name = f"node{h:05d}"
            slow_op = rng.choice(list(OPS)) if h in bad else None
            for op in OPS:
                for size in SIZES:
                    bw = PEAK[size] * (0.97 + rng.random() * 0.06) * (0.6 if op == slow_op and size > 8 else 1.0)
                    fh.write(json.dumps(record(name, op, size, bw, rng)) + "\n")
    return sorted(f"node{h:05d}" for h in bad)


def machine() -> str:
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            model = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), model)
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} logical CPUs (shared), Python {platform.python_version()}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", default="1000,5000,12500")
    ap.add_argument("--out", default="benchmarks/qualify/results/cpu-lab")
    ap.add_argument("--profile", type=int, default=None, help="profile one fleet of this many hosts")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleet-scale-") as tmp:
        if a.profile:
            f = Path(tmp) / "all.jsonl"
            write_fleet(f, a.profile)
            prof = cProfile.Profile()
            prof.enable()
            run_fleet(FleetConfig(inputs=[f], out=Path(tmp) / "out", prometheus=Path(tmp) / "fleet.prom"))
            prof.disable()
            pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
            return 0
        rows = []
        for n in (int(x) for x in a.hosts.split(",")):
            f = Path(tmp) / f"all-{n}.jsonl"
            bad = write_fleet(f, n)
            load = os.getloadavg()[0]
            config = FleetConfig(inputs=[f], out=Path(tmp) / f"out-{n}", prometheus=Path(tmp) / f"fleet-{n}.prom")
            t0, c0 = time.perf_counter(), time.process_time()
            res = run_fleet(config)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            first = [nd.name for nd in res.nodes[:len(bad)]]
            rows.append({"hosts": n, "records": n * 12, "file_mb": round(f.stat().st_size / 1e6, 1),
                         "seconds": round(wall, 2), "cpu_seconds": round(cpu, 2),
                         "us_per_record": round(cpu / (n * 12) * 1e6, 2), "load_avg_1min": round(load, 1),
                         "degraded": len(bad), "degraded_listed_first": sorted(first) == bad,
                         "critical_nodes": sum(1 for nd in res.nodes if nd.severity == "critical"),
                         "exit_code": res.exit_code})
            print(json.dumps(rows[-1]), flush=True)
            f.unlink()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"machine": machine(), "command": " ".join(["python3", *sys.argv]), "rows": rows}
    (out / "qualify_fleet_scale.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    lines = [f"qualify --fleet scaling on this CPU machine ({doc['machine']}); target 12,500 hosts <= 20 s",
             "wall s is the elapsed time; cpu s the process's own CPU time (the machine is shared: with the load",
             "average above its 2 cores, wall time is inflated by other processes, cpu s is what the work costs)",
             f"{'hosts':>7} {'records':>8} {'file MB':>8} {'wall s':>7} {'cpu s':>6} {'cpu us/rec':>10} {'load':>5}  "
             f"degraded listed first",
             *[f"{r['hosts']:>7} {r['records']:>8} {r['file_mb']:>8} {r['seconds']:>7} {r['cpu_seconds']:>6} "
               f"{r['us_per_record']:>10} {r['load_avg_1min']:>5}  {r['degraded_listed_first']} ({r['degraded']} "
               f"of {r['hosts']}, {r['critical_nodes']} critical)" for r in rows]]
    (out / "qualify_fleet_scale.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
