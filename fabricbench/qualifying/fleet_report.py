"""A fleet's outputs: fleet.json, junit.xml (a testcase per node), report.md/html, fleet.png, the
node_exporter textfile and the terminal table, from the FleetResult that fleet.py judged.

    fabricbench qualify --fleet node1/ node2/ node3/ --out fleet/ --prometheus fleet.prom

junit.xml is built by junit.document and the textfile by prometheus.TextFile, as a single node's are.
"""

from __future__ import annotations

import textwrap
from collections import defaultdict
from pathlib import Path

from fabricbench.files import dumps, write_text_atomic
from fabricbench.qualifying import junit
from fabricbench.qualifying.codes import CODES
from fabricbench.qualifying.inputs import orjson
from fabricbench.qualifying.junit import xml_text
from fabricbench.qualifying.prometheus import TextFile
from fabricbench.qualifying.result import FleetResult, Outlier
from fabricbench.qualifying.verdict import RANK, SEVERITIES
from fabricbench.reporting import table as tables
from fabricbench.reporting.analysis import fmt
from fabricbench.reporting.document import Document
from fabricbench.reporting.plot import save
from fabricbench.results.status import Severity

PLOT_MAX_NODES = 64  # beyond this a bar per node is unreadable; fleet.json and the tables hold every node
SHOW_NODES = 50  # nodes listed in the terminal and the report, worst first (fleet.json has all)


def write_prometheus(res: FleetResult, path: str) -> str:
    """The fleet's node_exporter textfile: every host's busbw figures, checks, worst severity and outliers."""
    tf = TextFile()
    counts: dict[str, int] = defaultdict(int)
    for o in res.outliers:
        counts[o.node] += 1
    for n in res.nodes:
        tf.add_node(n.host or n.name, busbw=[dict(f.labels) for f in n.figures.values() if f.labels],
                    values=[f.value for f in n.figures.values() if f.labels], checks=n.checks,
                    worst=RANK[n.severity], outliers=counts.get(n.name, 0))
    return tf.write(path)


def junit_xml(res: FleetResult) -> str:
    """A testcase per node: critical -> failure, unknown -> error, warning -> passed with a property."""
    bad = {s: sum(1 for n in res.nodes if n.severity == s) for s in SEVERITIES}
    by_node: dict[str, list[Outlier]] = defaultdict(list)
    for o in res.outliers:
        by_node[o.node].append(o)
    cases = []
    for n in res.nodes:
        lines = [f"{o.figure}: {o.value:.4g} vs median {o.median:.4g} ({o.why})" for o in by_node[n.name]]
        lines += [f"check {c} failed" for c in n.failed]
        c = junit.Case(name=n.name, classname="qualify.fleet",
                       properties={"severity": n.severity, "codes": ",".join(n.codes)})
        text = xml_text("\n".join(lines))
        if n.severity in (Severity.CRITICAL, Severity.UNKNOWN):
            c.outcome = "failure" if n.severity == Severity.CRITICAL else "error"
            c.message, c.type, c.body = xml_text(f"{n.severity}: {', '.join(n.codes)}"), n.severity, text
        elif lines:
            c.out = text
        cases.append(c)
    counts = {"tests": str(len(res.nodes)), "failures": str(bad[Severity.CRITICAL]),
              "errors": str(bad[Severity.UNKNOWN])}
    return junit.document("fabricbench qualify --fleet", "fleet", counts, cases)


def write_outputs(res: FleetResult, out: Path) -> None:
    """fleet.json, junit.xml, report.md/html and (small fleets) fleet.png into `out`; their paths in res.files."""
    out.mkdir(parents=True, exist_ok=True)
    # orjson: 12,500 nodes' figures in a fraction of json's time, and NaN is written as null, never NaN
    text = (orjson.dumps(res.to_dict(), option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=str).decode()
            if orjson is not None else dumps(res.to_dict(), indent=1))
    res.files["fleet_json"] = str(write_text_atomic(out / "fleet.json", text + "\n", what="fleet.json", under=out))
    res.files["junit"] = str(write_text_atomic(out / "junit.xml", junit_xml(res), what="junit.xml", under=out))
    png = out / "fleet.png"
    plotted = len(res.nodes) <= PLOT_MAX_NODES and _plot(res, png)
    crit = sum(1 for n in res.nodes if n.severity == Severity.CRITICAL)
    doc = Document("Fleet qualification", subtitle=f"{len(res.nodes)} nodes, {len(res.stats)} figures")
    s = doc.section("Nodes, worst first", intro=(
        f"{crit} critical node(s), {len(res.outliers)} outlier figure(s): a node worse than {res.fraction:g} x "
        f"the fleet median of a figure (critical), or beyond robust z {res.mad_z:g} (median/MAD; a warning)."
        + (f" The {SHOW_NODES} worst are listed; fleet.json holds all {len(res.nodes)}."
           if len(res.nodes) > SHOW_NODES else "")))
    s.table(*node_table(res), status_col=2)
    for note in res.notes:
        s.text(note)
    if res.outliers:
        shown = outlier_rows(res)
        s.table(["node", "figure", "value", "median", "ratio", "severity", "why"], shown,
                caption="Outliers, worst nodes first" + (" (the first 200)" if len(res.outliers) > 200 else ""))
    t = doc.section("Figures", intro="The median and MAD of each figure over the fleet.")
    t.table(["figure", "unit", "nodes", "median", "MAD"],
            [[fig, st["unit"], str(st["n"]), fmt(st["median"]), fmt(st["mad"])]
             for fig, st in res.stats.items()])
    if len(res.nodes) <= 16:
        t.table(*table(res), caption="Each node's figures")
    if plotted:
        t.figure(str(png), "each node's figures relative to the fleet median (1.0); outliers in red")
        res.files["fleet_png"] = str(png)
    c = doc.section("Codes", intro="What each code found means and what to do (docs/qualify.md: the codes).")
    used = sorted({code for n in res.nodes for code in n.codes})
    c.table(["code", "meaning", "action"],
            [[code, CODES.get(code).meaning, CODES.get(code).action] for code in used if code in CODES])
    md, html = doc.write(out, stem="report")
    res.files.update(report_md=str(md), report_html=str(html))


