"""What benchmarks/jobfit/inspector_gpu.sh's run shows, in a few lines: did the Inspector record calls, in which
format, and how does the job stand against the sweep?

    python3 benchmarks/jobfit/inspector_check.py OUT
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


def main(out: Path) -> int:
    ok = True
    for d in ("inspector-job", "inspector-train"):
        recs = []
        p = out / f"{d}.jsonl"
        if p.exists():
            recs = [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
        files = sorted((out / d).glob("*")) if (out / d).exists() else []
        calls = Counter((r.get("op"), r.get("bytes")) for r in recs if r.get("kind") == "collective")
        print(f"{d}: {len(files)} Inspector file(s), {len(recs)} collective record(s) imported")
        if recs:
            r = recs[0]
            ex = r.get("extra") or {}
            print(f"  format {r['source'].get('tool_version')}, timing source {sorted({(x.get('extra') or {}).get('timing_source') for x in recs}, key=str)}, "
                  f"n_ranks {sorted({x.get('nranks') for x in recs}, key=str)}, host {r.get('host')}, pid {ex.get('pid')}, "
                  f"comm {ex.get('comm_hash')}")
            for (op, size), n in sorted(calls.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0))[:12]:
                print(f"  {op} {size} B: {n} call(s)")
        elif d == "inspector-job":
            ok = False
        fit = out / f"{d}-jobfit.json"
        if fit.exists():
            try:
                doc = json.loads(fit.read_text())
            except ValueError:
                print(f"  jobfit: no JSON ({(out / f'{d}-jobfit.txt').read_text().strip()[-300:]})")
                continue
            for row in doc["rows"]:
                ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
                print(f"  jobfit {row['op']} {row['size_bytes']} B: job {row['job_busbw']:.4g} GB/s over "
                      f"{row['calls']} calls, sweep {row['sweep_busbw'] if row['sweep_busbw'] is None else round(row['sweep_busbw'], 4)}, ratio {ratio}, {row['verdict']}")
            for f in doc["findings"]:
                print(f"  finding: {f}")
    print("RESULT:", "the Inspector recorded calls and jobfit read them" if ok else
          "no Inspector record: see build.txt, job.txt (NCCL_DEBUG_SUBSYS=PROFILE lines) and train.txt")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
