"""A fleet: many nodes' qualification runs side by side, their verdicts and their outliers.

    fabricbench qualify --fleet node1/ node2/ node3/ --out fleet/ [--fraction 0.9]
    fabricbench qualify --fleet results/*.jsonl
    fabricbench qualify --fleet all-hosts.jsonl --prometheus fleet.prom   (one file holding many hosts)
    fabricbench.fleet(fabricbench.FleetConfig(inputs=("node1/", "node2/"), fraction=0.9))  (config.py)

Each input is one node: a `qualify --out` folder (results.jsonl, and verdicts.json when there) or a
results file; a results file whose records come from several hosts is a node per host. Files are
streamed (inputs.py: one line at a time, only the fields a figure needs kept), so 12,500 hosts of 12
records each are judged in seconds (benchmarks/qualify/fleet_scale.py).

Per figure (figures.py: the same names on every node that measured it) the fleet's median and MAD
(median absolute deviation) are computed; a node is an outlier on a figure when it is worse than
`fraction` x the median (for a floor; median / fraction for a ceiling: critical), or when its robust
z-score 0.6745 x (x - median) / MAD is beyond `mad_z` on the bad side (a warning). A node's severity is
the worst of its outliers and of its own verdicts (verdict records or verdicts.json). The report lists
the worst nodes first, with their codes. Outputs (fleet_report.py): fleet.json, junit.xml (a testcase per
node), report.md/html, fleet.png (small fleets), and `--prometheus FILE`. Exit status by the worst node's
severity, as for one node (verdict.py).
"""

from __future__ import annotations

import os
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from fabricbench.errors import UsageError
from fabricbench.progress import Progress
from fabricbench.qualifying.config import FleetConfig
from fabricbench.qualifying.figures import Figure, figures
from fabricbench.qualifying.fleet_report import render, write_outputs, write_prometheus
from fabricbench.qualifying.inputs import Tally, read_json, records
from fabricbench.qualifying.prometheus import check_path as check_prometheus_path
from fabricbench.qualifying.result import FleetResult, Node, Outlier
from fabricbench.qualifying.verdict import RANK, Verdict
from fabricbench.results.status import Severity, Status

__all__ = ["FleetResult", "Node", "Outlier", "judge_figure", "load_nodes", "render", "run_fleet"]

# The fields a figure (figures.py), a verdict or a busbw series reads: a streamed record keeps only these.
_KEEP = ("kind", "status", "time_us", "inplace", "requested_bytes", "busbw_gbps", "algbw_gbps", "cv", "op",
         "dtype", "nranks", "gpus", "fabric", "host", "gbps", "direction", "bytes", "copy_kind", "src", "dst",
         "throughput", "strategy", "model", "check", "check_kind", "severity", "code")


def _slim(rec: dict[str, Any]) -> dict[str, Any]:
    return {k: rec[k] for k in _KEEP if k in rec}


def load_nodes(path: str | os.PathLike, notes: list[str] | None = None) -> list[Node]:
    """The node(s) of one input: a qualify --out folder or a results file (a node per host it holds)."""
    p = Path(path)
    verdicts = None
    if p.is_dir():
        results = p / "results.jsonl"
        if (p / "verdicts.json").is_file():
            verdicts = read_json(p / "verdicts.json", what="--fleet")
            if not isinstance(verdicts, dict) or not isinstance(verdicts.get("verdicts"), list):
                verdicts = None
                if notes is not None:
                    notes.append(f"--fleet {path}: verdicts.json is damaged; judged from results.jsonl alone")
        name = p.name or str(p)
    else:
        results = p
        name = p.stem if p.name != "results.jsonl" else (p.parent.name or p.stem)
    if p.is_dir() and not results.exists():
        raise UsageError(f"--fleet {path}: no results.jsonl there; give qualify --out folders or results files")
    by_host: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    tally = Tally()
    for rec in records(results, what="--fleet", tally=tally):
        if rec.get("kind") in ("collective", "copy", "train", "verdict"):
            by_host[rec.get("host")].append(_slim(rec))
    note = tally.note(f"--fleet {path}")
    if note and notes is not None:
        notes.append(note)
    if not by_host:
        raise UsageError(f"--fleet {path}: {results} holds no measurement (collective, copy or train records)")
    measured = [h for h, rs in by_host.items() if h and any(r.get("kind") != "verdict" for r in rs)]
    if len(measured) > 1 and verdicts is None:  # one file gathered from many hosts: a node per host
        nodes = []
        for h in sorted(measured):
            n = Node(name=h, source=f"{path} (host {h})", host=h, figures=figures(by_host[h]))
            _adopt_verdicts(n, [r for r in by_host[h] if r.get("kind") == "verdict"])
            nodes.append(n)
        return nodes
    recs = [r for rs in by_host.values() for r in rs]
    host = next((r.get("host") for r in recs if r.get("host")), None)
    node = Node(name=name, source=str(path), host=host, figures=figures(recs))
    if verdicts is not None:
        _adopt_verdicts(node, [v for v in verdicts["verdicts"] if isinstance(v, dict)])
    else:
        _adopt_verdicts(node, [r for r in recs if r.get("kind") == "verdict"])
    return [node]


