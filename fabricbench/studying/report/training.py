"""The study report's training sections: memory per GPU per strategy (measured against the estimate), and
throughput per strategy per fabric."""

from __future__ import annotations


from fabricbench.reporting.analysis import byte_unit, fmt, fmt_ratio, slower
from fabricbench.reporting.document import Document
from fabricbench.results.schema import TrainResult
from fabricbench.studying import figures
from fabricbench.studying.config import StudyConfig
from fabricbench.studying.report.common import Figs, batch_of, gib, mib, question_summary, sps, throughputs
from fabricbench.training import repeats


def memory_section(doc: Document, c: StudyConfig, trains: list[TrainResult], estimate, figs: Figs) -> None:
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
        rows.append([st, r.status if r else "not run", mib(st_b), mib(act), mib(tot), mib(a), mib(rv),
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
            caption=f"per GPU, {c.world_size} rank(s), batch {batch_of(trains, c)} per rank, on fabric {base}")
    if c.device == "cpu":
        s.text("CPU ranks report no device memory: only the estimate is shown. On GPUs the measured peaks "
               "(torch.cuda.max_memory_allocated/reserved) stand beside it.")


# -- throughput -----------------------------------------------------------------------------------------------
def throughput_section(doc: Document, c: StudyConfig, trains: list[TrainResult], figs: Figs) -> None:
    s = doc.section("Throughput per strategy per fabric",
                    intro="samples/s = global batch / median step time (steps after the warm-up, each the "
                          "slowest rank's), per run; each (strategy, fabric) is the median over its runs in "
                          "fresh processes, with the run-to-run 95% interval. Whether one is faster is not read "
                          "from overlapping intervals: the comparisons below pair round k of one with round k "
                          "of the other (docs/comparisons.md). The communication columns come from the last "
                          "profiled run's trace (the study profiles its first --trace-rounds rounds).")
    th = throughputs(trains)
    profiled = {(r.strategy, r.fabric): comm for r in trains if (comm := r.reached("comm"))}
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
            comm = profiled.get((st, f)) or {}
            tl = comm.get("timeline") or {}
            b = figs_by.get((st, base))
            # one direction for every ratio: N× slower than on the first fabric (throughput: base / here)
            rel = fmt_ratio(slower(b.samples_per_s, fg.samples_per_s)) if (fg and b and b.samples_per_s) else None
            ci = f"{fmt(fg.ci95[0])}-{fmt(fg.ci95[1])}" if fg and fg.ci95 else "-"
            rows.append([st, f, r.status, fg.samples_per_s if fg else sps(r), ci, fg.runs if fg else 1,
                         fg.step_s * 1e3 if fg else None, rel, mib(comm.get("total_bytes_per_step")),
                         tl.get("exposed_fraction"), fg.gpu_busy_fraction if fg else r.reached("gpu_busy_fraction")])
    s.table(["strategy", "fabric", "status", "samples/s", "95% CI", "runs", "median step ms", f"N× slower than {base}",
             "comm MiB/step", "exposed comm", "GPU busy"], rows, status_col=2)
    comps = question_summary(trains, c)["comparisons"]
    if comps:
        s.table(["a", "b", "on", "a / b", "95% CI", "verdict", "rounds", "paired"],
                [[cm["a"], cm["b"], cm["fabric"] or f"{cm['strategy']} (fabrics)", cm["ratio"],
                  f"{cm['ci95'][0]:.4f}-{cm['ci95'][1]:.4f}" if cm["ci95"] else "-",
                  cm["verdict"] + (" (busy host)" if cm.get("busy_host") else ""), cm["rounds"],
                  "yes" if cm["paired"] else "no"] for cm in comps],
                caption=f"comparisons: throughput of a over b (a measured higher); faster: the interval lies above "
                        f"1; equivalent: inside 1 ± {c.margin:.0%}; 95% over every look of the sequential rule")
    notes = [f"{f.strategy} @ {f.fabric}: {f.host_bound}" for f in figs_by.values() if f.host_bound]
    msgs = notes + [f"{r.strategy} @ {r.fabric}: {r.status}: {r.message}" for r in trains if r.message]
    if msgs:
        s.bullets(msgs)
