"""A fleet: many nodes' qualification runs side by side, their verdicts and their outliers.

    fabricbench qualify --fleet node1/ node2/ node3/ --out fleet/ [--fraction 0.9]
    fabricbench qualify --fleet results/*.jsonl
    fabricbench qualify --fleet all-hosts.jsonl          (one file holding many hosts' records)

Each input is one node: a `qualify --out` folder (results.jsonl, and verdicts.json when there) or a
results file; a results file whose records come from several hosts is a node per host. Per figure (figures.py: the same names on every node that measured it) the fleet's median
and MAD (median absolute deviation) are computed; a node is an outlier on a figure when it is worse than
`fraction` x the median (for a floor; median / fraction for a ceiling), or when its robust z-score
0.6745 x (x - median) / MAD is beyond `mad_z` on the bad side. Outputs: the fleet table, fleet.json,
fleet.png (each node's figures relative to the fleet median) and report.md/html. Exit 1 when any node
failed a check or is an outlier.
"""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from fabricbench.errors import UsageError
from fabricbench.qualifying.figures import Figure, figures
from fabricbench.report import table as tables
from fabricbench.report.analysis import fmt


@dataclass(kw_only=True)
class Node:
    name: str
    source: str
    host: str | None
    figures: dict[str, Figure]
    status: str | None = None  # "pass"/"fail" from its verdicts.json, None when it has none
    failed: list[str] = field(default_factory=list)  # checks that failed or errored


@dataclass(kw_only=True)
class Outlier:
    node: str
    figure: str
    value: float
    median: float
    ratio: float  # value / median
    robust_z: float | None
    why: str


@dataclass(kw_only=True)
class FleetResult:
    nodes: list[Node]
    stats: dict[str, dict[str, float]]  # figure -> {"median", "mad", "n", "unit", "sense"}
    outliers: list[Outlier]
    fraction: float
    mad_z: float
    files: dict[str, str] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 1 if self.outliers or any(n.status == "fail" for n in self.nodes) else 0

    def to_dict(self) -> dict[str, Any]:
        return {"fraction": self.fraction, "mad_z": self.mad_z, "exit_code": self.exit_code,
                "nodes": [{"name": n.name, "source": n.source, "host": n.host, "status": n.status,
                           "failed": n.failed, "figures": {k: f.value for k, f in n.figures.items()}}
                          for n in self.nodes],
                "figures": self.stats,
                "outliers": [o.__dict__ for o in self.outliers]}


def load_nodes(path: str | os.PathLike) -> list[Node]:
    """The node(s) of one input: a qualify --out folder or a results file (a node per host it holds)."""
    from fabricbench.results.writer import read_results

    p = Path(path)
    verdicts = None
    if p.is_dir():
        results = p / "results.jsonl"
        if (p / "verdicts.json").is_file():
            verdicts = json.loads((p / "verdicts.json").read_text(encoding="utf-8"))
        name = p.name or str(p)
    else:
        results = p
        name = p.stem if p.name != "results.jsonl" else p.parent.name
    if not results.is_file():
        raise UsageError(f"--fleet {path}: no results.jsonl there; give qualify --out folders or results files")
    records = list(read_results(results))
    if not records:
        raise UsageError(f"--fleet {path}: {results} holds no records")
    hosts = sorted({r["host"] for r in records if r.get("host") and r.get("kind") in ("collective", "copy", "train")})
    if len(hosts) > 1 and verdicts is None:  # one file gathered from many hosts: a node per host
        return [Node(name=h, source=f"{path} (host {h})", host=h,
                     figures=figures(r for r in records if r.get("host") == h)) for h in hosts]
    host = next((r.get("host") for r in records if r.get("host")), None)
    node = Node(name=name, source=str(path), host=host, figures=figures(records))
    if verdicts is not None:
        node.failed = [v["check"] for v in verdicts.get("verdicts", []) if v.get("status") in ("fail", "error")]
        node.status = "fail" if node.failed else "pass"
    return [node]


def run_fleet(inputs: Sequence[str | os.PathLike], *, out: str | os.PathLike | None = None, fraction: float = 0.9,
              mad_z: float = 3.5) -> FleetResult:
    if not 0 < fraction <= 1:
        raise UsageError(f"--fraction {fraction:g}: a fraction in (0, 1], e.g. 0.9")
    if not inputs:
        raise UsageError("--fleet needs the nodes' qualify --out folders or results files")
    nodes = [n for p in inputs for n in load_nodes(p)]
    if len(nodes) < 2:
        raise UsageError(f"--fleet needs at least 2 nodes to compare (got {len(nodes)}: {nodes[0].name})")
    names = [n.name for n in nodes]
    if len(set(names)) < len(names):  # two folders of the same name: tell them apart by their paths
        for n in nodes:
            n.name = n.source
    stats: dict[str, dict[str, Any]] = {}
    outliers: list[Outlier] = []
    all_figs = sorted({k for n in nodes for k in n.figures})
    for fig in all_figs:
        vals = [(n, n.figures[fig]) for n in nodes if fig in n.figures]
        if len(vals) < 2:
            continue
        xs = [f.value for _, f in vals]
        med = statistics.median(xs)
        mad = statistics.median(abs(x - med) for x in xs)
        sense, unit = vals[0][1].sense, vals[0][1].unit
        stats[fig] = {"median": med, "mad": mad, "n": len(xs), "unit": unit, "sense": sense}
        for n, f in vals:
            z = 0.6745 * (f.value - med) / mad if mad > 0 else None
            bad_z = z is not None and (z < -mad_z if sense == "min" else z > mad_z)
            bad_frac = f.value < fraction * med if sense == "min" else f.value > med / fraction
            if bad_z or bad_frac:
                why = []
                if bad_frac:
                    limit = f"below {fraction:g}x" if sense == "min" else f"above 1/{fraction:g}x"
                    why.append(f"{f.value / med:.0%} of the median ({limit})")
                if bad_z:
                    why.append(f"robust z {z:+.1f}")
                outliers.append(Outlier(node=n.name, figure=fig, value=f.value, median=med,
                                        ratio=f.value / med if med else float("nan"), robust_z=z,
                                        why="; ".join(why)))
    if not stats:
        raise UsageError("--fleet: the nodes share no measured figure; qualify them with the same spec")
    res = FleetResult(nodes=nodes, stats=stats, outliers=outliers, fraction=fraction, mad_z=mad_z)
    if out is not None:
        _write(res, Path(out))
    return res


