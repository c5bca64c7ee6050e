"""`fabricbench topo`: GPU links, NVLink islands and placement advice.

    fabricbench topo                              (NVML; `nvidia-smi topo -m` if NVML fails)
    fabricbench topo --gpus 0-3 --json
    fabricbench topo --from-file saved-topo-m.txt (an output saved on another machine)
"""

from __future__ import annotations

import json

import click

from fabricbench.cli.types import GpuList, InputPath, OutputFile

from fabricbench.errors import UsageError
from fabricbench.files import refuse_collisions
from fabricbench.gpus import parse_gpus
from fabricbench.measuring.runner import new_run_id
from fabricbench.report import table as tables
from fabricbench.results.writer import ResultWriter
from fabricbench.topology import read_topology, snapshot_record


def load_topology(from_file: str | None):
    """The topology from a file or this machine; UsageError when neither answers."""
    topo = read_topology(from_file)
    if topo is None:
        raise UsageError("no GPU topology here: NVML did not answer and `nvidia-smi topo -m` is not "
                         "available; pass --from-file with a saved `nvidia-smi topo -m` output")
    return topo


def select(topo, gpus: str | None):
    if gpus is None:
        return topo
    wanted = parse_gpus(gpus)
    n = len(topo.gpus)
    beyond = [g for g in wanted if g >= n]
    if beyond:
        shown = str(beyond[0]) if len(beyond) == 1 else f"{min(beyond)}-{max(beyond)}" \
            if len(beyond) == max(beyond) - min(beyond) + 1 else ", ".join(map(str, beyond[:8]))
        raise UsageError(f"--gpus {gpus} names GPU {shown} but the topology has {n} GPU(s) (0-{n - 1})")
    return topo.subset(wanted)


@click.command()
@click.option("--gpus", type=GpuList(), default=None, help="GPU list to show (NVML indices): 0-7, 0,2,5. Default: all.")
@click.option("--json", "as_json", is_flag=True, help="Print the topology as one JSON object.")
@click.option("--from-file", "from_file", type=InputPath(), default=None, help="Parse a saved `nvidia-smi topo -m` output.")
@click.option("--out", "out_path", type=OutputFile(), default=None, help="Append the topology record to this JSONL file.")
def topo(gpus, as_json, from_file, out_path):
    """Show GPU links, NVLink islands, and which GPU sets stay on NVLink."""

    if gpus is not None:
        parse_gpus(gpus)  # the list's syntax before any topology is read
    refuse_collisions({"--out": out_path}, {"--from-file": from_file})
    writer = ResultWriter(out_path) if out_path else None  # opened (so checked) before anything is read
    t = select(load_topology(from_file), gpus)
    doc = {**t.to_dict(), "advice": t.advice(), "summary": t.summary()}
    if writer is not None:
        rec = snapshot_record(new_run_id(), topo=t)
        rec["advice"] = doc["advice"]
        writer.write(rec)
        writer.close()
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    render(t, doc["advice"])


def render(t, advice) -> None:
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
