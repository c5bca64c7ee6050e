"""A sweep as SimuMax's system configuration (`system.json`), its `networks` fitted from the measured times.

    fabricbench export sweep.jsonl --format simumax --out system.json [--fabric F] [--base configs/system/x.json]
    (then SimuMax reads system.json with its model and strategy files)

How SimuMax prices a collective (MooreThreads/SimuMax simumax/core/config.py, SystemConfig.init_from_dict and
compute_net_op_time, v1.2, 4dcaae5), for a group of n ranks on network group `net`, in microseconds:

    t = A / (gbps · eff · 1024³) · 1e6 + L          A = size · scale · (1 + offset / n)
    L = latency_us · (n + offset) · scale          for the four collectives, only when num_per_node == 8
    L = latency_us                                 otherwise (p2p always);  t = 0 when n == 1

`size` is the whole buffer (nccl-tests' size column, fabricbench's bytes); scale and offset are fixed per op
(all_reduce 2, -1; all_gather, reduce_scatter, all2all 1, -1; p2p 1, 0); `eff` and `latency_us` are the
op's own when given, else the group's `bandwidth`. On `inter_node`, p2p runs at gbps / num_per_node. gbps is
GiB/s in effect (the 1024³).

How SimuMax fits it (simu_tools/efficency_test/nccl_fit.py, one_click_common.fit_bw_latency): a least-squares
line through the first 11 nccl-tests rows pasted into the script (1 MiB to 1 GiB), x = size · (n−1)/n · scale;
bw = 1/slope, eff = bw / 900 (the H100 NVSwitch nominal, hard-coded), latency_us = intercept / ((n−1) · scale),
divided whatever num_per_node is.

What this writes instead: per op, at the sweep's largest rank count, SimuMax's line through the largest
size's time (the bandwidth regime: the busbw users compare, the figure SimAI's export takes), with the
latency that minimises the relative error over the smaller sizes, divided only where SimuMax multiplies it
back (num_per_node 8). SimuMax then re-predicts the largest size (`repredict`: the round trip the tests hold
to 2%); the smaller sizes are off by what a straight line misses (a knee, noise on a CPU sweep), said per op
in a note with its median and worst. gbps is the --base file's nominal when given, else the best op's
fitted figure (a sweep does not know its link's nominal), and each op's efficient_factor is relative to it.
One node fills high_intra_node and low_intra_node (SimuMax routes intra-node groups to high_intra_node), or,
where --base says intra_with_pcie, the intra_node_pcie_Nx group for the rank count; several nodes fill
inter_node. A --base config keeps its accelerator, its other groups, its num_per_node and its nominal gbps.
Broadcast and ops SimuMax has no key for are left out, with a note.
"""

from __future__ import annotations

from dataclasses import dataclass

import copy
import json
import statistics
from typing import Any

from fabricbench.errors import UsageError
from fabricbench.exporting.measured import one_fabric
from fabricbench.files import read_input
from fabricbench.sizes import format_size

# fabricbench op -> (SimuMax's key, scale, offset): the fixed pairs of SimuMax's docs/system.md
OPS = {"all_reduce": ("all_reduce", 2, -1), "all_gather": ("all_gather", 1, -1),
       "reduce_scatter": ("reduce_scatter", 1, -1), "all_to_all": ("all2all", 1, -1), "sendrecv": ("p2p", 1, 0)}
INTRA = ("high_intra_node", "low_intra_node")
GIB = 1024 ** 3


def _sig(x: float, digits: int = 6) -> float:
    return float(f"{x:.{digits}g}")


def _by_count(values: dict[str, float] | None, n: int, default: float | None) -> float | None:
    """SimuMax's _lookup_comm_num_value: a figure per group size, keyed by its text."""
    return (values or {}).get(str(n), default)


def predict(system: dict[str, Any], key: str, size: int, n: int, net: str) -> float:
    """SimuMax's compute_net_op_time (no strategy, stage unknown) for `system` as a dict, in microseconds."""
    group = system["networks"][net]
    op = group["op"][key]
    eff = op.get("efficient_factor")
    eff = group["bandwidth"]["efficient_factor"] if eff is None else eff
    lat = op.get("latency_us")
    lat = group["bandwidth"]["latency_us"] if lat is None else lat
    fixed = _by_count(op.get("fixed_latency_us_by_comm_num"), n, op.get("fixed_latency_us"))
    if fixed is None:
        bandwidth = group["bandwidth"]
        fixed = _by_count(bandwidth.get("fixed_latency_us_by_comm_num"), n, bandwidth.get("fixed_latency", 0.0))
    if n == 1:
        return 0.0
    actual = size * op["scale"] * (1 + op["offset"] / n)
    bw = group["bandwidth"]["gbps"]
    if system.get("FC8") and net == "high_intra_node":
        bw *= (n - 1) / 7
    if net == "inter_node" and key == "p2p":
        bw /= system["num_per_node"]
    if system["num_per_node"] == 8 and key != "p2p":
        lat = lat * (n + op["offset"]) * op["scale"]
    return actual / (bw * GIB * eff) * 1e6 + lat + fixed


