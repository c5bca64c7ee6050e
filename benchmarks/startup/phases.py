"""Where one `fabricbench train` run's wall time goes: start-up phases against the timed steps.

    python3 benchmarks/startup/phases.py [--runs 5] [--case cpu] [--probes] [--out benchmarks/startup/results/<machine>/phases_cpu.txt]
    python3 benchmarks/startup/phases.py --case lab-mistral --runs 5       # one GPU, 2 gloo ranks (H200)
    python3 benchmarks/startup/phases.py --case mistral-1b --runs 3        # one GPU, DDP of a 1B model (H200)
    python3 benchmarks/startup/phases.py --case study-1b                    # a default study, ddp,fsdp (H200)
    python3 benchmarks/startup/phases.py --case h200 --results DIR          # the three GPU cases, DIR/<case>.txt

The GPU cases (H200: GPU 0, no network, no DeepSpeed needed), about 4-6 minutes together on today's code:
    python3 benchmarks/startup/phases.py --case h200 --runs 2 --results benchmarks/startup/results/<machine>

Each run is the real command in a fresh process (`fabricbench train ... --repeats 1 --target-ci 0`: one run of
exactly --steps steps, the issue's case), timed from outside. Two views of it, both printed:
- observed: what the command's own process saw, on any version of the code (the benchmark wraps jobs.run
  and its progress callback in that process): command start -> ranks launched -> ranks "prepared" (launch,
  imports, process group, model, wrap) -> first step -> last step -> ranks gone -> command exit. The job
  layer reads the ranks' channel every 0.2 s, so each mark is up to 0.2 s late;
- phases: the record's own `phases` (training/phases.py), where the code writes them (each rank's clock
  read at the phase's end; the slowest rank's span per phase).
`--probes` adds what the parts cost alone, each in a fresh process: the interpreter, `import torch`, the
rank's imports, torchrun starting 2 processes that do nothing.

Figures are medians over --runs with [min, max]. On a loaded machine they are high and wide: say so where
they are quoted; the issue's targets are for a quiet one (the header line gives the load average).
Exit status 1 when the median wall is over the case's target.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASES = {  # name -> (train argv after `fabricbench train`, target wall seconds)
    "cpu": (["--device", "cpu", "--strategies", "ddp", "--model", "tiny-mistral", "--nprocs", "2", "--steps", "8"], 4.0),
    "lab-mistral": (["--device", "cuda", "--gpus", "0", "--backend", "gloo", "--nprocs", "2", "--strategies", "ddp",
                     "--model", "lab-mistral", "--steps", "8"], 6.0),
    "mistral-1b": (["--device", "cuda", "--gpus", "0", "--strategies", "ddp", "--model", "mistral-1b", "--steps", "8"],
                   10.0),
}
ONE_RUN = ["--repeats", "1", "--target-ci", "0", "--json"]
# A default study as a new user runs it (3 min 51 s - 4 min 15 s before the start-up work): 2 strategies, one fabric,
# the 1B model on GPU 0, every other option at its default. Run once: it is many runs already.
STUDY = (["--gpus", "0", "--model", "mistral-1b", "--fabrics", "default", "--strategies", "ddp,fsdp"], 120.0)
WARMUP_SHOWN = 5  # the first steps' times against the timed median: how much warm-up a run needs
STUDY_ANSWER_LINES = 24  # the tail of the study's stdout kept: its summary and verdict
STUDY_TIMEOUT_S = 240  # the study took 231-255 s before: the GPU command must fit ~6 minutes in all
GROUPS = {"h200": ["mistral-1b", "lab-mistral", "study-1b"]}
PROBES = {  # name -> python code run in a fresh interpreter
    "python -c pass": "pass",
    "import torch": "import torch",
    "rank imports": "import fabricbench.training.worker, accelerate, torch.distributed",
    # what a rank of the cpu case imports before its init: the above and the model's transformers class
    "rank imports + model": "import fabricbench.training.worker as w\nfrom fabricbench.training import models\n"
                            "w._imports('accelerate', models.resolve(name='tiny-mistral'))",
    "CLI imports": "import fabricbench.cli, fabricbench.training.launch",
}


def _inside(rec_path: str, argv: list[str]) -> None:
    """The command itself, with its launch and its ranks' progress stamped (runs in the child process)."""
    from fabricbench import jobs, procs
    from fabricbench.cli import main

    start = time.time() - procs.age_s()
    marks: dict[str, float] = {}
    real = jobs.run

    def run(*a, on_progress=None, **k):
        marks.setdefault("launch", time.time())

        def seen(who, data):
            now = time.time()
            if data.get("phase") == "prepared":
                marks.setdefault("prepared", now)
            if isinstance(data.get("step"), int):
                marks.setdefault("first_step", now)
                marks["last_step"] = now
            if on_progress is not None:
                on_progress(who, data)
        out = real(*a, on_progress=seen, **k)
        marks["ranks_gone"] = time.time()
        return out

    jobs.run = run
    code = 0
    try:
        main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    marks["exit"] = time.time()
    Path(rec_path).write_text(json.dumps({"start": start, "marks": marks, "code": code}))
    sys.exit(code)


