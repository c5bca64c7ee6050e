"""What `fabricbench topo` prints: the link matrix (colour by link type), the GPUs' facts, the islands and
the placement advice (library code; the CLI only maps flags).

    fabricbench topo --gpus 0-3
"""

from __future__ import annotations

from typing import Any

from fabricbench.reporting import table as tables


def render(t, advice: list[dict[str, Any]]) -> None:
    """A Topology `t` (topology/model.py) and its advice rows (Topology.advice()), on the console."""
    from rich.text import Text

    console = tables.console()
    labels = [f"GPU{g}" for g in t.indices]
    cols = [tables.Col("", justify="left", key=True)] + [tables.Col(lab, justify="center") for lab in labels]
    tables.render(console, f"GPU links ({t.source})", cols,
                  [[lab, *[Text.from_markup(_style(v)) for v in t.links[i]]] for i, lab in enumerate(labels)])
    if any(g.name or g.bus_id for g in t.gpus):
        cols = [tables.Col("GPU", key=True)] + [tables.Col(c, justify="left") for c in
                                                 ("name", "bus id", "PCIe (cur/max)", "NUMA", "CPUs", "UUID")]
        rows = []
        for g in t.gpus:
            pcie = (f"Gen{g.pcie_gen} x{g.pcie_width} / Gen{g.pcie_gen_max} x{g.pcie_width_max}"
                    if g.pcie_gen is not None else "-")
            rows.append([str(g.index), g.name or "-", g.bus_id or "-", pcie,
                         "-" if g.numa_node is None else str(g.numa_node), g.cpu_affinity or "-", g.uuid or "-"])
        tables.render(console, "GPUs", cols, rows)
    console.print(Text(t.summary(), style="bold"))
    for isl in t.islands():
        console.print(f"  island: {isl}", markup=False)
    if advice:
        cols = [tables.Col("k", key=True), tables.Col("inside one island", "island", justify="left"),
                tables.Col("advice", justify="left", prose=True)]
        tables.render(console, "Placement advice (job of k GPUs)", cols,
                      [[str(r["k"]), "yes" if r["inside_island"] else "no", r["text"]] for r in advice])


def _style(v: str) -> str:
    if v == "X":
        return "[dim]X[/dim]"
    if v.startswith("NV"):
        return f"[green]{v}[/green]"
    if v == "SYS":
        return f"[red]{v}[/red]"
    return f"[yellow]{v}[/yellow]"
