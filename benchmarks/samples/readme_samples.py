"""The terminal samples and report screenshots of README.md and docs/, regenerated from real runs at 80 columns.

    python3 benchmarks/samples/readme_samples.py                  # print the samples (as an 80-column terminal shows them)
    python3 benchmarks/samples/readme_samples.py --shots DIR      # and screenshot the CPU-lab report at 420 and 1280 px

1. `sweep`'s table for the H200 run recorded in benchmarks/samples/results/h200-1gpu/sweep_sample.jsonl (the records
   as measured, printed by the table `sweep` prints, at 80 columns): README.md and docs/sweep.md;
2. `compare` on 2 gloo ranks, run here: default against p2p-off (waived: gloo uses no NCCL) and lo:
   docs/fabrics.md;
3. `relate` on the CPU lab's study units (benchmarks/study/results/cpu-lab/study/units): docs/relate-lab.md
   (its table with intervals: benchmarks/relate/table.py);
--shots: the report screenshots of docs/study.md (benchmarks/samples/results/cpu-lab/report*.png).
Commands 2 and 3 run through a pseudo-terminal of 80 columns, exactly as a user sees them.
"""

from __future__ import annotations

import argparse
import glob
import io
import json
import sys
from pathlib import Path

from rich.console import Console

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from fabricbench.reporting import table as tables  # noqa: E402
from test_tables import run_pty  # noqa: E402  (the tests' 80-column pseudo-terminal)


def sweep_sample() -> str:
    recs = [json.loads(line) for line in (ROOT / "benchmarks/samples/results/h200-1gpu/sweep_sample.jsonl").open()]
    recs = [r for r in recs if r.get("kind") == "collective"]
    con = Console(width=80, force_terminal=True, color_system=None, file=io.StringIO())
    tables.render(con, f"fabricbench sweep: {recs[0]['engine']}, {recs[0]['nranks']} rank(s), fabric "
                       f"{recs[0].get('fabric') or 'default'}", tables.SWEEP_COLS, [tables.row(r) for r in recs])
    return con.file.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shots", help="write report screenshots here")
    args = ap.parse_args()
    print("== sweep (H200 records) ==")
    print(sweep_sample())
    print("== compare (2 gloo ranks, here) ==")
    rc, out = run_pty(["compare", "--engine", "torch", "--backend", "gloo", "--nprocs", "2", "--fabrics",
                       "default,lo:GLOO_SOCKET_IFNAME=lo,p2p-off", "--sizes", "1K-4M:x16", "--iters", "20",
                       "--warmup", "3"], timeout=600)
    print(out, f"(exit {rc})")
    print("== relate (CPU lab) ==")
    units = sorted(glob.glob(str(ROOT / "benchmarks/study/results/cpu-lab/study/units/sweep_*.jsonl"))) + \
        sorted(glob.glob(str(ROOT / "benchmarks/study/results/cpu-lab/study/units/train_*.jsonl")))
    rc, out = run_pty(["relate", *units])
    print(out.replace(str(ROOT) + "/", ""), f"(exit {rc})")
    if args.shots:
        shoot(Path(args.shots))


def shoot(folder: Path) -> None:
    """The CPU-lab study report in headless chromium at a phone's and a desktop's width."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from test_report_browser import CHROMIUM, DRIVER

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--hide-scrollbars"):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=opts)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for width, height in ((420, 1600), (1280, 1000)):
            driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                   {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 800})
            driver.get((ROOT / "benchmarks/study/results/cpu-lab/study/report.html").as_uri())
            driver.save_screenshot(str(folder / f"report-{width}px.png"))
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
