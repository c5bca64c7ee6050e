"""The study report put together: the Document (report.md, report.html) and the JSON summary, from
results.jsonl alone; each section is written by its own module."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import fabricbench
from fabricbench.errors import FabricbenchError, UsageError
from fabricbench.importing import beside
from fabricbench.statistics import comparison
from fabricbench.relating.format import REFERENCE_JUDGED, judged
from fabricbench.reporting.document import Document
from fabricbench.results.schema import CollectiveResult, TrainResult
from fabricbench.studying import records as study_records
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.report import jobfit as jobfit_section, references as references_section
from fabricbench.studying.report.advice import advice_section
from fabricbench.studying.report.bandwidth import busbw_section, scaling_section
from fabricbench.studying.report.command import reproduce_section, study_command
from fabricbench.studying.report.common import Figs, batch_of, gpu_name, question_summary, unit_records
from fabricbench.studying.report.machine import machine_section
from fabricbench.studying.report.nodes import nodes_section
from fabricbench.studying.report.relate import relate_section
from fabricbench.studying.report.short import in_short
from fabricbench.studying.report.time import time_section
from fabricbench.studying.report.training import memory_section, throughput_section
from fabricbench.training import repeats


def build(out_dir: str | Path) -> Document:
    sr = study_records.load(out_dir)
    plan = (sr.plan or {}).get("study")
    if not isinstance(plan, dict) or not isinstance(plan.get("config"), dict):
        raise UsageError(f"{out_dir}: its {study_records.RESULTS} holds no readable study plan record; "
                         f"is it a `fabricbench study --out DIR` folder?")
    try:
        stored = StudyConfig.from_dict(plan["config"])  # fabrics masked (StudyConfig.to_dict)
    except (TypeError, ValueError) as e:
        raise UsageError(f"{out_dir}: the study plan record is damaged ({str(e).splitlines()[0][:120]})") from None
    # records and units name a fabric by its name ("sec", never "sec:MY_TOKEN=..."): so does the report,
    # except in the command that reruns the study
    config = stored.labelled()
    figs = Figs()
    try:
        return _build(sr, config, figs, command=study_command(stored))
    finally:
        figs.close()


def summary(out_dir: str | Path) -> dict[str, Any]:
    """The study's machine-readable summary (`fabricbench report DIR --json`, and its "summary" record):
    the comparisons with their verdicts (strategies on each fabric, each fabric against the first),
    rankings derived from them, each slowdown as a paired ratio, each (strategy, fabric) figure with its
    run-to-run interval, host-bound notes, the batch the study picked, and relate's predictions."""
    sr = study_records.load(out_dir)
    stored = StudyConfig.from_dict(sr.plan["study"]["config"])
    config = stored.labelled()  # as the records name them
    trains = sr.typed(TrainResult)
    out = question_summary(trains, config)
    batch = next(iter(sr.of_kind("batch")[-1:]), None)
    out["batch"] = {**{k: batch.get(k) for k in ("chosen", "why", "curve", "rule", "decision")},
                    # an earlier release's study folder names it "margin"
                    "clearance": batch.get("clearance", batch.get("margin"))} if batch else \
        {"chosen": config.batch_size, "why": "--batch-size"}
    rel = _relate(config, trains, unit_records(sr.typed(CollectiveResult), "sweep"))
    out["relate"] = [{"strategy": r.strategy, "fabric": r.fabric, "predicted_slowdown": r.predicted_slowdown,
                      "predicted_ci95": getattr(r, "predicted_slowdown_ci95", None),
                      "observed_slowdown": r.observed_slowdown,
                      "observed_ci95": getattr(r, "observed_slowdown_ci95", None), "judged": judged(r)}
                     for r in getattr(rel, "rows", [])]
    return out


def answer_lines(out_dir: str | Path, width: int = 80, *, summ: dict[str, Any] | None = None) -> list[str]:
    """What `fabricbench study` and `fabricbench report` end with: the verdicts, at `width` columns, from
    `summ` (the folder's summary, when the caller has it already) or the folder's records."""
    try:
        summ = summary(out_dir) if summ is None else summ
    except FabricbenchError as e:  # nothing readable to answer from: say so, never fail the command on it
        return [f"answers: none ({str(e).splitlines()[0][:160]})"]
    comps, busy = summ["comparisons"], repeats.busy_lines(summ["busy_host"], width=width)
    if not comps:
        return ["answers: no comparison (one strategy on one fabric, or nothing measured)"] + busy
    n = {v: sum(c["verdict"] == v for c in comps) for v in ("faster", "equivalent", "undecided")}
    head = (f"answers ({len(comps)} comparison(s), 95% intervals, margin ±{summ['margin']:.0%}): "
            + ", ".join(f"{k} {v}" for k, v in n.items() if v))
    said = [dict(cm, text=repeats.said(cm)) for cm in comps]  # a verdict built on a busy host's run says so
    return textwrap.wrap(head, width=width) + repeats.verdict_lines(said, width=width) + busy + \
        relate_lines(summ["relate"], width) + _more_rounds(out_dir, comps, width)


