#!/usr/bin/env bash
# What shifts a whole CPU run of ddp_loop.py by 10-15% on a quiet host: the ranks' placement on the CPUs?
# Alternates ROUNDS times: the script as the lab runs it (torchrun, 2 ranks, the default fabric, nothing
# pinned), then the same confined to two CPUs of two different cores (taskset). A sampler records, every
# 0.2 s, the CPU each thread of the ranks last ran on. Prints each run's median step and where its ranks ran.
#   [ROUNDS=6] bash benchmarks/own_job/placement.sh OUTDIR
set -u
OUTD=${1:-/tmp/placement}
ROUNDS=${ROUNDS:-6}
mkdir -p "$OUTD"
lscpu > "$OUTD/lscpu.txt"; lscpu -p=CPU,CORE,SOCKET,NODE > "$OUTD/lscpu-p.txt"
# two CPUs on two different cores of one socket: the first CPU of the first two cores
PIN=$(grep -v '^#' "$OUTD/lscpu-p.txt" | awk -F, '!seen[$2]++ {print $1}' | head -2 | paste -sd,)
echo "pinned set: $PIN" | tee "$OUTD/summary.txt"
one() {  # name, then the command's prefix (or nothing)
  local name=$1; shift
  ( while sleep 0.2; do ps -eLo pid,tid,psr,pcpu,comm --no-headers | grep -E 'python|pt_main' ; echo --; done ) \
    > "$OUTD/$name.psr" 2>/dev/null &
  local sampler=$!
  "$@" python3 -m torch.distributed.run --standalone --nproc-per-node 2 benchmarks/own_job/ddp_loop.py --device cpu \
    --steps 15 --warmup 3 --result "$OUTD/$name.json" > "$OUTD/$name.log" 2>&1
  kill $sampler 2>/dev/null; wait $sampler 2>/dev/null
  python3 - "$OUTD/$name.json" "$OUTD/$name.psr" "$name" <<'PY' | tee -a "$OUTD/summary.txt"
import collections, json, sys
step = json.load(open(sys.argv[1]))["median_step_s"]
busy = collections.Counter()
for line in open(sys.argv[2]):
    f = line.split()
    if len(f) >= 5 and float(f[3]) > 20:  # threads that work (percent of a CPU over their life)
        busy[(f[0], f[2])] += 1
cpus = collections.defaultdict(set)
for (pid, psr), n in busy.items():
    cpus[pid].add(int(psr))
print(f"{sys.argv[3]:12} median step {step * 1e3:6.1f} ms  busy threads' CPUs per process: "
      + "; ".join(f"{pid}: {sorted(c)}" for pid, c in sorted(cpus.items())))
PY
}
for r in $(seq 1 "$ROUNDS"); do
  one "free-$r"
  one "pinned-$r" taskset -c "$PIN"
done
