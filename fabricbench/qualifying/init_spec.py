"""A spec from a known-good node: every measured figure x factor becomes a threshold.

    fabricbench qualify --init node.toml --from q/results.jsonl --factor 0.9

The checks run the way the results were measured: the same engine, backend, rank count, GPU sets,
sizes and dtype. What becomes what:
- the topology record -> a topology check: GPU count and name, the link of every pair when uniform, else
  the islands, uniformity, PCIe generation and width;
- collective records, per (fabric, op, dtype, GPU set) -> a collective check: busbw at the largest size
  x factor (a floor), median time at the smallest size / factor (a ceiling); checked records whose wrong
  count was 0 -> a correctness check;
- NCCL transports observed per fabric (2 ranks or more) -> a transport check;
- two fabrics measured on the same op, size and GPUs -> a contrast check (time ratio x factor);
- copy records -> p2p (slowest pair x factor) and host_copy (slowest GPU per direction x factor);
- train records -> a train check (samples/s x factor, the loss falls).

The measured spread lowers the factor: a figure whose run-to-run coefficient of variation is cv gets
min(factor, 1 - 3 cv) (never below 0.5), so that the same machine passes its own spec on a noisy day; and
[run] baseline_tolerance is set from the spread, so that `--baseline` against this run passes on the same
machine. A figure that is not finite, not positive, or beyond any sane value never becomes a threshold.
"""

from __future__ import annotations

import json
import math
import os
import socket
from collections import defaultdict
from typing import Any

from fabricbench.errors import UsageError
from fabricbench.qualifying.fields import MAX_NUMBER, MAX_SIZE, READERS, FieldError
from fabricbench.qualifying.figures import SPREAD_Z
from fabricbench.qualifying.inputs import read_all, results_path
from fabricbench.results import records as results_records
from fabricbench.results.schema import TrainResult
from fabricbench.results.status import TIMED_COLLECTIVE, Status
from fabricbench.sizes import format_size
from fabricbench.topology.model import Topology

MIN_FACTOR = 0.5  # the spread never lowers a factor below this (half the measured figure)


