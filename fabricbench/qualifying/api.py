"""The library face of qualification.

    import fabricbench
    res = fabricbench.qualify(fabricbench.QualifyConfig(spec="builtin:h200-sxm-8", out="q/"))
    plan = fabricbench.qualify_plan(fabricbench.QualifyConfig(spec="builtin:h200-sxm-8", level=1))  # no run
    for v in res.verdicts:
        print(v.check, v.status, v.measured, v.threshold, v.headroom)
    res.exit_code          # by the worst severity: 0 pass/info, 1 critical, 3 unknown, 4 warning;
                           # 5 when every check was waived (res.outcome == "nothing measured")

    from fabricbench.qualifying.api import init_spec
    text = init_spec("q/results.jsonl", factor=0.9)             # a spec from a known-good node
    f = fabricbench.fleet(fabricbench.FleetConfig(inputs=("node1/", "node2/", "node3/"), out="fleet/"))

The configs (QualifyConfig, FleetConfig) are config.py's. Outputs under `out`: results.jsonl (every record, as
measured), verdicts.json, junit.xml, report.md and report.html, spec.toml (the spec as run); `prometheus=FILE`:
a node_exporter textfile (prometheus.py).
"""

from __future__ import annotations

import os
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from fabricbench.cluster import env as cluster_env
from fabricbench.errors import FabricbenchError, UsageError, expect_config
from fabricbench.fabrics.env import mask_known
from fabricbench.jobs import store
from fabricbench.files import dumps, refuse_collisions, write_text_atomic
from fabricbench.outputs import folder
from fabricbench.measuring.runner import new_run_id
from fabricbench.progress import Progress
from fabricbench.qualifying import busy
from fabricbench.qualifying.checks import CHECKS
from fabricbench.qualifying.checks.base import Check, retries_of
from fabricbench.qualifying.codes import CODES, action_for
from fabricbench.qualifying.config import FleetConfig, QualifyConfig
from fabricbench.qualifying.context import Context
from fabricbench.qualifying.dryrun import DryRun, dry_run as plan_dry_run, select
from fabricbench.qualifying.figures import compare, figures
from fabricbench.qualifying.fleet import run_fleet
from fabricbench.qualifying.init_spec import spec_from_results
from fabricbench.qualifying.inputs import read_all
from fabricbench.qualifying.junit import to_xml
from fabricbench.qualifying.offline import OfflineContext
from fabricbench.qualifying.prometheus import TextFile, check_path as check_prometheus_path
from fabricbench.qualifying.report import write_report
from fabricbench.qualifying.result import FleetResult, QualifyResult
from fabricbench.qualifying.spec import Spec, SpecError, parse_spec
from fabricbench.qualifying.verdict import (Policy, Verdict, attempt_record, combine, error,
                                            NO_GPU, flaky, waived)
from fabricbench.qualifying.verdict import busy as verdict_busy
from fabricbench.results import records as results_records
from fabricbench.results.schema import header
from fabricbench.results.status import Status
from fabricbench.results.writer import ResultWriter
from fabricbench.topology import read_topology, snapshot_record


def qualify(config: QualifyConfig, *, echo: Callable[[str], None] | None = None) -> QualifyResult:
    """Run the spec's checks (those selected, at config.level: default 2) and return their verdicts; see the
    module docstring. config.tolerance (for a baseline) defaults to the spec's [run] baseline_tolerance;
    config.records_from judges recorded results instead of measuring. `echo` takes the progress lines.
    qualify_plan() says what a run would do, measuring nothing."""
    expect_config(config, QualifyConfig, "qualify")
    full = config.read_spec()
    level = config.run_level
    spec = full.under(config.fabric) if config.fabric is not None and config.fabric != "default" else full
    checks = select(spec, config.only, config.skip, level)
    spec = spec.at_level(level)
    tol = spec.run.baseline_tolerance if config.tolerance is None else config.tolerance
    if not 0 <= tol < 1:
        raise UsageError(f"--tolerance {tol:g}: a fraction in [0, 1), e.g. 0.05")
    notes: list[str] = []
    base_records, recorded = _read_inputs(config, full, notes)
    run = _open_run(config, spec, recorded, notes, echo=echo)
    try:
        if not run.previous and run.rank0:
            _write_start(run, spec, checks, level=level)
        verdicts = _run_checks(run, checks, echo=echo)
        verdicts += getattr(run.ctx, "health_verdicts", list)()  # --from: imported DCGM and NCCL RAS (health.py)
        loaded = busy.note(run.ctx._units.values())  # said as every measuring command says it
        if loaded:
            notes.append(loaded)
        _fit_advice(verdicts, spec, source=config.records_from if recorded is not None else None)
        if base_records is not None:
            verdicts.append(_baseline_verdict(base_records, run.writer.records + run.previous, tol))
        if run.rank0:
            for v in verdicts:
                run.writer.write(v.to_record(run.run_id))
    finally:
        run.writer.close()
    hosts = cluster_env.hosts_in(run.writer.records) if run.distributed else []
    launcher = cluster_env.launcher_prefix(os.environ) if run.distributed else None
    res = QualifyResult(spec=spec, verdicts=verdicts, out=config.out, run_id=run.run_id,
                        host=", ".join(hosts) if len(hosts) > 1 else socket.gethostname(), notes=notes,
                        reproduce=(f"{launcher} " if launcher else "") + config.reproduce_line(full.path))
    if run.rank0:
        if config.out is not None:
            _write_outputs(res, Path(config.out))
        if config.prometheus is not None:
            _write_prometheus(res, config.prometheus, run.writer.records + run.previous)
    return res