def _times(recs: list[dict[str, Any]]) -> dict[int, float]:
    """{size: time_us}: the median of the out-of-place records at each size (in-place where none)."""
    out: dict[int, float] = {}
    for size in sorted({r["bytes"] for r in recs}):
        here = [r for r in recs if r["bytes"] == size]
        timed = [r["time_us"] for r in here if not r.get("inplace")] or [r["time_us"] for r in here]
        out[size] = statistics.median(timed)
    return out


def _nodes(recs: list[dict[str, Any]]) -> int:
    seen = [len((r.get("extra") or {}).get("hosts") or []) for r in recs]
    seen += [((r.get("extra") or {}).get("transport_detail") or {}).get("nnodes") or 0 for r in recs]
    return max([1, *seen])


def _fit(op: str, times: dict[int, float], n: int, per_node: int) -> tuple[float, float, str]:
    """(bandwidth in GiB/s, latency_us as SimuMax stores it, a note) of SimuMax's line t = x/bw + L.

    The line goes through the largest size (its busbw is the figure users compare, as SimAI's export takes);
    L is then the one that minimises the relative error over the other sizes (a closed form: each size's
    relative error is linear in L), kept between 0 and the largest size's time.
    """
    key, scale, offset = OPS[op]
    x = {s: s * scale * (1 + offset / n) for s in times}
    big = max(times)
    xl, tl = x[big], times[big]
    # (L·(1 − x/xl) + tl·x/xl) / t − 1 = L·c − d
    c = [(1 - x[s] / xl) / times[s] for s in times if s != big]
    d = [1 - tl * x[s] / (xl * times[s]) for s in times if s != big]
    cc = sum(v * v for v in c)
    lat = sum(ci * di for ci, di in zip(c, d)) / cc if cc else 0.0
    note = ""
    if lat < 0 or lat >= tl:
        bound = "0" if lat < 0 else "the largest size's time"
        note = f"; latency kept at {bound} (the smaller sizes do not fit a line)"
        lat = min(max(lat, 0.0), tl * 0.999)
    slope = (tl - lat) / xl
    times_lat = (n + offset) * scale if per_node == 8 and key != "p2p" else 1
    return 1e6 / (slope * GIB), lat / times_lat, note


def _measured(records: list[dict[str, Any]], fabric: str | None) -> tuple[str, dict[str, list], list[str]]:
    fabric, colls = one_fabric(records, fabric, reader="SimuMax")
    colls = [r for r in colls if r.get("time_us") and (r.get("nranks") or 0) > 1]
    notes = []
    left = sorted({r["op"] for r in colls} - set(OPS))
    if left:
        notes.append(f"left out {', '.join(left)}: SimuMax has no such network op")
    by_op = {op: [r for r in colls if r["op"] == op] for op in OPS}
    by_op = {op: rs for op, rs in by_op.items() if rs}
    if not by_op:
        raise UsageError(f"no {'/'.join(OPS)} record with a time on fabric {fabric} (SimuMax's network ops)")
    for op, rs in by_op.items():
        ranks = sorted({r["nranks"] for r in rs})
        if len(ranks) > 1:
            notes.append(f"{op}: fitted on {ranks[-1]} ranks; the records on {', '.join(map(str, ranks[:-1]))} "
                         f"ranks are left out (one line per op)")
        by_op[op] = [r for r in rs if r["nranks"] == ranks[-1]]
    return fabric, by_op, notes


def _groups(nodes: int, nranks: int, pcie: bool) -> tuple[str, ...]:
    """The network groups SimuMax reads for a group of `nranks` on `nodes` nodes (perf_llm.py's routing).

    Several nodes: inter_node. One: high_intra_node (and low_intra_node, which its docs ask for), or where the
    --base config says intra_with_pcie, the PCIe group SimuMax's analysis_pcie_net picks for that many ranks.
    """
    if nodes > 1:
        return ("inter_node",)
    if not pcie:
        return INTRA
    for width in (2, 4, 8):
        if nranks <= width:
            return (f"intra_node_pcie_{width}x",)
    raise UsageError(f"the sweep ran {nranks} ranks on one node; SimuMax's PCIe groups hold at most 8 "
                     f"(give a --base without intra_with_pcie)")


def _base(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        doc = json.loads(read_input(path, what="--base"))
    except ValueError as e:
        raise UsageError(f"--base {path}: not JSON ({e}); give a SimuMax system config "
                         f"(configs/system/*.json)") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("networks"), dict):
        raise UsageError(f"--base {path}: no 'networks' object; give a SimuMax system config (configs/system/*.json)")
    return doc


@dataclass(frozen=True, kw_only=True)
class SimumaxOptions:
    """What `export --format simumax` takes: the fabric (when the results hold several) and a SimuMax system
    config to fill (its accelerator, other networks and unmeasured ops are kept)."""

    fabric: str | None = None
    base: str | None = None