def spec_from_results(path: str | os.PathLike, *, factor: float = 0.9, name: str | None = None) -> str:
    if not 0 < factor <= 1:
        raise UsageError(f"--factor {factor:g}: a fraction in (0, 1], e.g. 0.9 (thresholds = measured x factor)")
    if not os.path.lexists(str(path)):
        raise UsageError(f"--from {path}: no such results file; give a results.jsonl (or a qualify --out folder)")
    p = str(results_path(path, what="--from"))
    records, _ = read_all(path, what="--from")
    colls = [r for r in records if r.get("kind") == "collective" and r.get("status") in TIMED_COLLECTIVE
             and _sane(r.get("time_us")) and _readable(r)]
    copies = [r for r in records if r.get("kind") == "copy" and _sane(r.get("gbps"))
              and isinstance(r.get("direction"), str) and isinstance(r.get("bytes"), int) and 0 < r["bytes"] <= MAX_SIZE]
    trains = [t for t in results_records.typed(records, TrainResult)[0] if t.status == Status.OK]
    topo = next((r for r in records if r.get("kind") == "topology"), None)
    try:
        topology = Topology.from_dict(topo) if topo and topo.get("gpus") else None
    except (KeyError, TypeError, ValueError, AttributeError):  # a damaged topology record: no wiring check
        topology = topo = None
    if not (colls or copies or trains or topo):
        raise UsageError(f"--from {path}: no measurement in it (collective, copy, train or topology records)")
    host = _clean(next((r.get("host") for r in records if r.get("host")), socket.gethostname()))
    path = _clean(str(path))
    w = _Toml()
    w.comment(f"Written by `fabricbench qualify --init --from {path} --factor {factor:g}`: thresholds are this")
    w.comment("known-good run's figures x factor (floors) or / factor (ceilings).")
    said = len(w.lines)  # the factors line goes here once every threshold is written (summary() reads it)
    w.table("spec")
    w.kv("name", name or f"{host}-known-good")
    w.kv("description", f"Thresholds from {host}'s run ({os.path.basename(p)}), factor {factor:g}.")
    w.kv("source", f"measured on {host}, {path}")
    run = _run_settings(colls, trains)
    w.table("run")
    for k, v in run.items():
        w.kv(k, v)
    cvs = sorted(r["cv"] for r in colls if isinstance(r.get("cv"), (int, float)) and 0 <= r["cv"] < 1)
    if cvs:  # a baseline of this machine must pass: the tolerance covers two runs' typical spread
        typical = cvs[len(cvs) // 2]
        tol = min(0.5, max(0.05, SPREAD_Z * math.sqrt(2) * typical))
        w.kv("baseline_tolerance", _round(tol), f"3 x sqrt(2) x the median cv {typical:.3g}, in [0.05, 0.5]")
    if topology is not None:
        _topology(w, topology)
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in colls:
        if not r.get("inplace"):
            groups[(r.get("fabric") or "default", r["op"], r["dtype"], tuple(r.get("gpus") or ()))].append(r)
    all_gpus = tuple(g.index for g in topology.gpus) if topology is not None else None
    used: set[str] = set()
    _collectives(w, groups, used, all_gpus, run, factor)
    _transport(w, colls, used, all_gpus, run)
    _contrast(w, groups, used, all_gpus, run, factor)
    _copies(w, copies, used, factor)
    _trains(w, trains, used, factor)
    if not w.checks:
        raise UsageError(f"--from {path}: nothing in it becomes a check")
    w.lines.insert(said, f"# {FACTORS}{_factors(factor, w.lowered)}")
    return w.text()


FACTORS = "thresholds = "  # the header line that says the factors, as written: --init prints it from the file


def summary(text: str) -> str:
    """The factors an --init spec's thresholds were written with, as its header says them."""
    return next((ln[2:] for ln in text.splitlines() if ln.startswith(f"# {FACTORS}")), "")


def _factors(factor: float, lowered: list[str]) -> str:
    if not lowered:
        return f"measured x {factor:g} (floors), / {factor:g} (ceilings)"
    return (f"measured x {factor:g}, except {len(lowered)} lowered to the figure's own run-to-run spread "
            f"(1 - 3 cv, never below {MIN_FACTOR:g}): " + "; ".join(lowered))


def _collectives(w, groups, used, all_gpus, run, factor) -> None:
    """A collective check per (fabric, op, dtype, GPU set), and a correctness check per fabric, dtype and GPU
    set whose checked records were all right."""
    correct: dict[tuple, tuple[dict[str, None], set[int]]] = {}
    for (fabric, op, dtype, gpus), rs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        # one record per size for the thresholds: a size measured plainly and again with --check (the
        # correctness sweep) takes the plain one, as the collective check measures it; the checked ones
        # still feed the correctness check below
        # (a stable sort puts checked records first, so a plain one of the same size replaces them)
        timed = {r["requested_bytes"]: r for r in sorted(rs, key=lambda r: r.get("wrong") is None)}
        checked = [r for r in rs if r.get("wrong") is not None]
        rs = sorted(timed.values(), key=lambda r: r["requested_bytes"])
        big, small = rs[-1], rs[0]
        cname = _unique(used, f"{op}_{dtype}" + ("" if fabric == "default" else f"_{_slug(fabric)}")
                        + ("" if not gpus or gpus == all_gpus else "_gpus" + "-".join(map(str, gpus))))
        w.check(cname, "collective")
        w.kv("op", op)
        w.kv("sizes", [format_size(r["requested_bytes"]) for r in rs])
        w.kv("dtype", dtype)
        w.kv("fabric", fabric)
        w.kv("gpus", _gpus_value(gpus, all_gpus, run))
        bw = big.get("busbw_gbps")
        if _sane(bw):
            f = w.factor(factor, big.get("cv"), f"{cname} busbw")
            w.kv("min_busbw_gbps", _round(bw * f),
                 f"measured {bw:.4g} GB/s at {format_size(big['requested_bytes'])} x {f:.3g}{_why(f, factor, big)}")
        else:
            bw = None
        if (small is not big or not bw) and _sane(small["time_us"]):
            f = w.factor(factor, small.get("cv"), f"{cname} latency")
            w.kv("max_latency_us", _round(small["time_us"] / f),
                 f"measured {small['time_us']:.4g} µs at {format_size(small['requested_bytes'])} / {f:.3g}"
                 f"{_why(f, factor, small)}")
        elif not bw:
            w.kv("max_latency_us", _round(MAX_NUMBER), "no sane figure was measured: a placeholder ceiling")
        if checked and all(r["wrong"] == 0 for r in checked):
            c = correct.setdefault((fabric, dtype, gpus), ({}, set()))
            c[0][op] = None
            c[1].update(r["requested_bytes"] for r in checked)
    # one correctness check (one sweep) per fabric, dtype and GPU set, over every op and size checked
    for (fabric, dtype, gpus), (ops, sizes) in sorted(correct.items(), key=lambda kv: str(kv[0])):
        w.check(_unique(used, "correct" + ("" if fabric == "default" else f"_{_slug(fabric)}")
                        + ("" if dtype == "float32" else f"_{dtype}")), "correctness")
        w.kv("ops", list(ops))
        w.kv("sizes", [format_size(b) for b in sorted(sizes)])
        w.kv("dtype", dtype)
        w.kv("fabric", fabric)
        w.kv("gpus", _gpus_value(gpus, all_gpus, run))


def _trains(w, trains, used, factor) -> None:
    for t in trains:
        sps = t.samples_per_s
        w.check(_unique(used, f"train_{t.strategy}"), "train")
        w.kv("strategy", t.strategy)
        w.kv("model", t.model)
        for k in ("steps", "warmup_steps", "batch_size", "seq_len"):
            if isinstance(t.reached(k), int) and not isinstance(t.reached(k), bool):
                w.kv(k, t.reached(k))
        w.kv("fabric", t.context.get("fabric") or "default")
        w.kv("loss_falls", True)
        if _sane(sps):
            w.kv("min_samples_per_s", _round(sps * factor), f"measured {sps:.4g} samples/s x {factor:g}")


def _clean(text: str) -> str:
    """Text from a results file, fit for a spec: control characters (a newline would end a comment) as '?'."""
    return "".join(c if c.isprintable() else "?" for c in text)[:200] or "?"


def _readable(r: dict[str, Any]) -> bool:
    """A collective record whose op, dtype, size and fabric a spec can name (a foreign one is skipped)."""
    try:
        READERS["op"][0](r.get("op"))
        READERS["dtype"][0](r.get("dtype"))
        READERS["fabric"][0](r.get("fabric") or "default")
    except FieldError:
        return False
    b = r.get("requested_bytes")
    if b is None and isinstance(r.get("source"), dict):  # imported (nccl-tests): only the size moved is printed
        b = r["requested_bytes"] = r.get("bytes")
    return isinstance(b, int) and 0 < b <= MAX_SIZE


def _sane(v: Any) -> bool:
    """A figure that may become a threshold: a finite positive number within the spec's bounds."""
    return (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            and 0 < v <= MAX_NUMBER * 0.5)


def _why(f: float, factor: float, rec: dict[str, Any]) -> str:
    """Why a threshold's factor is not --factor, beside it in the spec: the figure's own spread."""
    return f" ({factor:g} lowered: cv {rec['cv']:.3g})" if f < factor else ""


def _factor(factor: float, cv: Any) -> float:
    """The factor, lowered to the figure's own spread (1 - 3 cv) when that is wider, never below 0.5."""
    if isinstance(cv, (int, float)) and not isinstance(cv, bool) and math.isfinite(cv) and cv > 0:
        return min(factor, max(MIN_FACTOR, 1 - SPREAD_Z * cv))
    return factor


def _run_settings(colls: list[dict[str, Any]], trains: list[TrainResult]) -> dict[str, Any]:
    if not colls:
        cpu = next((t for t in trains if t.device == "cpu"), None)
        if cpu is not None:  # a CPU training run: gloo ranks, as many as it had
            return {"engine": "torch", "backend": "gloo", "nprocs": int(cpu.nranks or 2)}
        return {"engine": "native"}
    r = colls[0]
    engine = r.get("engine") or "native"
    # imported nccl-tests results were measured on GPUs through NCCL: the native engine measures the same
    out: dict[str, Any] = {"engine": engine if engine in ("native", "torch") else "native"}
    if out["engine"] == "torch":
        out["backend"] = r.get("backend") or "gloo"
        if out["backend"] == "gloo":
            out["nprocs"] = int(r.get("nranks") or 2)
    iters = r.get("iters")
    if isinstance(iters, int) and 0 < iters <= MAX_NUMBER:
        out["iters"] = iters
    return out


def _gpus_value(gpus: tuple[int, ...], all_gpus, run) -> Any:
    if run.get("backend") == "gloo" or not gpus or (all_gpus is not None and tuple(gpus) == all_gpus):
        return "all"
    return [list(gpus)]


def _topology(w: "_Toml", t: Topology) -> None:
    w.check("wiring", "topology")
    w.kv("gpu_count", len(t.gpus))
    names = {g.name for g in t.gpus}
    if len(names) == 1 and None not in names:
        w.kv("gpu_name", names.pop())
    if len(t.gpus) > 1:
        if t.uniform:
            w.kv("link", t.link(*t.pairs()[0]))
        else:
            w.kv("islands", [list(i) for i in t.islands()])
        w.kv("uniform", t.uniform)
    gens = [g.pcie_gen_max or g.pcie_gen for g in t.gpus]
    widths = [g.pcie_width_max or g.pcie_width for g in t.gpus]
    if all(gens):
        w.kv("pcie_gen", min(gens))
    if all(widths):
        w.kv("pcie_width", min(widths))


def _transport(w, colls, used, all_gpus, run) -> None:
    seen: dict[tuple, dict[str, str]] = {}
    for r in colls:
        t = r.get("transport")
        if not t or (r.get("nranks") or 0) < 2 or r.get("backend") == "gloo" or t.startswith(("unknown", "none",
                                                                                              "gloo")):
            continue
        fams = "+".join(sorted({x.split("/")[0] for x in t.split("+")}))
        seen.setdefault((r["op"], r["requested_bytes"], r["dtype"], tuple(r.get("gpus") or ())), {})[
            r.get("fabric") or "default"] = fams
    if not seen:
        return
    (op, size, dtype, gpus), expect = max(seen.items(), key=lambda kv: len(kv[1]))
    w.check(_unique(used, "transports"), "transport")
    w.kv("expect", expect)
    w.kv("op", op)
    w.kv("size", format_size(size))
    w.kv("dtype", dtype)
    w.kv("gpus", _gpus_value(gpus, all_gpus, run))


def _contrast(w, groups, used, all_gpus, run, factor) -> None:
    by: dict[tuple, dict[str, dict[str, Any]]] = defaultdict(dict)
    for (fabric, op, dtype, gpus), rs in groups.items():
        big = max(rs, key=lambda r: r["requested_bytes"])
        if (big.get("nranks") or 0) >= 2:
            by[(op, dtype, gpus, big["requested_bytes"])][fabric] = big
    for (op, dtype, gpus, size), fabs in sorted(by.items(), key=lambda kv: str(kv[0])):
        if "default" not in fabs or len(fabs) < 2:
            continue
        fast = fabs["default"]
        for fabric, slow in sorted(fabs.items()):
            if fabric == "default":
                continue
            ratio = slow["time_us"] / fast["time_us"]
            if not _sane(ratio) or ratio * factor <= 1:
                continue  # no contrast to keep
            w.check(_unique(used, f"contrast_{_slug(fabric)}_{op}"), "contrast")
            w.kv("fast", "default")
            w.kv("slow", fabric)
            w.kv("op", op)
            w.kv("size", format_size(size))
            w.kv("dtype", dtype)
            w.kv("gpus", _gpus_value(gpus, all_gpus, run))
            w.kv("min_ratio", _round(ratio * factor), f"measured {ratio:.3g}x x {factor:g}")


def _copies(w, copies, used, factor) -> None:
    peers = [r for r in copies if r.get("copy_kind") == "peer" and r["src"] != r["dst"] and r["direction"] == "uni"]
    peers = [r for r in peers if _sane(r["gbps"])]
    if peers:
        slow = min(peers, key=lambda r: r["gbps"])
        w.check(_unique(used, "peer_copies"), "p2p")
        w.kv("size", format_size(slow["bytes"]))
        w.kv("min_gbps", _round(slow["gbps"] * factor),
             f"slowest pair {slow['src']}->{slow['dst']} {slow['gbps']:.4g} GB/s x {factor:g}")
    host = [r for r in copies if r.get("copy_kind") == "host" and _sane(r["gbps"]) and isinstance(r.get("bytes"), int)]
    if host:
        w.check(_unique(used, "host_links"), "host_copy")
        w.kv("size", format_size(host[0]["bytes"]))
        for d in ("h2d", "d2h", "bidir"):
            rs = [r for r in host if r["direction"] == d]
            if rs:
                slow = min(rs, key=lambda r: r["gbps"])
                w.kv(f"min_{d}_gbps", _round(slow["gbps"] * factor), f"slowest {slow['gbps']:.4g} GB/s x {factor:g}")


def _round(v: float) -> float:
    """Four significant digits: a threshold, not a measurement."""
    return float(f"{v:.4g}")


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text).strip("_")