def _adopt_verdicts(node: Node, verdicts: list[dict[str, Any]]) -> None:
    """A node's own verdicts (records or verdicts.json entries, typed by Verdict.from_record: older runs get
    their severity from their status; one that is not a verdict is left out): its failed checks, their
    severities and codes."""
    typed = [v for v in map(Verdict.from_record, verdicts) if v is not None]
    if not typed:
        return
    for v in typed:
        node.checks[v.check] = (v.severity, v.code)
        if v.status in (Status.FAIL, Status.ERROR):
            node.failed.append(v.check)
        if v.severity.rank > node.severity.rank:
            node.severity = v.severity
        if v.severity not in (Severity.PASS, Severity.INFO) and v.code not in node.codes:
            node.codes.append(v.code)
    node.status = Status.FAIL if node.failed else Status.PASS


def run_fleet(config: FleetConfig, *, quiet: bool = False) -> FleetResult:
    """The fleet's verdict: every input's nodes read, each figure judged across them, the worst nodes first;
    its outputs written where config.out and config.prometheus say. Progress on stderr unless quiet."""
    inputs, fraction, mad_z = config.inputs, config.fraction, config.mad_z
    if config.prometheus is not None:
        check_prometheus_path(config.prometheus)
    notes: list[str] = []
    nodes = []
    with Progress("fleet: reading nodes", total=len(inputs), quiet=quiet) as bar:  # many nodes take a while
        for p in inputs:
            nodes += load_nodes(p, notes)
            bar.advance(item=Path(p).name)
    if len(nodes) < 2:
        raise UsageError(f"--fleet needs at least 2 nodes to compare (got {len(nodes)}: {nodes[0].name})")
    names = [n.name for n in nodes]
    if len(set(names)) < len(names):  # two folders of the same name: tell them apart by their paths
        for n in nodes:
            n.name = n.source
    per_fig: dict[str, list[tuple[Node, Figure]]] = defaultdict(list)
    for n in nodes:
        for k, f in n.figures.items():
            per_fig[k].append((n, f))
    stats: dict[str, dict[str, Any]] = {}
    outliers: list[Outlier] = []
    for fig in sorted(per_fig):
        vals = per_fig[fig]
        if len(vals) < 2:
            continue
        st, found = judge_figure(fig, vals, fraction, mad_z)
        stats[fig] = st
        outliers += found
    if not stats:
        raise UsageError("--fleet: the nodes share no measured figure; qualify them with the same spec")
    by_name = {n.name: n for n in nodes}
    for o in outliers:
        n = by_name[o.node]
        if RANK[o.severity] > RANK[n.severity]:
            n.severity = o.severity
        if o.code not in n.codes:
            n.codes.append(o.code)
    worst_ratio: dict[str, float] = {}
    for o in outliers:
        bad = o.ratio if stats[o.figure]["sense"] == "min" else (1 / o.ratio if o.ratio else 0.0)
        worst_ratio[o.node] = min(worst_ratio.get(o.node, 1.0), bad)
    nodes.sort(key=lambda n: (-RANK[n.severity], worst_ratio.get(n.name, 1.0), n.name))
    res = FleetResult(nodes=nodes, stats=stats, outliers=outliers, fraction=fraction, mad_z=mad_z, notes=notes)
    if config.out is not None:
        write_outputs(res, Path(config.out))
    if config.prometheus is not None:
        res.files["prometheus"] = write_prometheus(res, config.prometheus)
    return res


def judge_figure(fig: str, vals: list[tuple[Node, Figure]], fraction: float, mad_z: float):
    """One figure's median and MAD over the fleet, and the nodes that are outliers on it."""
    xs = [f.value for _, f in vals]
    med = statistics.median(xs)
    mad = statistics.median([abs(x - med) for x in xs])
    sense, unit = vals[0][1].sense, vals[0][1].unit
    st = {"median": med, "mad": mad, "n": len(xs), "unit": unit, "sense": sense}
    found = []
    for n, f in vals:
        z = 0.6745 * (f.value - med) / mad if mad > 0 else None
        bad_z = z is not None and (z < -mad_z if sense == "min" else z > mad_z)
        bad_frac = f.value < fraction * med if sense == "min" else f.value > med / fraction
        if bad_z or bad_frac:
            why = []
            if bad_frac:
                limit = f"below {fraction:g}x" if sense == "min" else f"above 1/{fraction:g}x"
                why.append(f"{f.value / med:.0%} of the median ({limit})" if med else f"{limit} the median 0")
            if bad_z:
                why.append(f"robust z {z:+.1f}")
            found.append(Outlier(node=n.name, figure=fig, value=f.value, median=med,
                                 ratio=f.value / med if med else float("nan"), robust_z=z, why="; ".join(why),
                                 severity=Severity.CRITICAL if bad_frac else Severity.WARNING))
    return st, found