def qualify_plan(config: QualifyConfig) -> DryRun:
    """The plan of a qualification, measuring nothing: the spec read and checked as a run reads it, the
    checks it would run at config.level, and a time estimate (what `fabricbench qualify --dry-run` prints).
    The config is the run's; what only a run reads (its baseline, --from, outputs) is left unread."""
    expect_config(config, QualifyConfig, "qualify_plan")
    return plan_dry_run(config.read_spec(), only=config.only, skip=config.skip, fabric=config.fabric,
                        level=config.level)


def fleet(config: FleetConfig, *, quiet: bool = False) -> FleetResult:
    """Per-node verdicts and outliers against the fleet (fleet.py); progress on stderr unless quiet."""
    expect_config(config, FleetConfig, "fleet")
    return run_fleet(config, quiet=quiet)


@dataclass(frozen=True, kw_only=True)
class _Run:
    """One qualification about to measure: where its records go, what it resumes, who writes."""

    ctx: Context  # or an OfflineContext, which judges recorded results (--from)
    writer: ResultWriter
    run_id: str
    previous: list[dict[str, Any]]  # the records of the run resumed (--resume), else none
    distributed: bool  # under torchrun/srun: the ranks measure together
    rank0: bool  # this process writes --out (every process when not distributed)


def _open_run(config: QualifyConfig, spec: Spec, recorded: list[dict[str, Any]] | None, notes: list[str], *,
              echo) -> _Run:
    """The run's writer and context, its id (the resumed run's, else a new one)."""
    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    rank0 = not distributed or os.environ.get("RANK") == "0"
    _note_launcher_size(spec, notes, distributed=distributed, rank0=rank0)
    out = config.out
    results_path = Path(out) / "results.jsonl" if out is not None else None
    # Only rank 0 writes --out, so only rank 0 refuses one that holds a run: another rank on rank 0's node
    # (or on a shared filesystem) would otherwise find the file rank 0 has just begun and end with exit 2.
    # Under --resume every rank reads it, to skip the checks rank 0 recorded.
    previous = _previous_records(results_path if rank0 or config.resume else None, out=out, resume=config.resume)
    run_id = next((r["run_id"] for r in previous if r.get("kind") == "qualify_start" and r.get("run_id")),
                  None) or new_run_id()
    writer = ResultWriter(results_path if rank0 else None, under=out)
    if recorded is not None:
        ctx: Context = OfflineContext(spec, records=recorded, source=str(config.records_from), writer=writer,
                                      run_id=run_id, topo_file=config.topo_file, echo=echo)
    else:
        ctx = Context(spec, writer=writer, run_id=run_id, topo_file=config.topo_file, previous=previous, echo=echo)
    return _Run(ctx=ctx, writer=writer, run_id=run_id, previous=previous, distributed=distributed, rank0=rank0)


def _write_start(run: _Run, spec: Spec, checks: list[Check], *, level: int) -> None:
    """A new run's first records: what it will check, and the machine's topology where a check or the
    report reads it."""
    run.writer.write({**header("qualify_start", run_id=run.run_id), "spec": spec.name, "spec_path": spec.path,
                      "level": level, "checks": [c.name for c in checks]})
    topo = run.ctx.topology() if any(c.kind == "topology" for c in checks) or not spec.run.cpu_ranks else None
    if topo is not None:
        run.writer.write(snapshot_record(run.run_id, topo=topo))


def _run_checks(run: _Run, checks: list[Check], *, echo: Callable[[str], None] | None) -> list[Verdict]:
    """Every check's verdict, in order; progress as a bar on a terminal (the check lines above it), a line
    now and then in a log."""
    with Progress("qualify", total=len(checks), quiet=echo is None or not run.rank0) as bar:
        said = (lambda line: bar.say(line) if bar.live else echo(line)) if echo else None  # noqa: E731
        run.ctx.echo = said or run.ctx.echo
        verdicts = []
        for c in checks:
            bar.update(item=c.name)
            verdicts.append(_judge(c, CHECKS.get(c.kind), run.ctx, run.distributed, said))
            bar.advance(item=f"{c.name} {verdicts[-1].status}")
    return verdicts


