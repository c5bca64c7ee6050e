"""What `fabricbench train` prints: one line per run as it ends, then the table of runs, each strategy's
figure over its runs (with the run-to-run interval) and the ranking per fabric; its `--list`; and
`fabricbench estimate`'s table.

    fabricbench train --strategies ddp,fsdp --model tiny-mistral --device cpu --nprocs 2
    fabricbench estimate --model mistral-7b --gpus 4

Library code, so that the CLI, the study and the tests share one formatting of train records.
"""

from __future__ import annotations

from typing import Any, Callable

from fabricbench import hostload
from fabricbench.statistics.comparison import MARGIN
from fabricbench.reporting import table as tables
from fabricbench.reporting.analysis import byte_unit, fmt, fmt_count
from fabricbench.sizes import format_gib
from fabricbench.training import phases
from fabricbench.training import repeats as reps


TRAIN_COLS = (tables.Col("strategy", justify="left", key=True), tables.Col("run", key=True),
              tables.Col("status", justify="left"), tables.Col("samples/s"),
              tables.Col("median CI", "ci", "ci = the median step's 95% CI inside the run, ±"),
              tables.Col("peak alloc GiB", "alloc", "alloc/resv/est = peak allocated/reserved/estimated memory, GiB"),
              tables.Col("reserved GiB", "resv"), tables.Col("estimate GiB", "est"),
              tables.Col("note", justify="left", prose=True))


def cells(rec: dict) -> list[str]:
    thr = rec.get("throughput") or {}
    mem = rec.get("memory") or {}
    sps = thr.get("samples_per_s")
    ci = (rec.get("step_time") or {}).get("ci95_rel")
    busy = "busy host" if (hostload.of(rec) or {}).get("busy") else None  # said in full after the verdicts
    note = "; ".join(x for x in (rec.get("message"), rec.get("host_bound"), busy) if x)
    return [rec["strategy"], str(rec.get("repeat") or 1), rec["status"], fmt(sps) if sps else "-",
            f"±{ci:.1%}" if sps and isinstance(ci, (int, float)) else "-", format_gib(mem.get("max_allocated_bytes"), digits=2),
            format_gib(mem.get("max_reserved_bytes"), digits=2), format_gib((rec.get("estimate") or {}).get("with_activations_bytes"), digits=2), note]


def line(rec: dict) -> str:
    """One short line per run as it finishes (the table and the figures with their intervals follow)."""
    c = cells(rec)
    return f"{c[0]} run {c[1]}: {c[2]}" + (f", {c[3]} samples/s {c[4]}" if c[3] != "-" else "") + \
        (f" ({c[8]})" if c[8] else "")


def phase_lines(rec: dict) -> list[str]:
    """`train --verbose`: where the run's wall time went (training/phases.py), under its line."""
    return phases.lines(rec.get("phases"))


def render(records: list[dict[str, Any]], title: str, *, say: Callable[[str], Any] = print,
           repeats: int | None = None, max_repeats: int | None = None, margin: float = MARGIN) -> None:
    """The table of runs, then each strategy's figure over its runs and the verdicts of the comparisons
    (statistics/comparison.py), with what stayed open."""
    tables.render(tables.console(), title, TRAIN_COLS, [cells(r) for r in records])
    figs = reps.figures(records)  # each strategy over its runs, with the run-to-run interval
    for f in figs:
        say(reps.figure_text(f))
    for text in reps.answer_lines(records, repeats=repeats, max_repeats=max_repeats, margin=margin):
        say(text)


def estimate_lines(doc: dict[str, Any]) -> list[str]:
    """An estimate document (training/estimate.py for_model): bytes per GPU per strategy, in one unit."""
    unit, scale = byte_unit(max(row["total_bytes"] for row in doc["strategies"].values()))
    psi = doc["params"]
    out = [f"{doc['model']}: {psi:,} parameters ({fmt_count(psi)}), {doc['num_gpus']} GPU(s), recipe {doc['recipe']}",
           f"{'strategy':<8} {'params':>10} {'grads':>10} {'optimizer':>10} {'master':>10} {'total':>10}  {unit}"]
    for name, row in doc["strategies"].items():
        cells = [f"{row[k] / scale:10.2f}" for k in ("params_bytes", "grads_bytes", "optimizer_bytes",
                                                     "master_bytes", "total_bytes")]
        out.append(f"{name:<8} " + " ".join(cells))
    act = doc.get("activation_bytes")
    if act is not None:
        out.append(f"activations (not sharded, per GPU): {act / scale:.2f} {unit}")
    return out


def listing(strategies, models) -> list[str]:
    """`fabricbench train --list`: each strategy (with why it cannot run here) and each model."""
    out = []
    for s in strategies:
        why = s.unavailable()
        out.append(f"strategy {s.name:<6} {s.description}" + (f"  [{why}]" if why else ""))
    for m in models:
        out.append(f"model    {m.name:<13} {m.task:<9} {m.description}")
    return out
