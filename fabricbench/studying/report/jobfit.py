"""The study report's "A job against this fabric" section: a job's NCCL Inspector records, imported into the
study's results.jsonl, set against the study's own sweep (relating/jobfit.py decides; this only lays it out).

    fabricbench import nccl-inspector-42/*.log --out study/results.jsonl && fabricbench report study/

Nothing is added when the study holds no job records.
"""

from __future__ import annotations

from typing import Any

from fabricbench.errors import UsageError
from fabricbench.relating import jobfit
from fabricbench.reporting.document import Document
from fabricbench.results.schema import CollectiveResult
from fabricbench.sizes import format_size


def add(doc: Document, records: list[dict[str, Any]], sweep: list[CollectiveResult]) -> None:
    job = jobfit.job_records(records)
    if not job:
        return
    s = doc.section("A job against this fabric", intro=(
        f"{len(job)} collective call(s) a job ran, read from NCCL Inspector output imported into this study, "
        f"beside this study's sweep at the same sizes (fabricbench jobfit)."))
    for fabric in sorted({r.fabric for r in sweep}) or [None]:
        try:
            res = jobfit.fit(job, [r for r in sweep if r.fabric == fabric], fabric=fabric)
        except UsageError as e:
            s.text(f"Not compared: {e}.")
            return
        s.table(["op", "ranks", "size", "calls", "job busbw (GB/s)", "p10-p90", "sweep busbw (GB/s)", "ratio",
                 "verdict"],
                [[r.op, r.nranks, format_size(r.size_bytes), r.calls, r.job_busbw, f"{r.job_p10:.3g}-{r.job_p90:.3g}",
                  r.sweep_busbw, r.ratio, r.verdict] for r in res.rows],
                caption=f"fabric {res.fabric}: short = the job's interval lies below the sweep's noise band")
        s.bullets(res.findings or ["Every (op, size) the job ran is as swept, within the sweep's noise."])
        if res.problems:
            s.bullets([f"note: {p}" for p in res.problems])
