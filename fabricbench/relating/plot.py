"""The study's figure: busbw N× slower against step N× slower, per strategy, observed and predicted.

    fabricbench relate sweeps.jsonl train.jsonl --plot relate.png

x = trace-weighted busbw on the reference / on the fabric (how much slower the wire is at the sizes the
strategy sends); y = step time on the fabric / on the reference. Filled markers are observed, hollow ones
predicted (the model of fabricbench/relating/model.py); a thin line joins each fabric's pair. The
diagonal y = x is a step made of nothing but communication; y = 1 is a step the fabric does not touch.
"""

from __future__ import annotations

from typing import Any

from fabricbench.reporting.plot import pyplot, save


def plot_relate(result: Any, path: str) -> None:
    """Write the figure for `result` (a RelateResult) to `path` (PNG)."""
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    rows = [r for r in result.rows if r.busbw_ratio]
    workloads = list(dict.fromkeys((r.model, r.nranks, r.precision) for r in rows)) or [("-", 0, "-")]
    fig, axes = plt.subplots(1, len(workloads), figsize=(6.4 * len(workloads), 5.0), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, wl in zip(axes[0], workloads):
        mine = [r for r in rows if (r.model, r.nranks, r.precision) == wl]
        strategies = list(dict.fromkeys(r.strategy for r in mine))
        top_x = top_y = 1.0
        low_x = low_y = 1.0  # a fabric faster than the reference, or a reference that ran slow, lies below 1
        for i, s in enumerate(strategies):
            colour = colours[i % len(colours)]
            pts = sorted((r for r in mine if r.strategy == s), key=lambda r: 1.0 / r.busbw_ratio)
            xs = [1.0 / r.busbw_ratio for r in pts]
            pred = [r.predicted_slowdown for r in pts]
            ax.plot(xs, pred, color=colour, linestyle="--", linewidth=1, marker="o", markerfacecolor="white",
                    markersize=7, label=f"{s} predicted")
            obs = [(x, r) for x, r in zip(xs, pts) if r.observed_slowdown is not None]
            ax.plot([x for x, _ in obs], [r.observed_slowdown for _, r in obs], color=colour, linestyle="none",
                    marker="o", markersize=7, label=f"{s} observed")
            for x, r in obs:
                ax.plot([x, x], [r.observed_slowdown, r.predicted_slowdown], color=colour, linewidth=0.8)
            for x, r in zip(xs, pts):
                y = r.observed_slowdown if r.observed_slowdown is not None else r.predicted_slowdown
                ax.annotate(r.fabric, (x, y), textcoords="offset points", xytext=(5, -10), fontsize=7,
                            color=colour)
            ys = pred + [r.observed_slowdown for _, r in obs]
            top_x, low_x = max([top_x] + xs), min([low_x] + xs)
            top_y, low_y = max([top_y] + ys), min([low_y] + ys)
        # y = x drawn only as far as the y axis goes: the step ratios, not the busbw ones, set its range
        ax.plot([low_y * 0.9, top_y * 1.3], [low_y * 0.9, top_y * 1.3], color="grey", linewidth=0.8, linestyle=":",
                label="all communication (y = x)")
        ax.axhline(1.0, color="grey", linewidth=0.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(low_x * 0.85, top_x * 1.3)
        ax.set_ylim(low_y * 0.9, top_y * 1.3)
        for axis, top in ((ax.xaxis, top_x), (ax.yaxis, top_y)):
            # 1, 2, 5 (and 1.5, 3 on short ranges) labelled: a log axis over 1-3x shows no decade at all
            subs = (1.0, 2.0, 5.0) if top > 8 else (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)
            axis.set_major_locator(LogLocator(base=10, subs=subs))
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(f"busbw N× slower than {result.reference} (trace-weighted, at the sizes sent)")
        ax.set_ylabel(f"step N× slower than {result.reference}")
        model, nranks, precision = wl
        ax.set_title(f"{model}, {nranks} ranks, {precision}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("busbw N× slower against step N× slower: observed (filled) and predicted (hollow)")
    save(fig, path)
    plt.close(fig)