def _more_rounds(out_dir, comps: list[dict[str, Any]], width: int) -> list[str]:
    """The command that adds the rounds the undecided comparisons ask for ("about 15 rounds would settle
    it"), where that is more than they had: --resume takes a raised --max-repeats and nothing else changes."""
    need = max((cm.get("rounds_needed") or 0 for cm in comps if cm["verdict"] == "undecided"
                and (cm.get("rounds_needed") or 0) <= comparison.MAX_ROUNDS_GUESS), default=0)
    if need <= max((cm.get("rounds") or 0 for cm in comps), default=0):
        return []
    return textwrap.wrap(f"more rounds: fabricbench study --out {out_dir} --resume --max-repeats {need} (the "
                         f"rounds the undecided comparisons ask for; nothing else changes)", width=width,
                         subsequent_indent="    ")


def relate_lines(rows: list[dict[str, Any]], width: int = 80) -> list[str]:
    """relate's answer as the study ends with it: each fabric's step slowdown observed against the one its
    busbw predicts, judged with both intervals (the report's relate table, the reference's own rows left
    out: 1× by definition)."""
    def x(v, ci):
        return "-" if v is None else f"{v:.2f}×" + (f" [{ci[0]:.2f}-{ci[1]:.2f}]" if ci else "")

    out = []
    for r in rows:
        if r["judged"] == REFERENCE_JUDGED:
            continue
        line = (f"relate: {r['strategy']} on {r['fabric']}: step {x(r['observed_slowdown'], r['observed_ci95'])} "
                f"slower observed, {x(r['predicted_slowdown'], r['predicted_ci95'])} predicted from busbw: "
                f"{r['judged']}")
        out += textwrap.wrap(line, width=width, subsequent_indent="    ")
    return out


def write_report(out_dir: str | Path) -> tuple[Path, Path]:
    return build(out_dir).write(out_dir, stem="report")


def _build(sr: study_records.StudyRecords, c: StudyConfig, figs: Figs, *, command: str) -> Document:
    machine = next(iter(sr.of_kind("machine")), None)
    trains = sr.typed(TrainResult)
    collectives = sr.typed(CollectiveResult)
    colls = unit_records(collectives, "sweep")
    scaling = unit_records(collectives, "scaling")
    estimate = next(iter(sr.of_kind("estimate")), None)
    relate = _relate(c, trains, colls)
    where = (f"{c.nprocs} CPU ranks (gloo)" if c.device == "cpu" else
             f"{len(c.gpus)} × {gpu_name(machine)} (GPUs {','.join(map(str, c.gpus))})")
    if c.nnodes > 1:
        where = f"{c.nnodes} nodes × {where}"
    host = sr.plan.get("host", "?")
    started = (sr.plans[0].get("timestamp") or "")[:19].replace("T", " ")
    doc = Document(f"fabricbench study: {c.model_label} on {where}",
                   subtitle=f"{host}, started {started} UTC; fabrics {', '.join(c.fabrics_shown)}; "
                            f"strategies {', '.join(c.strategies)}")
    advice = _advice(sr, c, machine, trains)
    in_short(doc, sr, c, trains, colls, advice)
    machine_section(doc, sr, c, machine, colls, trains, figs)
    nodes_section(doc, sr, c, trains, collectives)
    # `fabricbench import`ed results appended to results.jsonl: lines and columns of their own, beside
    # (beside labels the dicts: "nvswitch (nccl-tests)"; that label is the fabric they are shown under)
    groups = beside.collective_groups([r for r in sr.of_kind("collective") if beside.is_imported(r)])
    imported = [CollectiveResult.from_record(dict(r, fabric=name)) for name, rs in groups.items() for r in rs]
    busbw_section(doc, c, colls, figs, imported=[r for r in imported if not r.inplace])
    references_section.add(doc, colls)
    scaling_section(doc, c, scaling, machine, figs)
    memory_section(doc, c, trains, estimate, figs)
    throughput_section(doc, c, trains, figs)
    relate_section(doc, relate, figs)
    jobfit_section.add(doc, sr.of_kind("collective"), colls)
    advice_section(doc, c, advice, trains, machine, collectives)
    time_section(doc, sr.plans, sr.units, trains)
    reproduce_section(doc, sr, c, command)
    return doc


def _relate(c: StudyConfig, trains: list[TrainResult], colls: list[CollectiveResult]) -> Any:
    """relate's result from the records (recomputed, so a rebuilt report agrees with its inputs), or None."""
    if c.world_size < 2:
        return f"{c.world_size} rank: no collective ran, so there is no slowdown to explain"
    if len(c.fabrics) < 2:
        return "one fabric: relate explains the slowdown between fabrics (name two with --fabrics)"
    if not trains or not colls:
        return None
    try:
        return fabricbench.relate(fabricbench.RelateConfig(inputs=trains + colls, reference=c.fabrics[0]))
    except Exception as e:  # no relation possible (e.g. nothing on the reference): said in the section
        return str(e)


def _advice(sr, c: StudyConfig, machine, trains: list[TrainResult]) -> Any:
    if c.device != "cuda" or not (machine or {}).get("topology"):
        return None
    try:
        return fabricbench.advise(fabricbench.AdviseConfig(
            model=c.model, model_config=c.model_config, num_gpus=len(c.gpus),
            gpus=tuple(c.gpus) if len(c.gpus) > 1 else None, results=tuple(sr.records),
            batch_size=batch_of(trains, c), seq_len=c.seq_len, image_size=c.image_size,
            strategies=tuple(c.strategies), fabric=c.fabrics[0]))
    except Exception as e:  # advice is derived; a failure is reported in its section, never fatal
        return str(e)
