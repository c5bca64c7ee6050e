"""The study's report: DIR/report.md and DIR/report.html (self-contained), rebuilt from results.jsonl alone.

    fabricbench report run/

Written for a person deciding where to run a job: the answer first ("In short"), then the evidence,
section by section, each with its figure and the numbers under it: the machine, busbw against size per
fabric, scaling inside and across NVLink islands, memory per GPU per strategy (measured against the
estimate), throughput per strategy per fabric, relate (predicted against observed slowdown), the
advice, and the exact commands to reproduce every number. Nothing here measures.
"""

from __future__ import annotations

import dataclasses
import shlex
import tempfile
from pathlib import Path
from typing import Any

import fabricbench
from fabricbench.errors import UsageError
from fabricbench.fabrics import get_fabric
from fabricbench.importing import beside
from fabricbench.relating.plot import plot_relate
from fabricbench.report.analysis import byte_unit, fmt, fmt_ratio, slower
from fabricbench.report.document import Document, Section
from fabricbench.report.plot import busbw_vs_count
from fabricbench.results.schema import CollectiveResult, TrainResult
from fabricbench.results.status import Status
from fabricbench.sizes import format_size, gib
from fabricbench.study import figures, records as study_records
from fabricbench.study.config import StudyConfig
from fabricbench.study.kinds import unit_of
from fabricbench.topology.model import Topology
from fabricbench.topology.ranking import rank_placements
from fabricbench.training import repeats


def _mib(b: Any) -> float | None:
    return b / 2**20 if isinstance(b, (int, float)) else None


def _size(b: int) -> str:
    return format_size(int(b))