def observed(marks: dict[str, float], start: float) -> dict[str, float]:
    """The command's marks -> seconds per span (absent where the mark is)."""
    order = [("cli", "launch"), ("rank start-up", "prepared"), ("first step", "first_step"),
             ("other steps", "last_step"), ("trace + teardown", "ranks_gone"), ("after", "exit")]
    out, prev = {}, start
    for name, mark in order:
        if mark in marks:
            out[name] = marks[mark] - prev
            prev = marks[mark]
    return out


def once(argv: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="startup-phases-") as tmp:
        rec = Path(tmp) / "marks.json"
        out = Path(tmp) / "t.jsonl"
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        t = time.perf_counter()
        p = subprocess.run([sys.executable, __file__, "--inside", str(rec), "--", "train", *argv, *ONE_RUN,
                            "--out", str(out)], capture_output=True, text=True, timeout=900, env=env, cwd=tmp)
        wall = time.perf_counter() - t
        if p.returncode != 0 or not out.exists():
            raise SystemExit(f"train failed ({p.returncode}): {(p.stderr or p.stdout).strip()[-2000:]}")
        doc = json.loads(rec.read_text())
        record = json.loads(out.read_text().splitlines()[-1])
    steps = record.get("step_times_s") or []
    warm = record.get("warmup_steps", 0)
    steady = statistics.median(steps[warm:]) if steps[warm:] else None
    return {"wall": wall, "observed": observed(doc["marks"], doc["start"]), "phases": record.get("phases") or {},
            "steps_sum": sum(steps), "timed_sum": sum(steps[warm:]),
            "settle": [t / steady for t in steps[:WARMUP_SHOWN]] if steady else []}


def probe(code: str) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=300)
    return time.perf_counter() - t