def _fit_advice(verdicts: list[Verdict], spec: Spec, *, source: str | None) -> None:
    """Each verdict's advice, fitted to where its figures came from: a CPU's ranks, a file (`source`)."""
    for v in verdicts:
        if v.action:
            v.action = action_for(CODES.get(v.code), cpu=spec.run.cpu_ranks, source=source)


def _read_inputs(config: QualifyConfig, full: Spec,
                 notes: list[str]) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]] | None]:
    """The baseline's and --from's records (None when not given), after every check of the inputs and
    outputs, so that bad input is found before anything is written or measured; their notes go to `notes`."""
    out, prometheus, topo_file = config.out, config.prometheus, config.topo_file
    base_records = None
    if config.baseline is not None:
        base_records, note = read_all(config.baseline, what="--baseline")
        notes += [note] if note else []
    recorded = None
    if config.records_from is not None:
        recorded, note = read_all(config.records_from, what="--from")
        notes += [note] if note else []
    if prometheus is not None:
        check_prometheus_path(prometheus)
    if out is not None or prometheus is not None:
        refuse_collisions({"--prometheus": prometheus, "--out results": Path(out) / "results.jsonl" if out else None},
                          {"--baseline": config.baseline, "--spec": full.path if os.path.isfile(full.path) else None,
                           "--topo-file": topo_file, "--from": config.records_from})
    if topo_file is not None:  # bad input is found before anything is written or measured
        if not os.path.isfile(topo_file):
            raise UsageError(f"--topo-file {topo_file}: no such file; give a saved `nvidia-smi topo -m` output")
        read_topology(topo_file, what="--topo-file")
    return base_records, recorded


def _note_launcher_size(spec: Spec, notes: list[str], *, distributed: bool, rank0: bool) -> None:
    """Under torchrun/srun the launcher's WORLD_SIZE wins over the spec's nprocs: say so (once, on rank 0)."""
    if distributed and spec.run.nprocs is not None and int(os.environ["WORLD_SIZE"]) != spec.run.nprocs:
        note = (f"the spec's nprocs = {spec.run.nprocs} is ignored: the launcher started "
                f"WORLD_SIZE={os.environ['WORLD_SIZE']} ranks, and they measure together")
        notes.append(note)
        if rank0:
            print(f"warning: {note}", file=sys.stderr)


def _previous_records(results_path: Path | None, *, out, resume: bool) -> list[dict[str, Any]]:
    """The records of the run already in --out (with --resume), or none; a run there without --resume is
    refused rather than overwritten."""
    previous: list[dict[str, Any]] = []
    if results_path is not None and results_path.exists() and results_path.stat().st_size > 0:
        if not resume:
            raise UsageError(f"--out {out}: {results_path} already holds a run; pass --resume to continue "
                             f"it or choose another --out")
        store.read_repaired(results_path)  # a torn last line (a killed run) is cut off, and that unit measured again
        previous = list(results_records.read(results_path, what="--resume"))
    return previous


def _write_prometheus(res: QualifyResult, prometheus, records: list[dict[str, Any]]) -> None:
    tf = TextFile()
    tf.add_records(records, host=res.host)
    tf.add_verdicts(res.host, res.spec.name, res.verdicts, when=res.when)
    res.files["prometheus"] = tf.write(str(prometheus))


