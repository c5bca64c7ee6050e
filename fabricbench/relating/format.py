"""The relate table: one row per strategy × fabric, observed beside predicted.

    fabricbench relate sweeps.jsonl train.jsonl
"""

from __future__ import annotations

from typing import Any

from fabricbench.relating.model import format_size

COLUMNS = ("strategy", "fabric", "busbw drop", "comm/step", "T_comm (ms)", "e", "step obs (ms)",
           "step pred (ms)", "slowdown obs", "slowdown pred", "residual", "flags")


def _ms(v: float | None) -> str:
    if v is None:
        return "-"
    ms = v * 1e3
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _xci(v: float | None, ci: Any) -> str:
    """A slowdown with its 95% interval: "1.62x [1.48-1.80]"."""
    if v is None:
        return "-"
    return _x(v) + (f" [{ci[0]:.2f}-{ci[1]:.2f}]" if ci else "")


def cells(row: Any) -> list[str]:
    """A RelateRow as the table's text cells."""
    drop = 1.0 / row.busbw_ratio if row.busbw_ratio else None
    residual = "-" if row.residual is None else f"{row.residual * 100:+.0f}%".replace("-0%", "+0%")
    return [row.strategy, row.fabric, _x(drop), format_size(row.comm_bytes_per_step), _ms(row.comm_time_s),
            f"{row.exposed_fraction:.2f}", _ms(row.observed_step_s), _ms(row.predicted_step_s),
            _xci(row.observed_slowdown, row.observed_slowdown_ci95),
            _xci(row.predicted_slowdown, row.predicted_slowdown_ci95), residual, ", ".join(row.flags)]


def render(result: Any) -> None:
    """Print result (a RelateResult) as one table per workload, with the formula under it."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=170)
    groups: dict[tuple, list] = {}
    for row in result.rows:
        groups.setdefault((row.model, row.nranks, row.precision), []).append(row)
    for (model, nranks, precision), rows in groups.items():
        t = Table(title=f"{model}, {nranks} ranks, {precision}: against reference {result.reference}")
        for c in COLUMNS:
            t.add_column(c, justify="left" if c in ("strategy", "fabric", "flags") else "right")
        for row in rows:
            t.add_row(*cells(row))
        console.print(t)
    console.print(f"model: {result.formula}")
    console.print("busbw drop = trace-weighted busbw on the reference / on the fabric; residual = predicted / "
                  "observed - 1; [lo-hi] = 95% interval (runs in fresh processes, sweep spread)")
