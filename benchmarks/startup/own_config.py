"""A run's fixed cost with the user's own model config against a built-in model, and whether the records'
phases add up to the wall a user waits.

    python3 benchmarks/startup/own_config.py --case cpu --runs 3 --results benchmarks/startup/results/cpu-DATE
    python3 benchmarks/startup/own_config.py --case cpu-study --results DIR   (a small CPU study: its wall and report)
    python3 benchmarks/startup/own_config.py --case gpu --results DIR      (one GPU: benchmarks/startup/gpu.sh)

cpu: `python -c "import torch"`, then tiny-mistral DDP on 2 gloo ranks with --model tiny-mistral and with
--model-config of the same numbers (tiny-mistral.json, written here), interleaved (ABBA), --runs rounds; the best of
each against the best import (target: 3x), and each run's phase total against the wall measured around it;
CPU seconds of each command's whole process tree beside the wall (what a loaded host changes least).
gpu: DDP of the built-in mistral-1b and of a held-out 1B Llama-shaped config (llama-1b.json, TinyLlama's
numbers: no row of fabricbench's models), each first on an empty bytecode cache and page cache ("fresh"),
then --runs interleaved rounds ("warm"); then a default study of the config, ddp and fsdp on one fabric:
its wall, its units by kind, its train records' phases against their units, its verdict.

Each command is the real one in a fresh process, timed from outside (perf_counter around it). The host's
load average and the other processes' CPU (fabricbench.hostload) are printed beside each figure: on a
loaded machine the figures are high and wide. Everything printed goes to DIR/<case>.txt too.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fabricbench import hostload
from fabricbench.training import models

ONE_RUN = ["--strategies", "ddp", "--repeats", "1", "--target-ci", "0", "--json"]
CPU = ["--device", "cpu", "--nprocs", "2"]
GPU = ["--gpus", "0"]
# TinyLlama-1.1B's numbers (a 1B Llama the project's models never held): GQA 32/4, untied, rms eps 1e-5
LLAMA_1B = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 2048,
            "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4,
            "vocab_size": 32000, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
            "hidden_act": "silu", "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
            "torch_dtype": "float32"}
STUDY = ["--gpus", "0", "--fabrics", "default", "--strategies", "ddp,fsdp"]
# the same study on 2 gloo ranks, at the end-to-end tests' small sizes (the CPU host: the report's wall)
CPU_STUDY = ["--device", "cpu", "--nprocs", "2", "--fabrics", "default", "--strategies", "ddp,fsdp", "--steps", "4",
             "--warmup-steps", "1", "--max-steps", "8", "--batch-size", "2", "--seq-len", "32", "--iters", "3",
             "--warmup", "1", "--repeats", "1"]
STUDY_TIMEOUT_S = 200
PHASE_TOLERANCE = 0.02  # a record's phase total within 2% of the wall measured around its command


class Log:
    def __init__(self, path: Path | None) -> None:
        self.lines: list[str] = []
        self.path = path

    def __call__(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)
        if self.path is not None:
            self.path.write_text("\n".join(self.lines) + "\n")


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f}/{five:.2f} on {os.cpu_count()} CPUs"


CPU_S: list[float] = []  # the last command's CPU seconds, its whole tree (the ranks are waited for by it)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def command(argv: list[str], timeout_s: float = 600) -> tuple[float, subprocess.CompletedProcess, float | None]:
    """The command in a fresh process -> (wall s, the process, the other processes' CPUs during it); its CPU
    seconds (user + system, every process of its tree) in CPU_S[-1]: a load-proof view of what it costs."""
    with hostload.watch() as watched:
        c0, t0 = _children_cpu(), time.perf_counter()
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        wall = time.perf_counter() - t0
        CPU_S.append(_children_cpu() - c0)
    other = round(watched.load.others_cpus, 2) if watched.load is not None else None
    return wall, p, other


def train(args: list[str], out: Path) -> dict:
    """One `fabricbench train` run -> its wall, its record's phase total and the ratio of the two."""
    out.unlink(missing_ok=True)
    wall, p, other = command([sys.executable, "-m", "fabricbench", "train", *args, *ONE_RUN, "--out", str(out)])
    recs = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    rec = recs[-1] if recs else {}
    total = (rec.get("phases") or {}).get("total")
    return {"wall": wall, "cpu": CPU_S[-1], "rc": p.returncode, "status": rec.get("status"), "total": total,
            "other": other,
            "impl": rec.get("model_impl"), "params": rec.get("params"), "phases": rec.get("phases") or {},
            "median_step": (rec.get("step_time") or {}).get("median_s"), "err": p.stderr.strip()[-300:]}


def shown(r: dict) -> str:
    gap = (r["wall"] - r["total"]) / r["wall"] if r["total"] else None
    ph = r["phases"]
    return (f"wall {r['wall']:6.2f} s  CPU {r['cpu']:6.2f} s  phases {r['total'] or float('nan'):6.2f} s  "
            f"({'n/a' if gap is None else f'{gap:+.1%}'} of the wall outside them)  status {r['status']}  "
            f"impl {r['impl']}  " + " ".join(f"{k} {v:.2f}" for k, v in ph.items() if k != "total" and
                                             isinstance(v, (int, float)))
            + f"  other CPUs {r['other'] if r['other'] is not None else '?'}"
            + (f"  rc {r['rc']}: {r['err']}" if r["rc"] else ""))


def within(runs: list[dict]) -> str:
    gaps = [abs(r["wall"] - r["total"]) / r["wall"] for r in runs if r["total"]]
    ok = sum(g <= PHASE_TOLERANCE for g in gaps)
    return (f"phase totals within {PHASE_TOLERANCE:.0%} of the wall: {ok} of {len(runs)} runs "
            f"(largest gap {max(gaps):.1%})" if gaps else "no phases recorded")


def spread(xs: list[float]) -> str:
    return f"best {min(xs):.2f} s, median {statistics.median(xs):.2f} s [{min(xs):.2f}, {max(xs):.2f}] over {len(xs)}"


def clear_caches() -> str:
    """An empty fabricbench bytecode cache and, where root may, an empty page cache: a fresh machine's start."""
    shutil.rmtree(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fabricbench" / "pycache",
                  ignore_errors=True)
    try:
        subprocess.run(["sync"], check=False)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return "bytecode and page caches emptied"
    except OSError:
        return "bytecode cache emptied (page cache kept: not root)"


def cpu_case(log: Log, runs: int, work: Path) -> None:
    cfg = tiny_config(work)
    log(f"cpu: tiny-mistral DDP on 2 gloo ranks, --model and --model-config ({cfg.name}); {load()}")
    imports, import_cpu, built, own = [], [], [], []
    for i in range(runs):
        wall, p, other = command([sys.executable, "-c", "import torch"])
        imports.append(wall)
        import_cpu.append(CPU_S[-1])
        log(f"  round {i + 1}: import torch {wall:.2f} s, CPU {CPU_S[-1]:.2f} s (other CPUs {other}); {load()}")
        order = ("built", "own") if i % 2 == 0 else ("own", "built")  # ABBA: a drift of the load hits both alike
        for which in order:
            if which == "built":
                built.append(train([*CPU, "--model", "tiny-mistral"], work / "b.jsonl"))
                log(f"    --model tiny-mistral        {shown(built[-1])}")
            else:
                own.append(train([*CPU, "--model-config", str(cfg)], work / "c.jsonl"))
                log(f"    --model-config {cfg.name}  {shown(own[-1])}")
    best = min(imports)
    log(f"import torch: {spread(imports)}; CPU best {min(import_cpu):.2f} s")
    for name, rs in (("--model tiny-mistral", built), ("--model-config", own)):
        walls = [r["wall"] for r in rs if r["rc"] == 0]
        if walls:
            cpus = [r["cpu"] for r in rs if r["rc"] == 0]
            log(f"{name}: {spread(walls)}; best / best import torch = {min(walls) / best:.2f}x (target 3x); "
                f"{within(rs)}; CPU best {min(cpus):.2f} s = {min(cpus) / min(import_cpu):.2f}x import torch's "
                f"(2 ranks: a quiet 2-CPU host overlaps them)")
    if own and built:
        for what in ("wall", "cpu"):
            pairs = [o[what] / b[what] for o, b in zip(own, built) if o["rc"] == 0 and b["rc"] == 0]
            if pairs:
                log(f"config / built-in {what}, paired by round: median {statistics.median(pairs):.3f} "
                    f"[{min(pairs):.3f}, {max(pairs):.3f}]")


def gpu_case(log: Log, runs: int, work: Path, results: Path | None) -> None:
    cfg = (results or work) / "llama-1b.json"
    cfg.write_text(json.dumps(LLAMA_1B, indent=1))
    log(f"gpu: DDP of mistral-1b (built-in) and of {cfg.name} (held-out, TinyLlama's numbers); {load()}")
    cases = {"mistral-1b": [*GPU, "--model", "mistral-1b"], "llama-1b config": [*GPU, "--model-config", str(cfg)]}
    fresh, warm = {}, {name: [] for name in cases}
    for name, args in cases.items():
        how = clear_caches()
        fresh[name] = train(args, work / "f.jsonl")
        log(f"  fresh ({how}) {name:<16} {shown(fresh[name])}")
    for i in range(runs):
        for name, args in cases.items():
            warm[name].append(train(args, work / "w.jsonl"))
            log(f"  warm {i + 1} {name:<16} {shown(warm[name][-1])}")
    for name in cases:
        walls = [r["wall"] for r in warm[name] if r["rc"] == 0]
        if walls:
            log(f"{name}: fresh {fresh[name]['wall']:.2f} s; warm {spread(walls)}; "
                f"{within([fresh[name], *warm[name]])}")
    b, c = warm["mistral-1b"], warm["llama-1b config"]
    pairs = [y["wall"] / x["wall"] for x, y in zip(b, c) if x["rc"] == 0 and y["rc"] == 0]
    if pairs:
        log(f"config / built-in (warm, paired by round): median {statistics.median(pairs):.3f} "
            f"[{min(pairs):.3f}, {max(pairs):.3f}] (target: within 15%); fresh "
            f"{fresh['llama-1b config']['wall'] / fresh['mistral-1b']['wall']:.3f}; warm config median "
            f"{statistics.median(r['wall'] for r in c):.2f} s (target 7 s)")
    study(log, cfg, work, results, STUDY)


def tiny_config(work: Path) -> Path:
    cfg = work / "tiny-mistral.json"
    spec = models.MODELS.get("tiny-mistral")
    cfg.write_text(json.dumps({"model_type": "mistral", "architectures": ["MistralForCausalLM"], **spec.settings}))
    return cfg


def study(log: Log, cfg: Path, work: Path, results: Path | None, args: list[str],
          timeout_s: float = STUDY_TIMEOUT_S) -> None:
    out = work / "study"
    shutil.rmtree(out, ignore_errors=True)
    log(f"study: fabricbench study {' '.join(args)} --model-config {cfg.name}; {load()}")
    try:
        wall, p, other = command([sys.executable, "-m", "fabricbench", "study", *args, "--model-config", str(cfg),
                                  "--out", str(out)], timeout_s=timeout_s)
    except subprocess.TimeoutExpired:
        log(f"  study: over {STUDY_TIMEOUT_S} s, stopped")
        return
    log(f"  wall {wall:.1f} s (target 90 s), exit {p.returncode}, other CPUs {other}")
    recs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()] \
        if (out / "results.jsonl").exists() else []
    units = [r for r in recs if r.get("kind") == "study_unit"]
    by_kind: dict[str, float] = {}
    for u in units:
        by_kind[u["unit_kind"]] = by_kind.get(u["unit_kind"], 0.0) + u["duration_s"]
        log(f"  unit {u['name']:<26} {u['status']:<8} {u['duration_s']:6.1f} s")
    log("  by kind: " + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1]))
        + f"; units {sum(by_kind.values()):.1f} s of the {wall:.1f} s wall")
    trains = [r for r in recs if r.get("kind") == "train"]
    dur = {u["name"]: u["duration_s"] for u in units}
    timed = sum((r.get("phases") or {}).get("timed", 0.0) for r in trains)
    log(f"  timed steps {timed:.1f} s = {timed / wall:.1%} of the wall (target: a third)")
    for r in trains:
        unit = (r.get("study") or {}).get("unit")
        total = (r.get("phases") or {}).get("total")
        if unit in dur and total:
            log(f"  {unit}: record's phases {total:.2f} s of its unit's {dur[unit]:.2f} s "
                f"({(dur[unit] - total) / dur[unit]:+.1%} outside)")
    for r in trains:  # each run's timed steps: what the run-to-run spread of a strategy is made of
        steps = r.get("step_times_s") or []
        log(f"  {(r.get('study') or {}).get('unit')}: timed steps (ms) "
            + " ".join(f"{x * 1e3:.0f}" for x in steps[int(r.get('warmup_steps') or 0):]))
    if results is not None and (out / "results.jsonl").exists():
        shutil.copy(out / "results.jsonl", results / "study-results.jsonl")
    report = out / "report.md"
    if report.exists():
        text = report.read_text()
        if results is not None:
            (results / "study-report.md").write_text(text)
        said = text.split("The study took ", 1)[1].split(" s ", 1)[0] if "The study took " in text else None
        if said is not None:
            log(f"  the report's wall {said} s against {wall:.1f} s measured around the command "
                f"(which adds the report's own writing after its last unit)")
        grab = [line for line in text.splitlines() if "faster" in line or "equivalent" in line][:6]
        log("  verdict lines:\n    " + "\n    ".join(grab))
        at = text.find("## Where the time went")
        if at >= 0:
            log("  " + text[at:at + 2500].replace("\n", "\n  "))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", choices=("cpu", "cpu-study", "gpu"), required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--results", type=Path, help="folder for <case>.txt (and the study's report, gpu)")
    a = ap.parse_args()
    if a.results:
        a.results.mkdir(parents=True, exist_ok=True)
    log = Log(a.results / f"{a.case}.txt" if a.results else None)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    log(f"# benchmarks/startup/own_config.py --case {a.case} --runs {a.runs}; {when}")
    with tempfile.TemporaryDirectory(prefix="fb-startup-") as tmp:
        work = Path(tmp)
        if a.case == "cpu":
            cpu_case(log, a.runs, work)
        elif a.case == "cpu-study":
            study(log, tiny_config(work), work, a.results, CPU_STUDY, timeout_s=1200)
        else:
            gpu_case(log, a.runs, work, a.results)


if __name__ == "__main__":
    main()
