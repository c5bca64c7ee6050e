"""PNG plots: busbw against size per fabric, busbw against GPU count per placement, copy heat maps.

    fabricbench compare --fabrics default,p2p-off --plot compare.png
    fabricbench scaling --counts 2,4,8 --plot scaling.png
    fabricbench p2p --plot p2p.png

matplotlib (the `plot` extra) is imported only here and only when a plot is asked for, with the Agg
backend, so no display is needed.
"""

from __future__ import annotations

from typing import Sequence

from fabricbench.errors import UsageError


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install 'fabricbench[plot]'") from None
    return plt


def _save(fig, path: str) -> None:
    try:
        fig.savefig(path, dpi=110, bbox_inches="tight")
    except OSError as e:
        raise UsageError(f"--plot {path}: cannot write there ({e.strerror})") from None


def _lines(series: dict[str, dict[str, list[tuple[int, float]]]], path: str, title: str, *, xlabel: str,
           xticks, log2_x: bool) -> None:
    """One subplot per op, one busbw line per label; points with no value are dropped."""
    plt = _pyplot()
    ops = list(series)
    fig, axes = plt.subplots(1, len(ops), figsize=(6 * len(ops), 4.2), squeeze=False)
    for ax, op in zip(axes[0], ops):
        xs: set[int] = set()
        for label, pts in series[op].items():
            pts = sorted(p for p in pts if p[1] is not None)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
                xs.update(p[0] for p in pts)
        if log2_x:
            ax.set_xscale("log", base=2)
        if xs:
            xticks(ax, sorted(xs))
        ax.set_xlabel(xlabel)
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title(op)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    _save(fig, path)
    plt.close(fig)


def busbw_vs_size(series: dict[str, dict[str, list[tuple[int, float]]]], path: str, title: str) -> None:
    """series[op][line label] = [(bytes, busbw GB/s), ...]: one subplot per op, log2 x axis."""
    from fabricbench.sizes import format_size

    def ticks(ax, sizes):
        shown = sizes[:: max(1, len(sizes) // 8)]
        ax.set_xticks(shown, [format_size(t) for t in shown])

    _lines(series, path, title, xlabel="size S (bytes, log2)", xticks=ticks, log2_x=True)


def busbw_vs_count(series: dict[str, dict[str, list[tuple[int, float]]]], path: str, title: str) -> None:
    """series[op][placement] = [(GPU count, busbw GB/s), ...]."""
    _lines(series, path, title, xlabel="GPUs", xticks=lambda ax, counts: ax.set_xticks(counts), log2_x=False)


def heatmaps(panels: list[tuple[str, list[list[float | None]], Sequence[str], Sequence[str]]],
             path: str, title: str) -> None:
    """panels: (title, matrix GB/s, row labels, column labels); None cells are left blank."""
    import numpy as np

    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.8), squeeze=False)
    for ax, (name, matrix, rows, cols) in zip(axes[0], panels):
        data = np.array([[np.nan if v is None else v for v in r] for r in matrix], dtype=float)
        im = ax.imshow(data, cmap="viridis")
        ax.set_xticks(range(len(cols)), cols)
        ax.set_yticks(range(len(rows)), rows)
        ax.set_xlabel("dst")
        ax.set_ylabel("src")
        ax.set_title(name)
        for i in range(data.shape[0]):
            for j in range(data.shape[1]):
                if not np.isnan(data[i, j]):
                    ax.text(j, i, f"{data[i, j]:.0f}", ha="center", va="center", color="w", fontsize=8)
        fig.colorbar(im, ax=ax, label="GB/s")
    fig.suptitle(title)
    _save(fig, path)
    plt.close(fig)