def system(records: list[dict[str, Any]], *, fabric: str | None = None, base: str | None = None,
           source: str = "") -> tuple[dict[str, Any], list[str]]:
    """SimuMax's system config (a dict) fitted from `records`, and one note per op (fit and round trip)."""
    fabric, by_op, notes = _measured(records, fabric)
    nodes = max(_nodes(rs) for rs in by_op.values())
    n_max = max(rs[0]["nranks"] for rs in by_op.values())
    doc = copy.deepcopy(_base(base))
    # GPUs per node is the machine's: a --base config's figure stands (the sweep may have used fewer)
    per_node = int(doc.get("num_per_node") or max(1, n_max // nodes))
    nets = _groups(nodes, n_max, bool((doc.get("networks") or {}).get("intra_with_pcie")))
    fits = {op: _fit(op, _times(rs), rs[0]["nranks"], per_node) for op, rs in by_op.items()}
    # on inter_node SimuMax runs p2p at gbps / num_per_node: its share of the link is per_node times its figure
    share = {op: per_node if nets[0] == "inter_node" and OPS[op][0] == "p2p" else 1 for op in fits}
    gbps = max(fits[op][0] * share[op] for op in fits)  # the nominal of a group --base does not give
    doc["sys_name"] = doc.get("sys_name") or f"fabricbench {source}".strip()
    doc["num_per_node"] = per_node
    networks = doc.setdefault("networks", {})
    if nets == INTRA:
        if doc.get("FC8"):
            notes.append("--base's FC8 set to false: the fitted figures already hold the NVLink topology")
        networks["intra_with_pcie"], doc["FC8"] = False, False
    lats = [lat for _, lat, _ in fits.values()]
    for net in nets:
        group = copy.deepcopy(networks.get(net) or {})
        group.setdefault("processor_usage", 0.0)
        # a --base group's bandwidth stands: the ops not measured keep their figures
        group.setdefault("bandwidth", {"gbps": _sig(gbps), "efficient_factor": 1.0,
                                       "latency_us": _sig(statistics.median(lats))})
        ops = group.setdefault("op", {})
        nominal = group["bandwidth"]["gbps"]  # each group's own: --base's groups may differ
        for op, (key, scale, offset) in OPS.items():
            ops.setdefault(key, {"scale": scale, "offset": offset})
            if op in fits:
                bw, lat, _ = fits[op]
                ops[key] = {"scale": scale, "offset": offset, "efficient_factor": _sig(bw * share[op] / nominal),
                            "latency_us": _sig(lat), "fixed_latency_us": 0.0}
        networks[net] = group
        over = sorted(op for op in fits if fits[op][0] * share[op] > nominal * 1.0001)
        if over and net == nets[0]:
            notes.append(f"{', '.join(over)}: measured faster than --base's nominal {nominal:g} GiB/s "
                         f"(efficient_factor above 1): is --base the machine that was swept?")
    doc["fabricbench"] = {"source": source, "fabric": fabric, "network": nets[0], "ops": {
        op: {"key": OPS[op][0], "nranks": by_op[op][0]["nranks"]} for op in fits}}
    notes += _fit_notes(json.loads(json.dumps(doc)), by_op, fits, nets[0])
    if "accelerator" not in doc:
        notes.append("no accelerator section: copy it from the nearest SimuMax configs/system file, or give that "
                     "file as --base (this fills only the measured network group)")
    return doc, notes


def repredict(system_doc: dict[str, Any], records: list[dict[str, Any]], op: str,
              net: str | None = None) -> list[tuple[int, float, float]]:
    """[(size, measured us, SimuMax's us)] for `op`'s records at the rank count the table was fitted on."""
    meta = system_doc.get("fabricbench", {}).get("ops", {}).get(op)
    if meta is None:
        raise UsageError(f"the SimuMax file holds no fitted {op}")
    net = net or system_doc["fabricbench"]["network"]
    rs = [r for r in records if r.get("kind") == "collective" and r.get("op") == op and r.get("time_us")
          and r.get("nranks") == meta["nranks"] and r.get("bytes")
          and (r.get("fabric") or "default") == system_doc["fabricbench"]["fabric"]]
    return [(s, t, predict(system_doc, meta["key"], s, meta["nranks"], net)) for s, t in _times(rs).items()]


def _fit_notes(doc: dict[str, Any], by_op: dict[str, list], fits: dict, net: str) -> list[str]:
    notes = []
    for op, (bw, lat, extra) in fits.items():
        rows = repredict(doc, by_op[op], op, net)
        big = max(rows)
        off = sorted(abs(p / t - 1) for s, t, p in rows if s != big[0])
        rest = (f"; the {len(off)} smaller size(s) are off by {off[len(off) // 2]:.0%} (median), up to {off[-1]:.0%}"
                if off else "")
        notes.append(f"{op} -> {net} {OPS[op][0]}: {bw:.4g} GiB/s, latency {lat:.4g} us, on "
                     f"{by_op[op][0]['nranks']} ranks; re-predicts {format_size(big[0])} within "
                     f"{abs(big[2] / big[1] - 1):.2%}{rest}{extra}")
    return notes
