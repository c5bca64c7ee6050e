"""The study report's figures that fabricbench/reporting/plot.py has no helper for: bars and the link matrix.

    fabricbench report run/      (every figure is drawn again from results.jsonl)

Each function writes one PNG (matplotlib, Agg) and returns nothing; values that are None are left out.
"""

from __future__ import annotations

from typing import Sequence

from fabricbench.reporting.analysis import fmt
from fabricbench.reporting.plot import pyplot, save
from fabricbench.sizes import format_size
from fabricbench.topology.model import PCIE_RELATIONS, nvlink_count

COLORS = ("#1f5fa8", "#d9822b", "#2f8f4e", "#b83a3a", "#7a52a8", "#6b7580")


def grouped_bars(groups: Sequence[str], series: dict[str, Sequence[float | None]], path: str, *, title: str,
                 ylabel: str, value_fmt: str | None = None, log: bool = False) -> None:
    """One cluster per group (strategy), one bar per series (fabric or memory kind), values printed on top
    (for people: 1,233, never 1.23e+03; `value_fmt` a str.format pattern to say otherwise)."""
    plt = pyplot()
    n = max(1, len(series))
    width = 0.8 / n
    fig, ax = plt.subplots(figsize=(min(12.0, max(6.0, 0.55 * len(groups) * n + 2)), 4.4))
    for i, (label, values) in enumerate(series.items()):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        for x, v in zip(xs, values):
            if v is None:
                ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=7, color="#6b7580", rotation=90)
        pts = [(x, v) for x, v in zip(xs, values) if v is not None]
        if pts:
            bars = ax.bar([p[0] for p in pts], [p[1] for p in pts], width * 0.95, label=label,
                          color=COLORS[i % len(COLORS)])
            for b, (_, v) in zip(bars, pts):
                text = value_fmt.format(v) if value_fmt else (fmt(v) if v >= 1 or v == 0 else f"{v:.3g}")
                ax.text(b.get_x() + b.get_width() / 2, b.get_height(), text, ha="center",
                        va="bottom", fontsize=8)
    ax.set_xticks(range(len(groups)), list(groups))
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    else:  # headroom: the value over the tallest bar is never hidden under the title or the frame
        ax.set_ylim(0, max([v for vs in series.values() for v in vs if v is not None] or [1.0]) * 1.15)
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # nothing measured (every value None): no empty legend
        ax.legend(fontsize=8)
    save(fig, path)
    plt.close(fig)


def link_matrix(labels: Sequence[str], links: Sequence[Sequence[str]], islands: list[list[int]], path: str) -> None:
    """The topology matrix as a coloured grid: NVLink count where there is one, the PCIe relation otherwise."""
    import numpy as np

    plt = pyplot()
    n = len(labels)
    score = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            lk = links[i][j]
            nv = nvlink_count(lk)
            score[i, j] = np.nan if lk == "X" else (10 + nv if nv else len(PCIE_RELATIONS) - PCIE_RELATIONS.index(lk)
                                                    if lk in PCIE_RELATIONS else 0)
    fig, ax = plt.subplots(figsize=(1.0 + 0.62 * n, 0.8 + 0.55 * n))
    ax.imshow(score, cmap="YlGnBu", vmin=0, vmax=30)
    for i in range(n):
        for j in range(n):
            ax.text(j, i, links[i][j], ha="center", va="center", fontsize=9,
                    color="white" if (score[i, j] == score[i, j] and score[i, j] > 20) else "black")
    ax.set_xticks(range(n), labels)
    ax.set_yticks(range(n), labels)
    ax.set_title("links per GPU pair; islands: " + "  ".join("[" + ",".join(map(str, s)) + "]" for s in islands),
                 fontsize=9)
    save(fig, path)
    plt.close(fig)


def busbw_grid(series: dict[str, dict[str, list[tuple[int, float | None]]]], path: str, *, title: str,
               ylabel: str) -> None:
    """series[op][fabric] = [(bytes, GB/s)]: two panels per row, log-log, so a fabric 100x slower than
    another stays readable beside it (the shaped CPU fabrics and NVLink against p2p-off alike)."""
    import math

    plt = pyplot()
    ops = list(series)
    cols = 1 if len(ops) == 1 else 2
    rows = math.ceil(len(ops) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 3.9 * rows), squeeze=False)
    for ax in axes.flat[len(ops):]:
        ax.set_visible(False)
    for ax, op in zip(axes.flat, ops):
        xs: set[int] = set()
        for i, (label, pts) in enumerate(series[op].items()):
            pts = sorted(p for p in pts if p[1] is not None and p[1] > 0)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=4, label=label,
                        color=COLORS[i % len(COLORS)])
                xs.update(p[0] for p in pts)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        if xs:
            ticks = sorted(xs)[:: max(1, len(xs) // 6)]
            ax.set_xticks(ticks, [format_size(t) for t in ticks])
        ax.set_xlabel("size S")
        ax.set_ylabel(ylabel)
        ax.set_title(op)
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    save(fig, path)
    plt.close(fig)
