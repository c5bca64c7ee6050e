"""PNG plots: bandwidth against size per fabric, busbw against GPU count per placement, copy heat maps.
Every axis names its quantity and unit (decimal GB/s, as the records); a panel with nothing to show is left
out rather than drawn empty.

    fabricbench compare --fabrics default,p2p-off --plot compare.png
    fabricbench scaling --num-gpus 2,4,8 --plot scaling.png
    fabricbench p2p --plot p2p.png

matplotlib (the `plot` extra) is imported only here and only when a plot is asked for, with the Agg
backend, so no display is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from fabricbench.errors import UsageError
from fabricbench.files import write_atomic
from fabricbench.sizes import format_size


def pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install 'fabricbench[plot]'") from None
    return plt


def save(fig, path: str) -> None:
    """Written whole or not at all (a temporary file renamed over `path`): a failed plot never leaves a
    half-written figure, and never the previous run's figure posing as this one's (remove_stale)."""
    import io

    buf = io.BytesIO()  # drawn in memory, then written by outputs.write_atomic (never through a link)
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    write_atomic(path, buf.getvalue(), what="--plot")




def remove_stale(path: str | None) -> None:
    """Remove an earlier run's figure at `path` before this run measures anything: should this run end
    without drawing (Ctrl-C, every fabric failed), no old figure is left beside its new results."""
    import os

    if path and os.path.isfile(path):
        os.unlink(path)


def _log_y_if_wide(ax, values: list[float]) -> None:
    """A log y axis where the values span two decades or more (bandwidth from 8 B to 8 GiB does): on a
    linear one everything below the top decade lies on the floor, unreadable."""
    pos = [v for v in values if v and v > 0]
    if pos and max(pos) / min(pos) >= 100:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)


def _lines(series: dict[str, dict[str, list[tuple[int, float | None]]]], path: str, title: str, *, xlabel: str,
           ylabel: str, xticks, log2_x: bool, log_y: bool = False) -> None:
    """One subplot per op, one line per label; points with no value are dropped, ops with none left out."""
    plt = pyplot()
    ops = [op for op in series if any(v is not None for pts in series[op].values() for _, v in pts)]
    if not ops:  # nothing measured: one panel that says so rather than empty axes
        fig, ax = plt.subplots(figsize=(6, 3))
        ax.axis("off")
        ax.text(0.5, 0.5, "no measurement to plot", ha="center", va="center")
        fig.suptitle(title)
        save(fig, path)
        plt.close(fig)
        return
    fig, axes = plt.subplots(1, len(ops), figsize=(6 * len(ops), 4.2), squeeze=False, layout="constrained")
    for ax, op in zip(axes[0], ops):
        xs: set[int] = set()
        ys: list[float] = []
        for label, pts in series[op].items():
            pts = sorted(p for p in pts if p[1] is not None)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
                xs.update(p[0] for p in pts)
                ys.extend(p[1] for p in pts)
        if log2_x:
            ax.set_xscale("log", base=2)
        xticks(ax, sorted(xs))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if log_y:
            _log_y_if_wide(ax, ys)
        else:
            ax.set_ylim(bottom=0)
        if ax.get_yscale() == "log":
            ax.set_ylabel(f"{ylabel} (log)")
        ax.set_title(op)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    save(fig, path)
    plt.close(fig)


def bandwidth_vs_size(series: dict[str, dict[str, list[tuple[int, float | None]]]], path: str, title: str, *,
                      metric: str = "busbw") -> None:
    """series[op][line label] = [(bytes, GB/s), ...]: one subplot per op, log2 x axis, log y where the values
    span two decades. `metric` ("busbw" or
    "algbw") names what the values are, on the axis; the title should say the same."""
    def ticks(ax, sizes):
        shown = sizes[:: max(1, -(-len(sizes) // 8))]
        ax.set_xticks(shown, [format_size(t) for t in shown])
        ax.minorticks_off()

    _lines(series, path, title, xlabel="message size S (log2)", ylabel=f"{metric} (GB/s, 1e9 B/s)",
           xticks=ticks, log2_x=True, log_y=True)


busbw_vs_size = bandwidth_vs_size  # the name callers used when it plotted busbw only


def busbw_vs_count(series: dict[str, dict[str, list[tuple[int, float | None]]]], path: str, title: str) -> None:
    """series[op][placement] = [(GPU count, busbw GB/s), ...]."""
    _lines(series, path, title, xlabel="GPUs in the set", ylabel="busbw (GB/s, 1e9 B/s)",
           xticks=lambda ax, counts: ax.set_xticks(counts), log2_x=False)


@dataclass(frozen=True)
class HeatPanel:
    title: str
    matrix: list[list[float | None]]  # GB/s; None = not measured (left blank)
    rows: Sequence[str]
    cols: Sequence[str]
    ylabel: str = "source"
    xlabel: str = "destination"


def heatmaps(panels: list[HeatPanel | tuple], path: str, title: str, *, unit: str = "GB/s") -> None:
    """One heat map per panel with its own colour bar; a panel with no value at all is left out."""
    import numpy as np

    plt = pyplot()
    panels = [p if isinstance(p, HeatPanel) else HeatPanel(*p) for p in panels]
    panels = [p for p in panels if any(v is not None for r in p.matrix for v in r)]
    assert panels, "no panel has a value"
    # constrained layout gives each colour bar its own room, so its labels never run into the next panel
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.6), squeeze=False,
                             layout="constrained")
    for ax, p in zip(axes[0], panels):
        data = np.array([[np.nan if v is None else v for v in r] for r in p.matrix], dtype=float)
        im = ax.imshow(data, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(p.cols)), p.cols)
        ax.set_yticks(range(len(p.rows)), p.rows)
        ax.set_xlabel(p.xlabel)
        ax.set_ylabel(p.ylabel)
        ax.set_title(p.title)
        lo, hi = np.nanmin(data), np.nanmax(data)
        for i in range(data.shape[0]):
            for j in range(data.shape[1]):
                if not np.isnan(data[i, j]):
                    light = hi > lo and (data[i, j] - lo) / (hi - lo) > 0.6  # viridis turns yellow: dark text
                    ax.text(j, i, f"{data[i, j]:.1f}", ha="center", va="center", fontsize=8,
                            color="black" if light else "white")
        if hi > lo:  # one value (a single GPU's own copy) has no scale to read
            fig.colorbar(im, ax=ax, label=unit, shrink=0.85)
    fig.suptitle(title)
    save(fig, path)
    plt.close(fig)