def _unique(used: set[str], name: str) -> str:
    base, i = name, 2
    while name in used:
        name = f"{base}_{i}"
        i += 1
    used.add(name)
    return name


class _Toml:
    """Just enough TOML writing for a spec: tables, [[check]], strings, numbers, booleans, lists, inline
    tables; a comment beside a value says where it came from."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.checks = 0
        self.lowered: list[str] = []  # "NAME busbw x 0.513 (cv 0.162)": each threshold whose factor the spread lowered

    def factor(self, factor: float, cv: Any, what: str) -> float:
        """_factor, remembering a lowered one for the header (what --init says it wrote)."""
        f = _factor(factor, cv)
        if f < factor:
            self.lowered.append(f"{what} x {f:.3g} (cv {cv:.3g})")
        return f

    def comment(self, text: str) -> None:
        self.lines.append(f"# {text}")

    def table(self, name: str) -> None:
        self.lines += ["", f"[{name}]"]

    def check(self, name: str, kind: str) -> None:
        self.checks += 1
        self.lines += ["", "[[check]]", f"name = {_val(name)}", f"kind = {_val(kind)}"]

    def kv(self, key: str, value: Any, note: str | None = None) -> None:
        k = key if key.replace("_", "").isalnum() else _val(key)
        self.lines.append(f"{k} = {_val(value)}" + (f"    # {note}" if note else ""))

    def text(self) -> str:
        return "\n".join(self.lines).lstrip("\n") + "\n"


def _val(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        assert math.isfinite(v), v  # _sane() keeps NaN and inf out of a spec
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a valid TOML basic string
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_val(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_val(k) if not str(k).replace('_', '').isalnum() else k} = {_val(x)}"
                                for k, x in v.items()) + " }"
    raise AssertionError(f"cannot write {v!r} as TOML")
