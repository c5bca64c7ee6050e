"""A user's study: its plan and estimate (nothing runs), the study itself, and its report written again."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import fabricbench


def config() -> fabricbench.StudyConfig:
    return fabricbench.StudyConfig(out="lab", device="cpu", nprocs=2, fabrics=("default", "shaped:1gbit"),
                                   strategies=("ddp", "fsdp"), model="lab-mistral")


def plan(cfg: fabricbench.StudyConfig) -> list[tuple[str, float]]:
    sp: fabricbench.StudyPlan = fabricbench.study_plan(cfg)
    print(f"about {sp.estimate_s:.0f} s in all")
    return [(u.name, u.estimate_s) for u in sp.plan]


def run(cfg: fabricbench.StudyConfig) -> Path | None:
    st: fabricbench.StudyResult = fabricbench.study(cfg)
    counts: dict[str, int] = st.counts()
    print(st.ok, counts, [(u.unit.name, u.status, u.duration_s) for u in st.units])
    return st.report_html


def again(folder: str) -> bool:
    stored: fabricbench.StudyConfig = fabricbench.stored_study(folder)  # the settings the folder holds
    return fabricbench.study(stored).ok


def report(folder: str) -> str | None:
    rp: fabricbench.ReportResult = fabricbench.report(fabricbench.ReportConfig(folder=folder, write=False))
    return str(rp.markdown) if rp.markdown else None


if __name__ == "__main__":
    cfg = config()
    print(plan(dataclasses.replace(cfg, out="lab2")), run(cfg), again("lab"), report("lab"))
