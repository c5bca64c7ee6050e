"""Do a study's answers agree with its own comparisons, run after run on a loaded machine?

    python3 benchmarks/study/answers_agree.py --runs 3 --work /tmp/agree      # a CPU study 3 times, then checks
    python3 benchmarks/study/answers_agree.py --check FOLDER [FOLDER ...]     # studies already run (stdout kept:
                                                                              # FOLDER.stdout or FOLDER/terminal.txt)

Each run is `fabricbench study --device cpu --nprocs 2 --strategies ddp,fsdp --model tiny-mistral`, its
terminal output kept beside it (FOLDER.stdout). For every paired comparison `report --json` gives, the
checks are that
- the terminal's answer says that comparison's sentence, and its count line counts the same verdicts;
- report.md's "In short" says the same sentence, names "the fastest" on a fabric only where a comparison
  there says "faster" for it, and says "no strategy is shown faster" only where none does;
- the advice table's "run" column is the comparison's winner, "either (...)" where it found them
  equivalent, and "undecided" where it could not tell.
Prints one line per run (its verdicts, the host's load) and a line per disagreement; exit 1 on any.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

STUDY = ["study", "--device", "cpu", "--nprocs", "2", "--strategies", "ddp,fsdp", "--model", "tiny-mistral"]


def _unwrapped(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _section(md: str, title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", md, re.S | re.M)
    return m.group(1) if m else ""


def _advice_rows(md: str) -> dict[str, str]:
    """fabric -> the "run" column of the table under "the strategy to run on each fabric"."""
    rows = {}
    at = md.find("the strategy to run on each fabric")
    for line in md[at:].splitlines()[1:] if at >= 0 else []:
        if line.startswith("| fabric") or line.startswith("|:"):
            continue
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1]
    return rows


def check(folder: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "fabricbench", "report", folder, "--json"], capture_output=True,
                         text=True, timeout=300)
    if out.returncode != 0:
        return [f"report --json exit {out.returncode}: {out.stderr.strip()[-300:]}"]
    comps = json.loads(out.stdout)["comparisons"]
    said = folder.rstrip("/") + ".stdout"  # beside the folder as run here; inside it as committed
    terminal = _unwrapped(open(said if os.path.exists(said) else os.path.join(folder, "terminal.txt")).read())
    md = open(os.path.join(folder, "report.md")).read()
    short = _unwrapped(_section(md, "In short"))
    advice = _advice_rows(md)
    bad = []
    counts: dict[str, int] = {}
    for c in comps:
        counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
        said = _unwrapped(c["text"])
        if said not in terminal:
            bad.append(f"the terminal does not say: {said}")
        if said not in short:
            bad.append(f"In short does not say: {said}")
        f = c.get("fabric")
        want = (c["a"] if c["verdict"] == "faster" else f"either ({c['a']} or {c['b']})"
                if c["verdict"] == "equivalent" else "undecided")
        if f in advice and advice[f] != want:
            bad.append(f"advice on {f} says run {advice[f]!r}, its comparison {want!r} ({c['verdict']})")
    m = re.search(r"answers \(.*?\): (.*?) on ", terminal)  # "answers (1 comparison(s), ...): undecided 1 on ..."
    told = {w: int(n) for w, n in re.findall(r"(faster|equivalent|undecided) (\d+)", m.group(1))} if m else {}
    if told != counts:
        bad.append(f"the terminal counts {told}, the comparisons {counts}")
    for fab, who in re.findall(r"on \*\*(\S+?)\*\* the fastest: \*\*(\S+?)\*\*", _section(md, "In short")):
        if not any(c.get("fabric") == fab and c["verdict"] == "faster" and c["a"] == who for c in comps):
            bad.append(f"In short names {who} the fastest on {fab}, which no comparison says")
    for fab in re.findall(r"on \*\*(\S+?)\*\* no strategy is shown faster", _section(md, "In short")):
        if any(c.get("fabric") == fab and c["verdict"] == "faster" for c in comps):
            bad.append(f"In short says nothing is shown faster on {fab}, where a comparison says faster")
    return bad


def _load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default="/tmp/fabricbench-answers-agree")
    ap.add_argument("--check", nargs="*", default=None, help="study folders already run (their .stdout beside)")
    args = ap.parse_args()
    folders = args.check or []
    if args.check is None:
        os.makedirs(args.work, exist_ok=True)
        for i in range(1, args.runs + 1):
            folder = os.path.join(args.work, f"study{i}")
            t0, before = time.monotonic(), _load()
            with open(folder + ".stdout", "w") as so:
                r = subprocess.run([sys.executable, "-m", "fabricbench", *STUDY, "--out", folder], stdout=so,
                                   stderr=subprocess.DEVNULL, timeout=3600)
            print(f"run {i}: exit {r.returncode}, {time.monotonic() - t0:.0f} s, load {before} before, "
                  f"{_load()} after", flush=True)
            folders.append(folder)
    failed = 0
    for folder in folders:
        out = subprocess.run([sys.executable, "-m", "fabricbench", "report", folder, "--json"], capture_output=True,
                             text=True, timeout=300)
        verdicts = [f"{c['a']}/{c['b']} on {c.get('fabric')}: {c['verdict']} {c['ratio']:.2f}x "
                    f"[{c['ci95'][0]:.2f}, {c['ci95'][1]:.2f}]" for c in json.loads(out.stdout)["comparisons"]] \
            if out.returncode == 0 else []
        bad = check(folder)
        failed += bool(bad)
        print(f"{folder}: {'; '.join(verdicts) or 'no comparison'}: {'AGREE' if not bad else 'DISAGREE'}")
        for b in bad:
            print(f"    {b}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
