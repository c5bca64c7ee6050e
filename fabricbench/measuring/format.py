"""What `fabricbench compare` and `fabricbench scaling` print: their tables, compare's transport lines and
the published figures beside the measurement ("Is this normal?"), and scaling's plot.

    fabricbench compare --fabrics default,p2p-off --gpus 0,1 --sizes 1M-1G:x4
    fabricbench scaling --gpus 0-7 --num-gpus 2,4,8 --plot scaling.png

Library code (the CLI only maps flags), so that the CLI and the tests share one formatting of a result
of measuring.compare_run / scaling_run. p2p's tables are in copy_format.py.
"""

from __future__ import annotations

from typing import Any, Callable

from fabricbench import hostload, references
from fabricbench.reporting import table as tables
from fabricbench.reporting.analysis import CV_NOISY, fmt, fmt_ratio, noisy, scaling_series
from fabricbench.reporting.plot import busbw_vs_count
from fabricbench.sizes import format_size


def render_compare(res, *, say: Callable[[str], Any] = print) -> None:
    """A compare result (measuring.compare_run.CompareResult): the table per op, each fabric's transport, then
    each measured group beside its published references (`say` prints those lines)."""
    render_compare_table(res.table, res.runs)
    for line in references.summary(res.to_dict()["records"]):  # is this normal? the published figures
        say(line)


def render_compare_table(table: dict[str, Any], runs: list[Any]) -> None:
    """The busbw (or algbw) table per op with the N× slower columns, then one line per fabric's run."""
    from rich.markup import escape

    console = tables.console()
    metric, names = table["metric"], table["fabrics"]
    short = metric.replace("_gbps", "")
    cols = ([tables.Col("size", key=True)] + [tables.Col(n) for n in names]
            + [tables.Col(f"{n} slower", f"{i}:×", f"{i}:× = {n} N× slower than {names[0]}")
               for i, n in enumerate(names[1:], 1)])
    for op in dict.fromkeys(r["op"] for r in table["rows"]):
        rows = []
        for row in (r for r in table["rows"] if r["op"] == op):
            size = format_size(row["bytes"]) + (" (in)" if row["inplace"] else "")
            vals = [fmt(row[metric].get(n)) + (" !" if noisy(row.get("cv", {}).get(n)) else "") for n in names]
            rows.append([size, *vals,
                         *[fmt_ratio(row["slower"].get(n)) for n in names[1:]]])
        tables.render(console, f"{op}: {short} (GB/s) per fabric; N× slower than {names[0]}", cols, rows)
        if any(noisy(c) for r in table["rows"] if r["op"] == op for c in r.get("cv", {}).values()):
            console.print(f"! : cv above {CV_NOISY}: the spread is over half the median, the figure is noise "
                          f"(rerun with more --iters)", markup=False)
    if table["note"]:
        console.print(table["note"])
    for r in runs:
        line = f"{escape(r.fabric.name)}: transport {escape(str(r.transport))}"
        if r.waived:
            line = f"{escape(r.fabric.name)}: [yellow]WAIVED: {escape(r.waived)}[/yellow]"
        if r.mismatch:
            line += f" [red]MISMATCH: {escape(r.mismatch)}[/red]"
        if r.error:
            line += f" [red]FAILED: {escape(r.error)}[/red]"
        busy = hostload.records_note(r.records)  # its figures, and the N× slower built on them, may be low
        if busy:
            line += f"; [yellow]{escape(busy)}: its figures may be low[/yellow]"
        console.print(line)


def render_scaling(rows: list[dict[str, Any]], topo, *, cpu: bool = False) -> None:
    """The table; with CPU ranks it says ranks (there are no GPUs, islands or hops to name)."""
    console = tables.console()
    key = [tables.Col("op", justify="left", key=True), tables.Col("size", key=True)]
    bw = [tables.Col("busbw"), tables.Col("algbw"), tables.Col("transport", justify="left")]
    cells = lambda r: [fmt(r["busbw_gbps"]), fmt(r["algbw_gbps"]), r["transport"] or "-"]  # noqa: E731
    op = lambda r: [r["op"] + (" (in)" if r["inplace"] else ""), format_size(r["bytes"])]  # noqa: E731
    if cpu:
        cols = key + [tables.Col("ranks", key=True)] + bw
        table_rows = [op(r) + [str(r["count"])] + cells(r) for r in rows]
        title = "busbw and algbw (GB/s) against CPU rank count (processes on this host)"
    else:
        console.print(topo.summary(), markup=False)
        cols = key + [tables.Col("GPUs", key=True), tables.Col("placement", justify="left"),
                      tables.Col("set", justify="left"), tables.Col("slowest hop", "hop", justify="left")] + bw
        table_rows = [op(r) + [str(r["count"]), r["placement"], ",".join(map(str, r["gpus"])),
                               r["slowest_link"] or "-"] + cells(r) for r in rows]
        title = "busbw and algbw (GB/s) against GPU count, per placement"
    tables.render(console, title, cols, table_rows)


def plot_scaling(rows: list[dict[str, Any]], path: str) -> None:
    busbw_vs_count(scaling_series(rows), path, title="busbw against GPU count, per placement (largest size)")
