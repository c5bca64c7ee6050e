"""Does `fabricbench import` hold its memory and time to a constant, whatever the file? Three inputs, each
imported in a fresh process (`fabricbench import FILE --out ...`), its wall time and peak RSS read from
wait4's rusage of that process:

- a 200 MB nccl-tests text: 8 ranks' Rank lines, NCCL INFO set-up lines, then all_reduce rows 8 B..8 GiB
  repeated (-N run cycles), as nccl-tests prints them;
- a 200 MB NCCL_DEBUG=INFO log of a training job (transport lines, then per-step noise);
- a 5 GB gzip bomb (zeros, ~5 MB compressed, generated as a stream: the 5 GB never exist).

    python3 benchmarks/import/bench_import.py [--mb 200] [--bomb-gb 5] [--only text|log|bomb]

Targets (docs/import.md): text >= 20 MB/s and <= 300 MB RSS; the bomb refused (exit 2) within 1 s and
100 MB. Prints one line per input and a verdict per target.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time

SIZES = [8 << i for i in range(31)]  # 8 B .. 8 GiB, -f 2
RANKS = 8


def _row(size: int, cycle: int) -> str:
    count = size // 4
    t = 4.0 + size / 4.5e5 * (1 + 0.01 * ((cycle * 7 + size) % 5))  # us: a fixed cost, then ~450 GB/s
    alg = size / t / 1e3
    bus = alg * 2 * (RANKS - 1) / RANKS
    return (f"{size:>12} {count:>12} {'float':>8} {'sum':>6} {-1:>7} {t:>8.2f} {alg:>7.2f} {bus:>7.2f} {0:>6}"
            f" {t * 0.99:>8.2f} {alg / 0.99:>7.2f} {bus / 0.99:>7.2f} {0:>6}\n")


def nccl_tests_text(path: str, mb: int) -> None:
    with open(path, "w") as fh:
        fh.write("# nccl-tests version 2.13.9 nccl-headers=22105 nccl-library=22105\n"
                 "# Collective test starting: all_reduce_perf\n"
                 "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 "
                 "agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n")
        for r in range(RANKS):
            fh.write(f"#  Rank {r:2} Group  0 Pid {4000 + r:6} on  h100-node device {r:2} [0000:{r:02x}:00] "
                     f"NVIDIA H100 80GB HBM3\n")
        for r in range(RANKS):
            for c in range(32):
                fh.write(f"h100-node:{4000 + r}:{4100 + r} [{r}] NCCL INFO Channel {c:02d}/0 : {r}[{r}] -> "
                         f"{(r + 1) % RANKS}[{(r + 1) % RANKS}] via P2P/CUMEM/read\n")
        fh.write("#\n#   out-of-place   in-place\n"
                 "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
                 "time   algbw   busbw #wrong\n"
                 "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
                 "(us)  (GB/s)  (GB/s)\n")
        block = "".join(_row(s, cycle) for cycle in range(5) for s in SIZES)  # five cycles' figures differ
        while fh.tell() < mb << 20:
            fh.write(block)
        fh.write("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 123.4\n#\n"
                 "# Collective test concluded: all_reduce_perf\n")


def nccl_log(path: str, mb: int) -> None:
    with open(path, "w") as fh:
        fh.write("h100-node:4000:4000 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n")
        for r in range(RANKS):
            fh.write(f"h100-node:{4000 + r}:{4100 + r} [{r}] NCCL INFO comm 0x55 rank {r} nRanks {RANKS} "
                     f"nNodes 1 localRanks {RANKS} localRank {r} MNNVL 0\n")
            fh.write(f"h100-node:{4000 + r}:{4100 + r} [{r}] NCCL INFO Channel 00/0 : {r}[{r}] -> "
                     f"{(r + 1) % RANKS}[{(r + 1) % RANKS}] via P2P/CUMEM/read\n")
        step = 0
        while fh.tell() < mb << 20:
            fh.write("".join(f"h100-node:{4000 + r}:{4100 + r} [{r}] NCCL INFO AllReduce: opCount {step:x} "
                             f"sendbuff 0x7f00 recvbuff 0x7f00 count 1048576 datatype 7 op 0 root 0 comm 0x55 "
                             f"[nranks={RANKS}] stream 0x55\n" for r in range(RANKS)))
            step += 1


def gzip_bomb(path: str, gb: int) -> None:
    """`gb` GiB of zeros as concatenated gzip members of 1 MiB each (~1 KB): ~5 MB on disk for 5 GiB, made
    in well under a second; the 5 GiB never exist. gzip and fabricbench read the members as one stream."""
    member = gzip.compress(b"\0" * (1 << 20), 9)
    with open(path, "wb") as fh:
        for _ in range(gb << 10):
            fh.write(member)


def run(path: str, out: str) -> tuple[int, float, float, float, str]:
    """(exit status, wall s, CPU s, peak RSS MB, last line it printed) of one import in a fresh process; CPU
    time and RSS are wait4's for that process alone."""
    with tempfile.TemporaryFile() as so, tempfile.TemporaryFile() as se:
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-m", "fabricbench", "import", path, "--out", out], stdout=so, stderr=se)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        so.seek(0)
        se.seek(0)
        said = (se.read() or so.read()).decode(errors="replace").strip().splitlines()
    cpu = usage.ru_utime + usage.ru_stime
    return p.returncode, wall, cpu, usage.ru_maxrss / 1024, said[-1][:150] if said else ""


