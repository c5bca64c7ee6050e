"""The library face of qualification.

    import fabricbench
    res = fabricbench.qualify("builtin:h200-sxm-8", out="q/")
    for v in res.verdicts:
        print(v.check, v.status, v.measured, v.threshold, v.margin)
    res.exit_code          # 0: every check passed or was waived; 1: any failed or errored

    from fabricbench.qualifying.api import init_spec, fleet
    text = init_spec("q/results.jsonl", margin=0.9)             # a spec from a known-good node
    f = fleet(["node1/", "node2/", "node3/"], out="fleet/")    # outliers across nodes

Outputs under `out`: results.jsonl (every record, as measured), verdicts.json, junit.xml, report.md and
report.html, spec.toml (the spec as run).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from fabricbench.errors import FabricbenchError, UsageError
from fabricbench.qualifying.spec import Spec, load_spec, parse_spec
from fabricbench.qualifying.verdict import Verdict, combine, exit_code, waived


@dataclass(kw_only=True)
class QualifyResult:
    spec: Spec
    verdicts: list[Verdict]
    out: str | None = None
    run_id: str = ""
    host: str = ""
    files: dict[str, str] = field(default_factory=dict)  # what was written: results, verdicts, junit, ...

    @property
    def exit_code(self) -> int:
        return exit_code(self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec.name, "spec_path": self.spec.path, "run_id": self.run_id, "host": self.host,
                "exit_code": self.exit_code,
                "counts": {s: sum(1 for v in self.verdicts if v.status == s)
                           for s in ("pass", "fail", "waived", "error")},
                "verdicts": [v.to_dict() for v in self.verdicts]}


def _as_spec(spec: Spec | str | os.PathLike) -> Spec:
    if isinstance(spec, Spec):
        return spec
    text = str(spec)
    if "\n" in text and "[" in text:  # TOML given inline
        return parse_spec(text, "<inline spec>")
    return load_spec(text)


def select(spec: Spec, only: Sequence[str] | None, skip: Sequence[str] | None) -> list:
    names = [c.name for c in spec.checks]
    for flag, given in (("--only", only), ("--skip", skip)):
        unknown = [n for n in (given or []) if n not in names]
        if unknown:
            raise UsageError(f"{flag} {','.join(unknown)}: no such check in {spec.path}; its checks are "
                             f"{', '.join(names)}")
    return [c for c in spec.checks if (not only or c.name in only) and c.name not in (skip or [])]


def qualify(spec: Spec | str | os.PathLike, *, out: str | os.PathLike | None = None,
            only: Sequence[str] | None = None, skip: Sequence[str] | None = None, resume: bool = False,
            topo_file: str | None = None, baseline: str | os.PathLike | None = None, tolerance: float = 0.05,
            fabric: str | None = None, echo: Callable[[str], None] | None = None,
            records_from: str | os.PathLike | None = None) -> QualifyResult:
    """Run a spec's checks (those selected) and return their verdicts; see the module docstring.

    records_from: judge these results (fabricbench's, or `fabricbench import`ed) instead of measuring."""
    import socket

    from fabricbench.measuring.runner import new_run_id
    from fabricbench.qualifying.checks import CHECKS
    from fabricbench.qualifying.context import Context
    from fabricbench.results.schema import header
    from fabricbench.results.writer import ResultWriter, read_results

    spec = _as_spec(spec)
    if fabric is not None and fabric != "default":
        spec = spec.under(fabric)
    checks = select(spec, only, skip)
    if not 0 <= tolerance < 1:
        raise UsageError(f"--tolerance {tolerance:g}: a fraction in [0, 1), e.g. 0.05")
    base_records = _read_baseline(baseline) if baseline is not None else None
    if records_from is not None and resume:
        raise UsageError("--from judges recorded results and measures nothing: --resume does not apply")
    if resume and out is None:
        raise UsageError("--resume continues the run in --out; give --out DIR")
    if topo_file is not None:  # bad input is found before anything is written or measured
        from fabricbench.topology import read_topology

        if not os.path.isfile(topo_file):
            raise UsageError(f"--topo-file {topo_file}: no such file; give a saved `nvidia-smi topo -m` output")
        try:
            read_topology(topo_file)
        except UsageError as e:
            raise UsageError(str(e).replace("--from-file", "--topo-file")) from None
    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    rank0 = not distributed or os.environ.get("RANK") == "0"
    results_path = Path(out) / "results.jsonl" if out is not None else None
    previous: list[dict[str, Any]] = []
    if results_path is not None and results_path.exists() and results_path.stat().st_size > 0:
        if not resume:
            raise UsageError(f"--out {out}: {results_path} already holds a run; pass --resume to continue "
                             f"it or choose another --out")
        previous = list(read_results(results_path))
    run_id = next((r["run_id"] for r in previous if r.get("kind") == "qualify_start"), None) or new_run_id()
    writer = ResultWriter(results_path if rank0 else None)
    if records_from is not None:
        from fabricbench.qualifying.offline import OfflineContext

        ctx = OfflineContext(spec, records=_read_baseline(records_from, flag="--from"), source=str(records_from),
                             writer=writer, run_id=run_id, topo_file=topo_file, echo=echo)
    else:
        ctx = Context(spec, writer=writer, run_id=run_id, topo_file=topo_file, previous=previous, echo=echo)
    try:
        if not previous and rank0:
            writer.write({**header("qualify_start", run_id=run_id), "spec": spec.name, "spec_path": spec.path,
                          "checks": [c.name for c in checks]})
            topo = ctx.topology() if any(c.kind == "topology" for c in checks) or not spec.run.cpu_ranks else None
            if topo is not None:
                from fabricbench.topology import snapshot_record

                writer.write(snapshot_record(run_id, topo=topo))
        verdicts = [_judge(c, CHECKS.get(c.kind), ctx, distributed, echo) for c in checks]
        if base_records is not None:
            verdicts.append(_baseline_verdict(base_records, writer.records + previous, tolerance))
        if rank0:
            for v in verdicts:
                writer.write(verdict_record(v, run_id))
    finally:
        writer.close()
    res = QualifyResult(spec=spec, verdicts=verdicts, out=str(out) if out is not None else None, run_id=run_id,
                        host=socket.gethostname())
    if out is not None and rank0:
        _write_outputs(res, Path(out))
    return res


def verdict_record(v: Verdict, run_id: str) -> dict[str, Any]:
    """A kind "verdict" record: the header's `kind` stays "verdict"; the check's kind is `check_kind`."""
    from fabricbench.results.schema import header

    body = v.to_dict()
    body["check_kind"] = body.pop("kind")
    return {**header("verdict", run_id=run_id), **body}


def _judge(check, kind, ctx, distributed: bool, echo) -> Verdict:
    t0 = time.monotonic()
    if distributed and kind.scope != "collective":
        v = combine(check.name, check.kind, [waived(check.kind, "runs per node: a torchrun/srun launch "
                                                                  "qualifies collectives across nodes only")],
                    description=check.description)
        return v
    if echo:
        echo(f"check {check.name} ({check.kind})")
    skip = getattr(ctx, "skip_reason", lambda kind: None)(check.kind)  # judging recorded results (--from)
    if skip:
        return combine(check.name, check.kind, [waived(check.kind, skip)], description=check.description)
    try:
        items = kind.judge(check, ctx)
    except FabricbenchError as e:  # a measurement that could not be made: an error verdict, the run goes on
        from fabricbench.qualifying.verdict import error

        items = [error(check.kind, f"{type(e).__name__}: {e}")]
    except Exception as e:  # noqa: BLE001 - a bug in one check must not cost the others' verdicts
        import traceback

        from fabricbench.qualifying.verdict import error

        where = traceback.extract_tb(e.__traceback__)[-1]
        items = [error(check.kind, f"internal error, please report: {type(e).__name__}: {e} "
                                   f"({os.path.basename(where.filename)}:{where.lineno})")]
    v = combine(check.name, check.kind, items, description=check.description)
    v.duration_s = time.monotonic() - t0
    return v


def _read_baseline(path, flag: str = "--baseline") -> list[dict[str, Any]]:
    from fabricbench.results.writer import read_results

    p = Path(path)
    if p.is_dir():
        p = p / "results.jsonl"
    if not p.is_file():
        raise UsageError(f"{flag} {path}: no such results file; give an earlier run's results.jsonl "
                         f"(or its --out folder)")
    records = list(read_results(p))
    if not records:
        raise UsageError(f"{flag} {path}: no records in it"
                         + ("; other tools' output goes through `fabricbench import` first" if flag == "--from"
                            else ""))
    return records


def _baseline_verdict(old: list[dict[str, Any]], new: list[dict[str, Any]], tolerance: float) -> Verdict:
    from fabricbench.qualifying.figures import compare, figures

    items = compare(figures(old), figures(new), tolerance)
    if not items:
        items = [waived("vs baseline", "the baseline and this run share no measured figure")]
    return combine("baseline", "baseline", items,
                   description=f"no figure worse than the baseline by more than {tolerance:.0%}")


def _write_outputs(res: QualifyResult, out: Path) -> None:
    from fabricbench.qualifying.junit import to_xml
    from fabricbench.qualifying.report import write_report

    out.mkdir(parents=True, exist_ok=True)
    (out / "verdicts.json").write_text(json.dumps(res.to_dict(), indent=2) + "\n", encoding="utf-8")
    (out / "junit.xml").write_text(to_xml(res.verdicts, suite=res.spec.name, host=res.host), encoding="utf-8")
    (out / "spec.toml").write_text(res.spec.text, encoding="utf-8")
    res.files = {"results": str(out / "results.jsonl"), "verdicts": str(out / "verdicts.json"),
                 "junit": str(out / "junit.xml"), "spec": str(out / "spec.toml")}
    res.files.update(write_report(res, out))


def init_spec(results: str | os.PathLike, *, margin: float = 0.9, name: str | None = None) -> str:
    """The TOML text of a spec whose thresholds are this known-good run's figures x margin."""
    from fabricbench.qualifying.init import spec_from_results

    return spec_from_results(results, margin=margin, name=name)


def fleet(inputs: Sequence[str | os.PathLike], *, out: str | os.PathLike | None = None, fraction: float = 0.9,
          mad_z: float = 3.5):
    """Per-node verdicts and outliers against the fleet (fleet.py)."""
    from fabricbench.qualifying.fleet import run_fleet

    return run_fleet(inputs, out=out, fraction=fraction, mad_z=mad_z)