def _write(res: FleetResult, out: Path) -> None:
    from fabricbench.report.document import Document

    out.mkdir(parents=True, exist_ok=True)
    (out / "fleet.json").write_text(json.dumps(res.to_dict(), indent=2) + "\n", encoding="utf-8")
    res.files["fleet_json"] = str(out / "fleet.json")
    png = out / "fleet.png"
    plotted = _plot(res, png)
    doc = Document("Fleet qualification", subtitle=f"{len(res.nodes)} nodes, {len(res.stats)} figures")
    s = doc.section("Nodes", intro=(f"{len(res.outliers)} outlier(s): a node worse than {res.fraction:g} x the fleet "
                                    f"median of a figure, or beyond robust z {res.mad_z:g} (median/MAD)."))
    s.table(["node", "host", "verdicts", "failed checks", "outlier figures"],
            [[n.name, n.host or "-", n.status or "-", ", ".join(n.failed) or "-",
              str(sum(1 for o in res.outliers if o.node == n.name))] for n in res.nodes], status_col=2)
    if res.outliers:
        s.table(["node", "figure", "value", "median", "ratio", "why"],
                [[o.node, o.figure, f"{o.value:.4g}", f"{o.median:.4g}", f"{o.ratio:.2f}", o.why]
                 for o in res.outliers], caption="Outliers")
    t = doc.section("Figures", intro="Each figure per node; the median and MAD over the fleet.")
    t.table(*table(res))
    if plotted:
        t.figure(str(png), "each node's figures relative to the fleet median (1.0); outliers in red")
        res.files["fleet_png"] = str(png)
    md, html = doc.write(out, stem="report")
    res.files.update(report_md=str(md), report_html=str(html))


def table(res: FleetResult) -> tuple[list[str], list[list[str]]]:
    headers = ["figure", "unit", *[n.name for n in res.nodes], "median", "MAD"]
    out_set = {(o.node, o.figure) for o in res.outliers}
    rows = []
    for fig, st in res.stats.items():
        cells = []
        for n in res.nodes:
            f = n.figures.get(fig)
            cells.append("-" if f is None else fmt(f.value) + (" !" if (n.name, fig) in out_set else ""))
        rows.append([fig, st["unit"], *cells, fmt(st["median"]), fmt(st["mad"])])
    return headers, rows


def _plot(res: FleetResult, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figs = list(res.stats)
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(figs) + 2), 4.5))
    out_set = {(o.node, o.figure) for o in res.outliers}
    width = 0.8 / max(1, len(res.nodes))
    for i, n in enumerate(res.nodes):
        xs, ys, colors = [], [], []
        for j, f in enumerate(figs):
            if f in n.figures and res.stats[f]["median"]:
                xs.append(j + (i - (len(res.nodes) - 1) / 2) * width)
                ys.append(n.figures[f].value / res.stats[f]["median"])
                colors.append("tab:red" if (n.name, f) in out_set else "tab:blue")
        ax.bar(xs, ys, width=width * 0.9, color=colors, edgecolor="black", linewidth=0.4)
        for x, y in zip(xs, ys):
            ax.text(x, y + 0.02, n.name, rotation=90, ha="center", va="bottom", fontsize=7)
    ax.axhline(1.0, color="gray", linewidth=0.8)
    ax.axhline(res.fraction, color="tab:red", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(figs)))
    import textwrap

    ax.set_xticklabels(["\n".join(textwrap.wrap(f, 26)) for f in figs], fontsize=7)
    ax.set_ylabel("value / fleet median")
    ax.set_title("fleet: each node against the median (red: outlier)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def render(res: FleetResult) -> None:
    from rich.markup import escape
    from rich.text import Text

    console = tables.console()
    headers, rows = table(res)
    cols = [tables.Col(h, justify="left" if h == "figure" else "right", key=h == "figure",
                       prose=h == "figure") for h in headers]
    tables.render(console, f"fleet: {len(res.nodes)} nodes (outlier: < {res.fraction:g} x median or robust z "
                           f"beyond {res.mad_z:g}; marked !)",
                  cols, [[Text(c, style="bold red") if c.endswith(" !") else c for c in r] for r in rows])
    for n in res.nodes:  # names and figures hold brackets ("[default]"): escaped, not rich markup
        if n.status == "fail":
            console.print(f"[red]{escape(n.name)}[/red]: failed {escape(', '.join(n.failed))}")
    for o in res.outliers:
        console.print(f"[bold red]outlier[/bold red] {escape(o.node)}: {escape(o.figure)} = {o.value:.4g} vs "
                      f"median {o.median:.4g} ({escape(o.why)})")
    word = "PASSED" if res.exit_code == 0 else "FAILED"
    console.print(f"[bold]{word}[/bold]: {len(res.outliers)} outlier(s), "
                  f"{sum(1 for n in res.nodes if n.status == 'fail')} failing node(s)"
                  + (f"; outputs in {Path(res.files['fleet_json']).parent}" if res.files else ""))