def calibration() -> str:
    """The wall and CPU microseconds this machine takes to split one nccl-tests row and read its figures in
    pure Python (the fast path's core): what the import's figures below are to be read against."""
    row = _row(1 << 20, 0)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(100_000):
        list(map(float, row.split()[5:]))
    return f"{(time.perf_counter() - t0) * 10:.1f} us wall, {(time.process_time() - c0) * 10:.1f} us CPU"


def one(kind: str, mb: int, gb: int, folder: str) -> None:
    """Make one input, import it, print its line and its verdicts."""
    path = os.path.join(folder, {"text": "ar.log", "log": "train.log", "bomb": "bomb.log.gz"}[kind])
    t0 = time.perf_counter()
    {"text": lambda: nccl_tests_text(path, mb), "log": lambda: nccl_log(path, mb),
     "bomb": lambda: gzip_bomb(path, gb)}[kind]()
    made = time.perf_counter() - t0
    size = os.path.getsize(path)
    out = os.path.join(folder, f"{kind}.jsonl")
    rc, wall, cpu, rss, last = run(path, out)
    lines = sum(1 for _ in open(out)) if os.path.exists(out) else 0
    inflated = f" ({gb} GiB inflated)" if kind == "bomb" else ""
    print(f"{kind:5} {size / 1e6:8.1f} MB{inflated}: exit {rc}, wall {wall:6.2f} s ({size / 1e6 / wall:.1f} MB/s), "
          f"CPU {cpu:6.2f} s ({size / 1e6 / cpu:.1f} MB per CPU-s), peak RSS {rss:6.1f} MB, {lines} record(s) "
          f"written (input made in {made:.1f} s)")
    print(f"      last line: {last}")
    if kind == "text":
        verdict(f"text >= 20 MB/s of wall time ({size / 1e6 / wall:.1f})", size / 1e6 / wall >= 20)
        # on a loaded machine the wall time is mostly waiting for a core: the CPU time is what a core took
        verdict(f"text >= 20 MB per CPU-second ({size / 1e6 / cpu:.1f})", size / 1e6 / cpu >= 20)
        verdict(f"text <= 300 MB RSS ({rss:.0f})", rss <= 300)
    elif kind == "log":
        verdict(f"log <= 300 MB RSS ({rss:.0f})", rss <= 300)
    else:
        verdict(f"bomb refused, exit 2 ({rc})", rc == 2)
        verdict(f"bomb within 1 s of wall time ({wall:.2f}; startup alone is printed above)", wall <= 1.0)
        verdict(f"bomb within 1 CPU-second ({cpu:.2f}, startup included)", cpu <= 1.0)
        verdict(f"bomb within 100 MB RSS ({rss:.0f})", rss <= 100)
    os.unlink(path)


def verdict(what: str, ok: bool) -> None:
    print(f"      {'PASS' if ok else 'FAIL'} {what}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200, help="size of the text inputs (MB)")
    ap.add_argument("--bomb-gb", type=int, default=5, help="what the bomb inflates to (GiB)")
    ap.add_argument("--only", choices=["text", "log", "bomb"], help="one input only")
    a = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="fabricbench-bench-import-")
    try:
        print(f"fabricbench import; {os.cpu_count()} CPU(s), load {os.getloadavg()[0]:.1f} at start (a shared "
              f"machine: other work runs beside it); a row split and read in {calibration()}")
        print(f"startup: `fabricbench import --help` in {_startup()}")
        for kind in [a.only] if a.only else ["text", "log", "bomb"]:
            one(kind, a.mb, a.bomb_gb, folder)
        print(f"load {os.getloadavg()[0]:.1f} at the end")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _startup() -> str:
    """What starting `fabricbench import` costs before any file is read: wall and CPU seconds."""
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "fabricbench", "import", "--help"], stdout=subprocess.DEVNULL)
    _, _, usage = os.wait4(p.pid, 0)
    return f"{time.perf_counter() - t0:.2f} s wall, {usage.ru_utime + usage.ru_stime:.2f} s CPU"


if __name__ == "__main__":
    main()