class _Figs:
    """PNG files in a temporary folder; Document embeds their bytes."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="fabricbench-report-")
        self.n = 0

    def path(self, stem: str) -> str:
        self.n += 1
        return str(Path(self._tmp.name) / f"{self.n:02d}-{stem}.png")

    def close(self) -> None:
        self._tmp.cleanup()


def study_command(c: StudyConfig) -> str:
    """The one command that reruns this study (every setting spelled out; a custom fabric's values as ***)."""
    argv = ["fabricbench", "study"]
    argv += ["--device", "cpu", "--nprocs", str(c.nprocs)] if c.device == "cpu" else ["--gpus", ",".join(map(str, c.gpus))]
    argv += ["--fabrics", ",".join(c.fabrics_shown), "--strategies", ",".join(c.strategies)]
    argv += ["--model", c.model] if c.model else ["--model-config", str(c.model_config)]
    argv += ["--steps", str(c.steps), "--warmup-steps", str(c.warmup_steps)]
    if c.batch_size is not None:  # None: the study picks it again
        argv += ["--batch-size", str(c.batch_size)]
    if c.repeats is not None:
        argv += ["--repeats", str(c.repeats)]
    argv += c.shape_args
    if c.precision:
        argv += ["--precision", c.precision]
    if c.sizes:
        argv += ["--sizes", c.sizes]
    argv += ["--iters", str(c.iters), "--warmup", str(c.warmup), "--out", c.out]
    return shlex.join(argv)


def wrap(cmd: str, width: int = 100) -> str:
    """A long shell command over several lines (backslash continuations), options kept with their values."""
    words = cmd.split(" ")
    lines, cur = [], ""
    for i, w in enumerate(words):
        joined = f"{cur} {w}" if cur else w
        # break before an option, never between an option and its value
        if cur and len(joined) > width and w.startswith("-"):
            lines.append(cur + " \\")
            cur = "    " + w
        else:
            cur = joined
    lines.append(cur)
    return "\n".join(lines)


def build(out_dir: str | Path) -> Document:
    sr = study_records.load(out_dir)
    plan = (sr.plan or {}).get("study")
    if not isinstance(plan, dict) or not isinstance(plan.get("config"), dict):
        raise UsageError(f"{out_dir}: its {study_records.RESULTS} holds no readable study plan record; "
                         f"is it a `fabricbench study --out` folder?")
    try:
        stored = StudyConfig.from_dict(plan["config"])  # fabrics masked (StudyConfig.to_dict)
    except (TypeError, ValueError) as e:
        raise UsageError(f"{out_dir}: the study plan record is damaged ({str(e).splitlines()[0][:120]})") from None
    # records and units name a fabric by its name ("sec", never "sec:MY_TOKEN=..."): so does the report,
    # except in the command that reruns the study
    config = dataclasses.replace(stored, fabrics=stored.fabric_names)
    figs = _Figs()
    try:
        return _build(sr, config, figs, command=study_command(stored))
    finally:
        figs.close()


def summary(out_dir: str | Path) -> dict[str, Any]:
    """The study's machine-readable summary (`fabricbench report DIR --json`, and its "summary" record):
    per fabric the strategies ranked with ties (overlapping 95% intervals), each slowdown against the
    first fabric with its propagated interval, each (strategy, fabric) figure with its run-to-run
    interval, host-bound notes, the batch the study picked, and relate's predictions with intervals."""
    sr = study_records.load(out_dir)
    stored = StudyConfig.from_dict(sr.plan["study"]["config"])
    config = dataclasses.replace(stored, fabrics=stored.fabric_names)  # as the records name them
    trains = sr.typed(TrainResult)
    out = repeats.summary(trains, fabrics=list(config.fabrics), reference=config.fabrics[0])
    batch = next(iter(sr.of_kind("batch")[-1:]), None)
    out["batch"] = {k: batch.get(k) for k in ("chosen", "why", "curve", "rule")} if batch else \
        {"chosen": config.batch_size, "why": "--batch-size"}
    rel = _relate(config, trains, _unit_records(sr.typed(CollectiveResult), "sweep"))
    out["relate"] = [{"strategy": r.strategy, "fabric": r.fabric, "predicted_slowdown": r.predicted_slowdown,
                      "predicted_ci95": getattr(r, "predicted_slowdown_ci95", None),
                      "observed_slowdown": r.observed_slowdown,
                      "observed_ci95": getattr(r, "observed_slowdown_ci95", None)}
                     for r in getattr(rel, "rows", [])]
    return out


def write_report(out_dir: str | Path) -> tuple[Path, Path]:
    return build(out_dir).write(out_dir, stem="report")


# -- the document ---------------------------------------------------------------------------------------------
def _build(sr: study_records.StudyRecords, c: StudyConfig, figs: _Figs, *, command: str) -> Document:
    machine = next(iter(sr.of_kind("machine")), None)
    trains = sr.typed(TrainResult)
    collectives = sr.typed(CollectiveResult)
    colls = _unit_records(collectives, "sweep")
    scaling = _unit_records(collectives, "scaling")
    estimate = next(iter(sr.of_kind("estimate")), None)
    relate = _relate(c, trains, colls)
    where = (f"{c.nprocs} CPU ranks (gloo)" if c.device == "cpu" else
             f"{len(c.gpus)} × {_gpu_name(machine)} (GPUs {','.join(map(str, c.gpus))})")
    host = sr.plan.get("host", "?")
    started = (sr.plans[0].get("timestamp") or "")[:19].replace("T", " ")
    doc = Document(f"fabricbench study: {c.model_label} on {where}",
                   subtitle=f"{host}, started {started} UTC; fabrics {', '.join(c.fabrics_shown)}; "
                            f"strategies {', '.join(c.strategies)}")
    advice = _advice(sr, c, machine, trains)
    _in_short(doc, sr, c, trains, colls, advice)
    _machine(doc, sr, c, machine, colls, trains, figs)
    # `fabricbench import`ed results appended to results.jsonl: lines and columns of their own, beside
    # (beside labels the dicts: "nvswitch (nccl-tests)"; that label is the fabric they are shown under)
    groups = beside.collective_groups([r for r in sr.of_kind("collective") if beside.is_imported(r)])
    imported = [CollectiveResult.from_record(dict(r, fabric=name)) for name, rs in groups.items() for r in rs]
    _busbw(doc, c, colls, figs, imported=[r for r in imported if not r.inplace])
    _scaling(doc, c, scaling, machine, figs)
    _memory(doc, c, trains, estimate, figs)
    _throughput(doc, c, trains, figs)
    _relate_section(doc, relate, figs)
    _advice_section(doc, c, advice, trains, machine, collectives)
    _reproduce(doc, sr, c, command)
    return doc


def _unit_records(colls: list[CollectiveResult], kind: str) -> list[CollectiveResult]:
    """The collectives a study unit of this kind wrote ("sweep", "scaling"); imported ones name no unit."""
    return [r for r in colls if (unit_of(r) or "").startswith(kind)]


def _gpu_name(machine: dict[str, Any] | None) -> str:
    gpus = (machine or {}).get("gpus") or []
    return gpus[0]["name"] if gpus else "GPU"


def _relate(c: StudyConfig, trains: list[TrainResult], colls: list[CollectiveResult]) -> Any:
    """relate's result from the records (recomputed, so a rebuilt report agrees with its inputs), or None."""
    if c.world_size < 2:
        return f"{c.world_size} rank: no collective ran, so there is no slowdown to explain"
    if len(c.fabrics) < 2:
        return "one fabric: relate explains the slowdown between fabrics (name two with --fabrics)"
    if not trains or not colls:
        return None
    try:
        return fabricbench.relate(trains + colls, reference=c.fabrics[0])
    except Exception as e:  # no relation possible (e.g. nothing on the reference): said in the section
        return str(e)


def _advice(sr, c: StudyConfig, machine, trains: list[TrainResult]) -> Any:
    if c.device != "cuda" or not (machine or {}).get("topology"):
        return None
    try:
        return fabricbench.advise(model=c.model, model_config=c.model_config, num_gpus=len(c.gpus), gpus=list(c.gpus)
                                  if len(c.gpus) > 1 else None, results=sr.records, batch_size=_batch(trains, c),
                                  seq_len=c.seq_len, image_size=c.image_size, strategies=list(c.strategies),
                                  fabric=c.fabrics[0])
    except Exception as e:  # advice is derived; a failure is reported in its section, never fatal
        return str(e)


def _batch(trains: list[TrainResult], c: StudyConfig) -> Any:
    """The per-GPU batch the train runs used (the study's, or the one it picked)."""
    return next((r.batch_size for r in trains if r.batch_size), c.batch_size)


def _throughputs(trains: list[TrainResult]) -> dict[tuple[str, str], TrainResult]:
    return {(r.strategy, r.fabric): r for r in trains}


def _sps(r: TrainResult | None) -> float | None:
    return r.samples_per_s if r else None


def _in_short(doc: Document, sr, c: StudyConfig, trains: list[TrainResult], colls: list[CollectiveResult],
              advice) -> None:
    s = doc.section("In short", intro="What this study measured on this machine, and what to do about it. "
                                      "Every figure below comes with its numbers and the command that made it.")
    items = []
    summ = repeats.summary(trains, fabrics=list(c.fabrics), reference=c.fabrics[0])
    figs_by = {(f["strategy"], f["fabric"]): f for f in summ["figures"]}
    for f, groups in summ["rankings"].items():
        if not groups:
            continue
        best = figs_by[(groups[0][0], f)]
        ci = best.get("ci95")
        shown = f"{fmt(best['samples_per_s'])} samples/s" + (f" (95% CI {fmt(ci[0])}-{fmt(ci[1])}, {best['runs']} run(s))"
                                                             if ci else f" ({best['runs']} run, no interval)")
        lead = " ≈ ".join(f"**{x}**" for x in groups[0])
        text = (f"on **{f}** the fastest: {lead}, {shown}" if len(groups[0]) == 1 else
                f"on **{f}** {lead} are tied first (within noise), {shown} for {groups[0][0]}")
        if len(groups) > 1:
            text += "; then " + repeats.ranking_text(groups[1:])
        items.append(text)
    for sl in summ["slowdowns"]:
        items.append(repeats.slowdown_text(sl))
    for f in c.fabrics[1:]:
        bw = _busbw_ratio(colls, c.fabrics[0], f)
        if bw:
            items.append(f"**{f}** against {c.fabrics[0]}: all-reduce busbw at the largest size "
                         + f"{fmt_ratio(1 / bw)} slower")  # one direction for every ratio: N× slower
    for hb in summ["host_bound"]:
        items.append(f"{hb['strategy']} @ {hb['fabric']}: {hb['note']}")
    picked = next(iter(sr.of_kind("batch")[-1:]), None)
    if picked:
        items.append(f"batch {picked.get('chosen')} per GPU, picked by the study ({picked.get('why')})")
    if advice is not None and not isinstance(advice, str):
        items.append(f"advice: run **{advice.strategy}** on GPUs **{','.join(map(str, advice.placement))}** "
                     f"({advice.reasons[0]})")
    counts: dict[str, int] = {}
    for u in sr.units.values():
        counts[u["status"]] = counts.get(u["status"], 0) + 1
    items.append("units: " + ", ".join(f"{n} {st}" for st, n in sorted(counts.items())) +
                 " (see “Reproduce” for each one's status and command)")
    s.bullets(items)


def _busbw_ratio(colls: list[CollectiveResult], base: str, f: str) -> float | None:
    """busbw on f / on base for all_reduce at the largest size both have (algbw when n = 1)."""
    def largest(fab):
        return {r.bytes: r for r in colls if r.fabric == fab and r.op == "all_reduce" and r.status == Status.OK}
    a, b = largest(base), largest(f)
    common = sorted(set(a) & set(b))
    if not common:
        return None
    x, y = a[common[-1]], b[common[-1]]
    x, y = (x.busbw_gbps, y.busbw_gbps) if (x.nranks or 0) > 1 else (x.algbw_gbps, y.algbw_gbps)
    return y / x if x and y else None


# -- the machine ----------------------------------------------------------------------------------------------
def _machine(doc: Document, sr, c: StudyConfig, machine, colls: list[CollectiveResult], trains: list[TrainResult],
             figs: _Figs) -> None:
    s = doc.section("The machine", intro="Where the numbers come from: the processors, the wiring between the "
                                         "GPUs, the library versions, and each fabric with the transport it "
                                         "really used.")
    if machine is None:
        s.text("The machine unit did not finish; its facts are missing (see “Reproduce”).")
    else:
        v = machine.get("versions") or {}
        items = [f"host `{machine.get('host')}`, {machine.get('cpu_count')} CPU cores ({machine.get('cpu_model')}), "
                 f"{machine.get('platform')}"]
        if machine.get("gpus"):
            kinds: dict[tuple, list[int]] = {}
            for g in machine["gpus"]:  # identical GPUs on one line
                kinds.setdefault((g["name"], g["memory_total_bytes"], g.get("capability")), []).append(g["ordinal"])
            for (name, mem, cap), ords in kinds.items():
                items.append(f"{len(ords)} × {name} (GPU {','.join(map(str, ords))}), {mem / 1e9:.1f} GB each, "
                             f"compute capability {cap}")
        else:
            items.append(f"no GPU: {c.nprocs} gloo ranks on this host's CPUs (the CPU fabric lab)")
        names = {"cuda_driver": "NVIDIA driver", "torch_cuda": "CUDA (torch)", "nccl_torch": "NCCL (torch)",
                 "torch": "torch", "accelerate": "accelerate", "transformers": "transformers",
                 "deepspeed": "DeepSpeed", "fabricbench": "fabricbench"}
        items.append(", ".join(f"{label} {v[k]}" for k, label in names.items() if v.get(k)))
        s.bullets(items)
        topo = machine.get("topology")
        if topo and len(topo.get("links") or []) == 1:
            s.text("One GPU: no GPU-to-GPU link, no NVLink island boundary; collectives have no peer (n = 1).")
        elif topo and topo.get("links"):
            labels = [f"GPU{g['index']}" for g in topo["gpus"]]
            s.table([""] + labels, [[lab] + list(row) for lab, row in zip(labels, topo["links"])],
                    caption="Link between every pair of GPUs (nvidia-smi topo -m: NV# = # bonded NVLinks; "
                            "PIX < PXB < PHB < NODE < SYS = more PCIe hops)")
            p = figs.path("topology")
            figures.link_matrix(labels, topo["links"], topo.get("islands") or [], p)
            s.figure(p, "The topology matrix; NVLink islands in the title. A job inside one island runs at "
                        "NVLink speed; one that spans islands runs at the speed of its slowest hop.")
            s.text("NVLink islands: " + ", ".join("[" + ",".join(map(str, i)) + "]" for i in topo.get("islands") or [])
                   + ("; every pair alike (uniform)." if topo.get("uniform") else "."))
        elif c.device == "cuda":
            s.text("No topology could be read (NVML and nvidia-smi did not answer).")
    rows, variables = [], []
    for f in c.fabrics:
        mine = [r for r in colls if r.fabric == f]
        # the fabric's facts, which every study record carries (study/runner._facts), from a train run where no
        # sweep finished; the transport only from collectives (NCCL's log is read for those alone)
        r0 = next(iter(mine or [r for r in trains if r.fabric == f]), None)
        transports = sorted({r.transport for r in mine if r.transport})
        mismatch = sorted({r.transport_mismatch for r in mine if r.transport_mismatch})
        env = _fact(r0, "fabric_env")
        if env is None:  # records from before fabric facts were recorded: the fabric's own definition
            try:
                env = get_fabric(f).variables
            except Exception:
                env = {}
        rate = _fact(r0, "shaped_rate_bps")
        units = [u for u in sr.units.values() if u.get("fabric") == f and u.get("unit_kind") in ("sweep", "train")]
        status = Status.OK if units and all(u["status"] == Status.OK for u in units) else \
            (sorted({u["status"] for u in units})[0] if units else "not run")
        used = ", ".join(transports) or ("gloo over loopback" if c.device == "cpu" else
                                         "none (one rank: no peer)" if c.world_size < 2 else "not recorded")
        if mismatch:
            used += " — MISMATCH: " + "; ".join(mismatch)
        rows.append([f, f"{rate / 1e9:g} Gbit/s (tc on the loopback of a namespace)" if rate else "-", used, status])
        variables.append(f"**{f}** sets " + (", ".join(f"`{k}={v}`" for k, v in env.items()) if env else "nothing")
                         + (f"; ran in network namespace `{r0.netns}`" if r0 and r0.netns else ""))
    s.table(["fabric", "shaping", "transport really used", "units"], rows, status_col=3,
            caption="The fabrics, and what the collectives really ran over")
    s.bullets(variables)


def _fact(r: CollectiveResult | TrainResult | None, name: str) -> Any:
    """A fabric fact of a record (fabric_env, shaped_rate_bps), None where it has none or it never ran."""
    if isinstance(r, TrainResult):
        return r.reached(name)
    return getattr(r, name) if r is not None else None


# -- busbw ----------------------------------------------------------------------------------------------------
def _metric(colls: list[CollectiveResult]) -> tuple[str, str | None]:
    """The CollectiveResult field to plot (busbw_gbps, or algbw_gbps when every record is one rank) and why."""
    if colls and all((r.nranks or 0) <= 1 for r in colls):
        return "algbw_gbps", "one rank: the busbw factor 2(n−1)/n is 0, so algbw (S / t) is shown instead"
    return "busbw_gbps", None


def _busbw(doc: Document, c: StudyConfig, colls: list[CollectiveResult], figs: _Figs,
           imported: list[CollectiveResult] = ()) -> None:
    s = doc.section("Bus bandwidth against size, per fabric",
                    intro="busbw = S / t × the op's factor (all-reduce 2(n−1)/n; all-gather, reduce-scatter "
                          "(n−1)/n), nccl-tests' definition: comparable across GPU counts. Sizes cover what the "
                          "strategies sent (from their traces) or a default grid.")
    ok = [r for r in colls if r.status == Status.OK]
    if not ok:
        s.text("No sweep finished; nothing to show (see “Reproduce”).")
        return
    ok += [r for r in imported if r.status == Status.OK]
    metric, note = _metric(ok)
    dtypes = sorted({r.dtype for r in ok})
    series: dict[str, dict[str, list]] = {}
    for r in ok:
        label = r.fabric + (f" ({r.dtype})" if len(dtypes) > 1 else "")
        series.setdefault(r.op, {}).setdefault(label, []).append((r.bytes, getattr(r, metric)))
    p = figs.path("busbw")
    figures.busbw_grid(series, p, title=f"{metric.replace('_gbps', '')} against size, per fabric (log-log)",
                       ylabel=f"{metric.replace('_gbps', '')} (GB/s)")
    s.figure(p, f"{metric.replace('_gbps', '')} against message size, one panel per collective, one line per fabric"
                + (f" ({note})" if note else ""))
    fabs = [f for f in c.fabrics if any(r.fabric == f for r in ok)]
    fabs += list(dict.fromkeys(r.fabric for r in imported if r in ok))
    # one small table per op (rows: sizes; columns: fabrics, then each one's ratio to the first): the
    # numbers under each panel of the figure, narrow enough to read without scrolling
    val = {(r.op, r.dtype, r.bytes, r.fabric): getattr(r, metric) for r in ok}
    short = metric.replace("_gbps", "")
    for op in dict.fromkeys(r.op for r in ok):
        rows = []
        for dt, size in sorted({(r.dtype, r.bytes) for r in ok if r.op == op}):
            vs = [val.get((op, dt, size, f)) for f in fabs]
            rows.append([_size(size), dt, *vs, *[fmt_ratio(slower(vs[0], v)) for v in vs[1:]]])
        s.table(["size", "dtype", *[f"{f} GB/s" for f in fabs], *[f"{f} N× slower than {fabs[0]}" for f in fabs[1:]]], rows,
                caption=f"{op}: {short} per size and fabric (median over the timed iterations)")
    if note:
        s.text(note + ".")


# -- scaling --------------------------------------------------------------------------------------------------
def _scaling(doc: Document, c: StudyConfig, scaling: list[CollectiveResult], machine, figs: _Figs) -> None:
    s = doc.section("Scaling inside and across NVLink islands",
                    intro="busbw of the largest all-reduce for GPU sets of each count, inside one island and "
                          "across islands: what placement does to a job.")
    ok = [r for r in scaling if r.status == Status.OK]
    if not ok:
        if c.device == "cpu":
            why = "CPU ranks all share one host and one loopback: there are no islands to compare."
        elif len(c.gpus) < 3:
            why = f"{len(c.gpus)} GPU(s): no set of several GPUs to place differently."
        elif (machine or {}).get("topology", {}) and (machine["topology"].get("uniform")):
            why = "every GPU pair has the same link (uniform, e.g. NVSwitch): any set of a given size is alike."
        else:
            why = "the scaling unit did not finish (see “Reproduce”)."
        s.text("Not run: " + why)
        return
    series: dict[str, dict[str, list]] = {}
    rows = []
    # extra.count, .placement, .slowest_link: what the scaling command (topology/placement.py) tags each run with
    for r in sorted(ok, key=lambda r: (r.extra.get("count", 0), r.extra.get("placement", ""))):
        ex = r.extra
        series.setdefault(f"all_reduce {_size(r.bytes)}", {}).setdefault(ex.get("placement", "?"), []).append(
            (ex.get("count", r.nranks), r.busbw_gbps))
        rows.append([ex.get("count", r.nranks), ex.get("placement"), ",".join(map(str, ex.get("placement_gpus") or r.gpus or [])),
                     ex.get("slowest_link"), _size(r.bytes), r.busbw_gbps, r.transport])
    p = figs.path("scaling")

    busbw_vs_count(series, p, title="busbw against GPU count, per placement")
    s.figure(p, "busbw of the largest all-reduce against GPU count: inside one island and across islands")
    s.table(["GPUs", "placement", "set", "slowest hop", "size", "busbw GB/s", "transport"], rows)


# -- memory ---------------------------------------------------------------------------------------------------
def _memory(doc: Document, c: StudyConfig, trains: list[TrainResult], estimate, figs: _Figs) -> None:
    s = doc.section("Memory per GPU per strategy: measured against estimated",
                    intro="Each step down the dial DDP → ZeRO-1 → ZeRO-2 → ZeRO-3 → FSDP shards more of the model "
                          "states; activations are not sharded, so the staircase never reaches 1/n. Estimate: "
                          "the framework recipe of fabricbench estimate (model states) plus 34·s·b·h·L bytes of "
                          "activations.")
    base = c.fabrics[0]
    by = {r.strategy: r for r in trains if r.fabric == base}
    est = (estimate or {}).get("strategies") or {}
    act = (estimate or {}).get("activation_bytes")
    rows, states, totals, alloc, reserved = [], [], [], [], []
    for st in c.strategies:
        r = by.get(st)
        run_est = (r.estimate if r else None) or {}  # the estimate record's, else the one the run carried
        e = est.get(st) or run_est
        st_b = e.get("total_bytes")
        tot = (st_b + act) if (st_b is not None and act is not None) else run_est.get("with_activations_bytes")
        mem = (r.reached("memory") if r else None) or {}
        a, rv = mem.get("max_allocated_bytes"), mem.get("max_reserved_bytes")
        states.append(gib(st_b)); totals.append(gib(tot)); alloc.append(gib(a)); reserved.append(gib(rv))
        rows.append([st, r.status if r else "not run", _mib(st_b), _mib(act), _mib(tot), _mib(a), _mib(rv),
                     (a / tot) if (a and tot) else None])
    p = figs.path("memory")
    series = {"estimate: model states": states, "estimate: + activations": totals}
    if any(x is not None for x in alloc):
        series["measured peak allocated"] = alloc
        series["measured peak reserved"] = reserved
    top = max((v for vs in series.values() for v in vs if v is not None), default=0.0)  # GiB
    unit, divisor = byte_unit(top * 2**30)
    series = {k: [None if v is None else v * 2**30 / divisor for v in vs] for k, vs in series.items()}
    figures.grouped_bars(list(c.strategies), series, p, title=f"memory per GPU ({base})", ylabel=unit)
    s.figure(p, "memory per GPU per strategy: the estimate's staircase, and the measured peaks where a GPU "
                "reports them")
    s.table(["strategy", "status", "states est. MiB", "activations est. MiB", "total est. MiB",
             "peak allocated MiB", "peak reserved MiB", "allocated / estimate"], rows, status_col=1,
            caption=f"per GPU, {c.world_size} rank(s), batch {_batch(trains, c)} per rank, on fabric {base}")
    if c.device == "cpu":
        s.text("CPU ranks report no device memory: only the estimate is shown. On GPUs the measured peaks "
               "(torch.cuda.max_memory_allocated/reserved) stand beside it.")


# -- throughput -----------------------------------------------------------------------------------------------
def _throughput(doc: Document, c: StudyConfig, trains: list[TrainResult], figs: _Figs) -> None:
    s = doc.section("Throughput per strategy per fabric",
                    intro="samples/s = global batch / median step time (steps after the warm-up, each the "
                          "slowest rank's), per run; each (strategy, fabric) is the median over its runs in "
                          "fresh processes, with the run-to-run 95% interval. Overlapping intervals are a tie. "
                          "The communication columns come from the last run's trace.")
    th = _throughputs(trains)
    if not th:
        s.text("No train unit finished (see “Reproduce”).")
        return
    base = c.fabrics[0]
    figs_by = {(f.strategy, f.fabric): f for f in repeats.figures(trains)}
    p = figs.path("throughput")
    figures.grouped_bars(list(c.strategies), {f: [getattr(figs_by.get((st, f)), "samples_per_s", None)
                                                  for st in c.strategies] for f in c.fabrics},
                         p, title="samples/s per strategy, per fabric (median over runs)", ylabel="samples/s")
    s.figure(p, "throughput per strategy, one bar per fabric (higher is better)")
    rows = []
    for st in c.strategies:
        for f in c.fabrics:
            r = th.get((st, f))
            fg = figs_by.get((st, f))
            if r is None:
                rows.append([st, f, "not run", None, None, None, None, None, None, None, None])
                continue
            comm = r.reached("comm") or {}
            tl = comm.get("timeline") or {}
            b = figs_by.get((st, base))
            # one direction for every ratio: N× slower than on the first fabric (throughput: base / here)
            rel = fmt_ratio(slower(b.samples_per_s, fg.samples_per_s)) if (fg and b and b.samples_per_s) else None
            ci = f"{fmt(fg.ci95[0])}-{fmt(fg.ci95[1])}" if fg and fg.ci95 else "-"
            rows.append([st, f, r.status, fg.samples_per_s if fg else _sps(r), ci, fg.runs if fg else 1,
                         fg.step_s * 1e3 if fg else None, rel, _mib(comm.get("total_bytes_per_step")),
                         tl.get("exposed_fraction"), fg.gpu_busy_fraction if fg else r.reached("gpu_busy_fraction")])
    s.table(["strategy", "fabric", "status", "samples/s", "95% CI", "runs", "median step ms", f"N× slower than {base}",
             "comm MiB/step", "exposed comm", "GPU busy"], rows, status_col=2)
    notes = [f"{f.strategy} @ {f.fabric}: {f.host_bound}" for f in figs_by.values() if f.host_bound]
    msgs = notes + [f"{r.strategy} @ {r.fabric}: {r.status}: {r.message}" for r in trains if r.message]
    if msgs:
        s.bullets(msgs)


# -- relate ---------------------------------------------------------------------------------------------------
def _relate_section(doc: Document, relate, figs: _Figs) -> None:
    s = doc.section("Bandwidth against slowdown (relate)",
                    intro="Does a slower busbw explain a slower step? The model is calibrated on the "
                          "reference fabric alone and predicts every other fabric from its sweep and the "
                          "strategy's trace.")
    if relate is None:
        s.text("Not computed: it needs train runs and sweeps (see “Reproduce”).")
        return
    if isinstance(relate, str):
        s.text(f"Not computed: {relate}")
        return
    if relate.rows:
        p = figs.path("relate")

        plot_relate(relate, p)
        s.figure(p, "step N× slower against busbw N× slower at the sizes each strategy sends: filled observed, "
                    "hollow predicted; y = x is a step made only of communication")
    s.code(_split_top(relate.formula))
    rows = [[r.strategy, r.fabric, fmt_ratio(1 / r.busbw_ratio) if r.busbw_ratio else None, r.observed_step_s * 1e3 if r.observed_step_s else None,
             r.predicted_step_s * 1e3 if r.predicted_step_s else None, fmt_ratio(r.observed_slowdown),
             fmt_ratio(r.predicted_slowdown),
             r.residual, r.exposed_fraction, ", ".join(r.flags) or "-"]
            for r in relate.rows]
    if rows:
        s.table(["strategy", "fabric", "busbw N× slower", "obs. step ms", "pred. step ms", "obs. step N× slower",
                 "pred. step N× slower", "residual", "e", "flags"], rows,
                caption=f"reference fabric: {relate.reference}; busbw N× slower = busbw on the reference ÷ here "
                        f"at the sizes the strategy sends; step N× slower = step here ÷ on the reference; "
                        f"residual = predicted ÷ observed − 1")
    else:
        s.text(f"No strategy could be related (reference fabric {relate.reference}):")
    if relate.problems:
        s.bullets(relate.problems)


def _split_top(text: str) -> str:
    """One line per top-level ', '-separated part (commas inside parentheses stay)."""
    parts, depth, cur = [], 0, ""
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0 and text[i + 1:i + 2] == " ":
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    parts.append(cur)
    return ",\n".join(p.strip() for p in parts)


# -- advice ---------------------------------------------------------------------------------------------------
def _smaller_jobs(s: Section, c: StudyConfig, machine, collectives: list[CollectiveResult]) -> None:
    """For each smaller job size: the best GPU set against the worst kind, by measured busbw where the
    scaling unit measured that shape, else from link types ("pin a 4-GPU job to 0-3: 9× the busbw of 0,1,4,5")."""
    topo = (machine or {}).get("topology")
    if not topo or len(c.gpus) < 3 or topo.get("uniform"):
        return

    t = Topology.from_dict(topo)
    pool = [g for g in c.gpus if g in t.indices]
    rows = []
    for k in sorted({2, 4, 8, 16} & set(range(2, len(pool)))):
        ranked = rank_placements(t, pool, k, collectives, fabric=c.fabrics[0])
        best, worst = ranked[0], ranked[-1]
        rows.append([k, ",".join(map(str, best.gpus)), best.label, best.busbw_gbps, best.source,
                     ",".join(map(str, worst.gpus)), worst.busbw_gbps,
                     (best.busbw_gbps / worst.busbw_gbps) if (best.busbw_gbps and worst.busbw_gbps) else None])
    if rows:
        s.table(["GPUs", "pin to", "placement", "busbw GB/s", "source", "not", "busbw GB/s", "×"], rows,
                caption="smaller jobs on this machine: the best GPU set against the worst kind of set")


def _advice_section(doc: Document, c: StudyConfig, advice, trains: list[TrainResult], machine=None,
                    collectives: list[CollectiveResult] = ()) -> None:
    s = doc.section("Advice", intro="Where to run this job and with which strategy, from the measurements above "
                                    "(fabricbench advise gives the same for other GPU counts and saved "
                                    "topologies).")
    if isinstance(advice, str):
        s.text(f"No placement advice: {advice}")
    elif advice is not None:
        s.text(f"**Recommended: {advice.strategy} on GPUs {','.join(map(str, advice.placement))}.**")
        s.bullets(advice.reasons)
        s.table(["GPUs", "placement", "slowest hop", "busbw GB/s", "source", "same as"],
                [[",".join(map(str, p.gpus)), p.label, p.slowest_link, p.busbw_gbps, p.source,
                  "; ".join(",".join(map(str, e)) for e in p.equivalent[:4]) + (" …" if len(p.equivalent) > 4 else "")]
                 for p in advice.placements[:8]], caption="GPU sets, best busbw first")
        s.table(["strategy", "rank", "memory", "need GiB", "margin GiB", "comm ms/step", "step ms", "step time from"],
                [[a.strategy, a.rank, a.memory.verdict, gib(a.memory.need_bytes), gib(a.memory.margin_bytes),
                  a.time.comm_time_s * 1e3 if a.time.comm_time_s is not None else None,
                  a.time.step_time_s * 1e3 if a.time.step_time_s is not None else None,
                  a.time.time_source] for a in advice.strategies],
                caption=f"strategies on the recommended set ({advice.time_source})", status_col=2)
        notes = [f"{a.strategy}: {a.note}" for a in advice.strategies if a.note]
        if notes:
            s.bullets(notes)
    _smaller_jobs(s, c, machine, list(collectives))
    th = _throughputs(trains)
    rows = []
    for f in c.fabrics:
        ok = sorted(((st, _sps(th.get((st, f)))) for st in c.strategies if _sps(th.get((st, f)))), key=lambda x: -x[1])
        if ok:
            rows.append([f, ok[0][0], ok[0][1], ok[1][0] if len(ok) > 1 else "-",
                         (ok[1][1] / ok[0][1]) if len(ok) > 1 else None])
    if rows:
        s.table(["fabric", "fastest strategy", "samples/s", "runner-up", "runner-up / fastest"], rows,
                caption="measured: the fastest strategy on each fabric")
        if c.device == "cpu":
            s.text("On a CPU lab the choice is the strategy per fabric: the slower the wire, the more a strategy "
                   "that sends less (or hides its communication behind compute) gains. Differences within "
                   "about ±15% are noise on 2 shared cores.")


# -- reproduce ------------------------------------------------------------------------------------------------
def _reproduce(doc: Document, sr, c: StudyConfig, command: str) -> None:
    s = doc.section("Reproduce", intro="The command that ran this study, the one that rebuilds this report, and "
                                       "every unit's own command (each ran in its own process, under its fabric).")
    s.code(wrap(command) + "\n" + f"fabricbench study --out {shlex.quote(c.out)} --resume   "
           f"# reruns only units not recorded ok\nfabricbench report {shlex.quote(c.out)}   # this report, measuring nothing")
    rows, cmds = [], []
    plan_units = [u["name"] for u in sr.plan["study"]["units"]]
    for name in plan_units:
        u = sr.units.get(name)
        if u is None:
            rows.append([name, "not run", None, "-"])
            continue
        rows.append([name, u["status"], u.get("duration_s"), (u.get("message") or "-")[:160]])
        for cmd in u.get("commands") or []:
            prefix = f"ip netns exec <ns shaped {u['fabric_facts'].get('shaped_rate_bps') / 1e9:g} Gbit/s> " \
                if (u.get("fabric_facts") or {}).get("netns") else ""
            cmds.append(f"# {name}\n" + wrap(prefix + cmd))
    s.table(["unit", "status", "seconds", "message"], rows, status_col=1)
    if cmds:
        s.code("\n".join(cmds))