def _judge(check, kind, ctx, distributed: bool, echo) -> Verdict:
    """The check's verdict; a miss is measured again up to `retries` times, every attempt recorded, and a
    pass after a miss is a warning (flaky). A kind that measures nothing (the topology) is judged once."""
    policy = Policy(severity=check.severity, warn_fraction=check.warn_fraction)
    retries = retries_of(check, kind, ctx.run)
    tries: list[Verdict] = []
    for attempt in range(retries + 1):
        if attempt:
            ctx.retry(attempt)
            if echo:
                echo(f"retry {attempt} of {retries}: {check.name} missed ({tries[-1].message()})")
        tries.append(_judge_once(check, kind, ctx, distributed, echo, policy))
        if tries[-1].status != Status.FAIL:
            break
    loaded = busy.note(ctx.used)
    quiet = False
    if tries[-1].status == Status.FAIL and loaded and kind.measures and not ctx.offline and not distributed:
        # a miss on a busy host is the other jobs' as much as the node's: once more, when the load passes
        # (not under torchrun, where every rank would have to wait alike)
        if busy.wait_for_quiet(check.name, echo=echo):
            ctx.retry(len(tries))
            tries.append(_judge_once(check, kind, ctx, distributed, echo, policy))
            quiet = True
            loaded = busy.note(ctx.used)
    ctx.retry(0)  # later checks share the first attempt's units again
    v = tries[-1]
    v.attempts = [attempt_record(n + 1, t) for n, t in enumerate(tries)]
    v.duration_s = sum(t.duration_s for t in tries)
    v.busy_host = loaded
    if v.status == Status.FAIL and loaded and kind.measures:
        why = ("its figures were measured on a busy host" if ctx.offline else
               "measured once: the ranks of a launch do not wait for the load" if distributed else
               "missed again when measured after a quiet spell" if quiet else "the host stayed busy: no quiet retry")
        verdict_busy(v, loaded, why=why)
    elif quiet and v.status == Status.PASS:  # the misses were the load's: the quiet figure is the node's
        v.reason = (f"passed when measured again on a quiet host, after {len(tries) - 1} miss(es) on a busy one: "
                    + "; ".join(t.message() for t in tries[:-1]))
    elif len(tries) > 1 and v.status == Status.PASS:
        flaky(v, tries[:-1])
    return v


def _judge_once(check, kind, ctx, distributed: bool, echo, policy: Policy) -> Verdict:
    t0 = time.monotonic()
    ctx.used = []  # the units this attempt reads (busy.note asks whether the host was busy for them)
    if distributed and kind.scope != "collective":
        return combine(check.name, check.kind, [waived(check.kind, "runs per node: a torchrun/srun launch "
                                                                   "qualifies collectives across nodes only")],
                       description=check.description, policy=policy, source=check.source)
    # recorded results (--from) a kind cannot use; a GPU spec on a machine with none (context.Context)
    skip = getattr(ctx, "skip_reason", lambda kind: None)(check.kind)
    if echo and skip != NO_GPU:  # no GPU is said once, after the run, not per check
        echo(f"check {check.name} ({check.kind})")
    if skip:
        return combine(check.name, check.kind, [waived(check.kind, skip)], description=check.description,
                       policy=policy, source=check.source)
    try:
        items = kind.judge(check, ctx)
    except FabricbenchError as e:  # a measurement that could not be made: an error verdict, the run goes on
        items = [error(check.kind, f"{type(e).__name__}: {e}")]
    except Exception as e:  # noqa: BLE001 - a bug in one check must not cost the others' verdicts
        where = traceback.extract_tb(e.__traceback__)[-1]
        items = [error(check.kind, f"internal error, please report: {type(e).__name__}: {e} "
                                   f"({os.path.basename(where.filename)}:{where.lineno})")]
    v = combine(check.name, check.kind, items, description=check.description, policy=policy,
                source=check.source)
    v.duration_s = time.monotonic() - t0
    return v


def _baseline_verdict(old: list[dict[str, Any]], new: list[dict[str, Any]], tolerance: float) -> Verdict:
    items = compare(figures(old), figures(new), tolerance)
    if not items:
        items = [waived("vs baseline", "the baseline and this run share no measured figure")]
    return combine("baseline", "baseline", items,
                   description=f"no figure worse than the baseline by more than {tolerance:.0%} (or the "
                               f"runs' own spread, when wider)")


def _write_outputs(res: QualifyResult, out: Path) -> None:
    with folder(out, what="--out") as d:  # one descriptor, no link followed in it (outputs.py)
        d.write_atomic("verdicts.json", dumps(res.to_dict(), indent=2) + "\n")
        d.write_atomic("junit.xml", to_xml(res.verdicts, suite=res.spec.name, host=res.host))
        d.write_atomic("spec.toml", mask_known(res.spec.text))  # custom fabric values: ***
    res.files.update({"results": str(out / "results.jsonl"), "verdicts": str(out / "verdicts.json"),
                      "junit": str(out / "junit.xml"), "spec": str(out / "spec.toml")})
    res.files.update(write_report(res, out))


def init_spec(results: str | os.PathLike, *, factor: float = 0.9, name: str | None = None) -> str:
    """The TOML text of a spec whose thresholds are this known-good run's figures x factor."""
    return spec_from_results(results, factor=factor, name=name)


def write_init_spec(path: str, results: str | os.PathLike, *, factor: float = 0.9, name: str | None = None) -> Spec:
    """`qualify --init PATH --from RESULTS`: init_spec's text, read back as a run reads a spec (what is
    written must be valid), then written to `path` atomically. Returns the spec."""
    text = init_spec(results, factor=factor, name=name)
    try:
        spec = parse_spec(text, path)
    except SpecError as e:
        raise UsageError(f"--from {results}: its records do not make a valid spec ({e})") from None
    write_text_atomic(path, text, what="--init")
    return spec

