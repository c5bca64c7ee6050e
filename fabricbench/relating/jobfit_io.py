"""Reading a job's Inspector output and a sweep for `fabricbench jobfit`, and printing and drawing the result.

    fabricbench jobfit --job nccl-inspector-42/ --sweep sweep.jsonl --plot jobfit.png

--job: Inspector files (.log, .jsonl, .gz, .prom), folders of them, or fabricbench records already imported.
--sweep: a results file, or a study folder (its results.jsonl). The table fits 80 columns.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fabricbench.errors import UsageError
from fabricbench.files import check_input
from fabricbench.importing import import_file
from fabricbench.relating.jobfit import SHORT, JobFit, job_records
from fabricbench.relating.curves import size_3sig
from fabricbench.results import records as results_records
from fabricbench.results.schema import CollectiveResult

STUDY_RESULTS = "results.jsonl"  # a study folder's records (studying/records.py writes it)
_SUFFIXES = (".log", ".jsonl", ".json", ".gz", ".prom")


def load_job(paths: list[str | os.PathLike]) -> tuple[list[dict[str, Any]], list[str]]:
    """The job's observed collective records and the warnings met reading them."""
    recs: list[dict[str, Any]] = []
    warnings: list[str] = []
    empty: list[str] = []
    for p in paths:
        p = Path(p)
        files = sorted(f for f in p.iterdir() if f.is_file() and f.name.endswith(_SUFFIXES)) if p.is_dir() else [p]
        if p.is_dir() and not files:
            raise UsageError(f"--job {p}: a folder with no Inspector file (*.log, *.jsonl, *.gz, *.prom)")
        for f in files:
            check_input(f, what="--job")
            if p.is_dir() and f.stat().st_size == 0:  # an Inspector dump of a rank that recorded nothing
                empty.append(f.name)
                continue
            with f.open("rb") as fh:
                head = fh.read(64)
            if head.lstrip().startswith(b'{"schema":') or head.lstrip().startswith(b'{"schema" :'):
                got = results_records.read_nonempty(f, what="--job")
                recs += got.records
                warnings += got.warnings
            else:
                imp = import_file(f)
                recs += imp.records
                warnings += imp.warnings
    if empty:
        warnings.append(f"{len(empty)} empty file(s) skipped ({', '.join(empty[:3])}{', ...' if len(empty) > 3 else ''})")
    job = job_records(recs)
    if not job:
        raise UsageError("--job: no collective observed in a job (NCCL Inspector records) in "
                         + ", ".join(str(p) for p in paths)
                         + (f"; its {len(empty)} file(s) are empty: the job ran no collective of 2 or more ranks"
                            if empty and not recs else ""))
    return job, warnings


def load_sweep(path: str | os.PathLike) -> tuple[list[CollectiveResult], list[str]]:
    p = Path(path)
    if p.is_dir():
        p = p / STUDY_RESULTS
        if not p.exists():
            raise UsageError(f"--sweep {path}: a folder without {STUDY_RESULTS} (give a results file or a study folder)")
    got = results_records.read_nonempty(p, what="--sweep")
    typed, problems = results_records.typed(got.of_kind("collective"), CollectiveResult, source=str(p))
    return typed, got.warnings + problems


def _gb(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def format_text(res: JobFit) -> str:
    """The table (80 columns) and the findings."""
    lines = [f"Job against the sweep on fabric {res.fabric}: busbw GB/s, job median and p10-p90",
             f"{'op':<13}{'n':>3}{'size':>7}{'calls':>6}{'job':>9}{'p10-p90':>16}{'sweep':>9}{'ratio':>6}  verdict"]
    for r in res.rows:
        spread = f"{_gb(r.job_p10)}-{_gb(r.job_p90)}"
        ratio = "-" if r.ratio is None else f"{r.ratio:.2f}"
        lines.append(f"{r.op[:13]:<13}{r.nranks:>3}{size_3sig(r.size_bytes):>7}{r.calls:>6}{_gb(r.job_busbw):>9}"
                     f"{spread:>16}{_gb(r.sweep_busbw):>9}{ratio:>6}  {r.verdict}")
    short = sum(r.verdict == SHORT for r in res.rows)
    lines.append(f"{short} of {len(res.rows)} (op, size) group(s) short of the sweep by more than its noise")
    lines += [f"- {f}" for f in res.findings]
    lines += [f"note: {p}" for p in res.problems]
    return "\n".join(lines)


def plot(res: JobFit, job: list[dict[str, Any]], path: str) -> None:
    """Job busbw per call (points) and the swept busbw at the same sizes (line), one panel per op."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib (pip install matplotlib)") from None
    ops = sorted({r.op for r in res.rows})
    fig, axes = plt.subplots(1, len(ops), figsize=(5 * len(ops), 4), squeeze=False)
    for ax, op in zip(axes[0], ops):
        pts = [(r.get("bytes"), r.get("busbw_gbps")) for r in job if r.get("op") == op and r.get("bytes")]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=6, alpha=0.4, label="job calls")
        rows = [r for r in res.rows if r.op == op and r.sweep_busbw]
        ax.plot([r.size_bytes for r in rows], [r.sweep_busbw for r in rows], "k-o", label=f"sweep ({res.fabric})")
        ax.set_xscale("log")
        ax.set_xlabel("S (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title(op)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