def torchrun_probe() -> float:
    """torchrun's agent and rendezvous starting 2 ranks that only start the interpreter."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "--nnodes=1",
                    "--master-addr=127.0.0.1", "--master-port=0", "-m", "json.tool", "--help"],
                   check=True, capture_output=True, timeout=300)
    return time.perf_counter() - t


def fmt(xs: list[float]) -> str:
    return f"{statistics.median(xs):7.2f} [{min(xs):.2f}, {max(xs):.2f}]"


def table(runs: list[dict], key: str) -> list[str]:
    names = list(dict.fromkeys(n for r in runs for n in r[key]))
    return [f"  {n:<24} {fmt([r[key].get(n, 0.0) for r in runs])}" for n in names]


def study_case() -> tuple[list[str], bool]:
    """One default study, timed from outside -> its lines (wall, units, the train runs' phases), and whether
    the wall is within the target."""
    argv, target = STUDY
    with tempfile.TemporaryDirectory(prefix="startup-study-") as tmp:
        out = Path(tmp) / "study"
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        t = time.perf_counter()
        try:  # a study past STUDY_TIMEOUT_S is cut: what it recorded until then is still shown
            p = subprocess.run([sys.executable, "-m", "fabricbench", "study", *argv, "--out", str(out), "--quiet"],
                               capture_output=True, text=True, timeout=STUDY_TIMEOUT_S, env=env, cwd=tmp)
        except subprocess.TimeoutExpired:
            p = subprocess.CompletedProcess([], 124, "", f"cut after {STUDY_TIMEOUT_S} s")
        wall = time.perf_counter() - t
        docs = [json.loads(ln) for ln in (out / "results.jsonl").read_text().splitlines() if ln.strip()] \
            if (out / "results.jsonl").exists() else []
    lines = [f"# fabricbench study {' '.join(argv)}  (exit {p.returncode})",
             f"  {'wall (command to exit)':<24} {wall:7.2f}   target {target:g}"]
    if p.returncode != 0:
        lines.append("  stderr: " + (p.stderr or p.stdout).strip()[-600:].replace("\n", "\n  "))
    else:  # its answer (the verdict a faster study must keep), as the study printed it
        lines += ["  | " + ln for ln in p.stdout.strip().splitlines()[-STUDY_ANSWER_LINES:]]
    units = [d for d in docs if d.get("kind") == "study_unit"]
    trains = [d for d in docs if d.get("kind") == "train" and isinstance(d.get("phases"), dict)]
    for u in units:
        lines.append(f"  unit {u.get('name', '?'):<30} {u.get('duration_s') or 0:7.2f} s  {u.get('status')}")
    timed = sum(r["phases"].get("timed", 0.0) for r in trains)
    lines.append(f"  {'timed steps':<24} {timed:7.2f}   ({timed / wall:.1%} of the wall; {len(trains)} train runs)")
    if trains:
        lines.append("phases of its train runs (the records'):")
        lines += table([{"phases": r["phases"]} for r in trains], "phases")
    return lines, wall <= target


def run_case(case: str, runs: int, probes: bool) -> tuple[list[str], bool]:
    """One case's lines and whether its median wall is within its target."""
    if case == "study-1b":
        return study_case()
    argv, target = CASES[case]
    lines = [f"# fabricbench train {' '.join(argv)} {' '.join(ONE_RUN[:-1])}; median [min, max] of {runs} runs, s"]
    done = [once(argv) for _ in range(runs)]
    lines.append(f"  {'wall (command to exit)':<24} {fmt([r['wall'] for r in done])}   target {target:g}")
    lines.append(f"  {'steps in the record':<24} {fmt([r['steps_sum'] for r in done])}   "
                 f"(timed after warm-up: {statistics.median([r['timed_sum'] for r in done]):.2f})")
    share = [r["timed_sum"] / r["wall"] for r in done]
    lines.append(f"  {'measured share':<24} {statistics.median(share):7.1%}")
    settle = [statistics.median(r["settle"][i] for r in done) for i in range(min(len(r["settle"]) for r in done))]
    lines.append("  warm-up: step k / timed median (median over runs): "
                 + ", ".join(f"{i + 1}: {x:.2f}" for i, x in enumerate(settle)))
    lines.append("observed (the command's process; marks up to 0.2 s late):")
    lines += table(done, "observed")
    if any(r["phases"] for r in done):
        lines.append("phases (the record's own, slowest rank):")
        lines += table(done, "phases")
    lines.append(f"# load {os.getloadavg()[0]:.1f} at the end")
    if probes:
        lines.append("probes (each alone, fresh process):")
        for name, code in PROBES.items():
            lines.append(f"  {name:<24} {fmt([probe(code) for _ in range(runs)])}")
        lines.append(f"  {'torchrun, 2 idle ranks':<24} {fmt([torchrun_probe() for _ in range(runs)])}")
    return lines, statistics.median(r["wall"] for r in done) <= target


def main() -> int:
    if "--inside" in sys.argv:
        i = sys.argv.index("--inside")
        _inside(sys.argv[i + 1], sys.argv[sys.argv.index("--") + 1:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--case", choices=sorted([*CASES, "study-1b", *GROUPS]), default="cpu")
    ap.add_argument("--probes", action="store_true", help="also time the parts alone")
    ap.add_argument("--out", help="one file for the breakdown (one case)")
    ap.add_argument("--results", help="a folder: each case's breakdown in <case>.txt, written as it ends")
    a = ap.parse_args()
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    head = (f"# {platform.node()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} (1 min avg, at start), "
            f"python {platform.python_version()}, commit {rev.stdout.strip()}")
    ok = True
    for case in GROUPS.get(a.case, [a.case]):
        lines, within = run_case(case, a.runs, a.probes)
        ok &= within
        text = "\n".join([head, *lines])
        print(text, flush=True)
        if a.results:
            Path(a.results).mkdir(parents=True, exist_ok=True)
            (Path(a.results) / f"{case}.txt").write_text(text + "\n", encoding="utf-8")
        if a.out:
            Path(a.out).write_text(text + "\n", encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