def node_table(res: FleetResult, limit: int = SHOW_NODES) -> tuple[list[str], list[list[str]]]:
    counts: dict[str, int] = defaultdict(int)
    for o in res.outliers:
        counts[o.node] += 1
    return (["node", "host", "severity", "codes", "failed checks", "outlier figures"],
            [[n.name, n.host or "-", n.severity, ", ".join(n.codes) or "-", ", ".join(n.failed) or "-",
              str(counts.get(n.name, 0))] for n in res.nodes[:limit]])


def outlier_rows(res: FleetResult, limit: int = 200) -> list[list[str]]:
    rank = {n.name: i for i, n in enumerate(res.nodes)}
    worst = sorted(res.outliers, key=lambda o: (rank[o.node], -RANK[o.severity], o.figure))[:limit]
    return [[o.node, o.figure, fmt(o.value), fmt(o.median), f"{o.ratio:.2f}", o.severity, o.why]
            for o in worst]


def table(res: FleetResult) -> tuple[list[str], list[list[str]]]:
    """Figures by node, a column per node: for small fleets (the report shows it up to 16 nodes)."""
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
    # Each figure's own outlier limit: below fraction x median where higher is better (bandwidth), above
    # median / fraction where lower is better (latency); one line for both senses would mislabel half.
    tops = [1.0]
    for j, f in enumerate(figs):
        limit = res.fraction if res.stats[f].get("sense") == "min" else 1 / res.fraction
        tops.append(limit)
        ax.hlines(limit, j - 0.45, j + 0.45, color="tab:red", linewidth=1.0, linestyle="--",
                  label="outlier limit (bandwidths: below it; times: above it)" if j == 0 else None)
    tops += [p.get_height() for p in ax.patches]
    ax.set_ylim(0, max(tops) * 1.3)  # room for the node names above the tallest bar
    ax.legend(fontsize=7, loc="upper right")
    ax.set_xticks(range(len(figs)))
    ax.set_xticklabels(["\n".join(textwrap.wrap(f, 26)) for f in figs], fontsize=7)
    ax.set_ylabel("value / fleet median")
    ax.set_title("fleet: each node against the median (red: outlier)")
    fig.tight_layout()
    save(fig, str(path))
    plt.close(fig)
    return True


def render(res: FleetResult) -> None:
    from rich.markup import escape
    from rich.text import Text

    console = tables.console()
    headers, rows = node_table(res)
    cols = [tables.Col(h, justify="right" if h == "outlier figures" else "left", key=h == "node",
                       prose=h in ("codes", "failed checks")) for h in headers]
    style = {Severity.CRITICAL: "bold red", Severity.UNKNOWN: "yellow", Severity.WARNING: "yellow",
             Severity.INFO: "dim", Severity.PASS: "green"}
    title = (f"fleet: {len(res.nodes)} nodes, worst first" + (
        f" (the {SHOW_NODES} worst; fleet.json has all)" if len(res.nodes) > SHOW_NODES else "")
        + f"; outlier: < {res.fraction:g} x median (critical) or robust z beyond {res.mad_z:g} (warning)")
    tables.render(console, title, cols, [[*r[:2], Text(r[2], style=style[r[2]]), *r[3:]] for r in rows])
    for row in outlier_rows(res, limit=20):  # names and figures hold brackets ("[default]"): escaped
        console.print(f"[bold red]outlier[/bold red] {escape(row[0])}: {escape(row[1])} = {row[2]} vs median "
                      f"{row[3]} ({escape(row[6])}; {row[5]})")
    if len(res.outliers) > 20:
        console.print(f"... {len(res.outliers) - 20} more outliers in fleet.json")
    for note in res.notes:
        console.print(f"[yellow]note[/yellow]: {escape(note)}")
    sev = {s: sum(1 for n in res.nodes if n.severity == s) for s in SEVERITIES}
    word = "PASSED" if res.exit_code == 0 else res.severity.upper()
    console.print(f"[bold]{word}[/bold] (exit {res.exit_code}): {sev[Severity.CRITICAL]} critical, "
                  f"{sev[Severity.UNKNOWN]} unknown, {sev[Severity.WARNING]} warning node(s) of {len(res.nodes)}; {len(res.outliers)} outlier(s)"
                  + (f"; outputs in {Path(res.files['fleet_json']).parent}" if "fleet_json" in res.files else ""))
