"""Run one `fabricbench sweep` in a fresh process under a fabric, and read back what it measured.

    fabricbench compare --fabrics default,p2p-off      (one child per fabric)
    fabricbench scaling --counts 2,4,8                  (one child per GPU set)

NCCL reads its environment once per process, so every fabric (and every GPU set) gets its own
`python -m fabricbench sweep ... --fabric NAME --out tmp.jsonl --quiet`. Its records come back with the
transport read from NCCL's log written into `transport` and `extra.transport_detail`, and a
`transport_mismatch` message where the fabric's label did not happen. A child that fails is reported
(ChildRun.error) and whatever it wrote before failing is kept.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

from fabricbench.fabrics.env import fabric_env
from fabricbench.fabrics.model import Fabric
from fabricbench.fabrics.transport import TransportSummary, mismatch, read_logs


@dataclass(kw_only=True)
class ChildRun:
    fabric: Fabric
    records: list[dict[str, Any]] = field(default_factory=list)  # kind "collective", annotated
    summary: TransportSummary | None = None
    transport: str | None = None
    mismatch: str | None = None
    warnings: list[str] = field(default_factory=list)
    returncode: int = 0
    error: str | None = None  # the child's last error line when it failed
    command: list[str] = field(default_factory=list)


def sweep_args(*, ops: str, sizes: str, dtype: str, iters: int, warmup: int, engine: str,
               backend: str | None, nprocs: int | None, timeout_s: float | None,
               gpus: tuple[int, ...] | None) -> list[str]:
    """The child's `fabricbench sweep` options (the names are issue 2's contract)."""
    args = ["--ops", ops, "--sizes", sizes, "--dtype", dtype, "--iters", str(iters), "--warmup", str(warmup),
            "--engine", engine]
    if backend:
        args += ["--backend", backend]
    cpu_ranks = engine == "torch" and backend == "gloo"
    if gpus is not None and not cpu_ranks:  # gloo ranks drive no GPU: the sweep would ignore --gpus
        args += ["--gpus", ",".join(map(str, gpus))]
    if nprocs:
        args += ["--nprocs", str(nprocs)]
    if timeout_s:
        args += ["--timeout", f"{timeout_s:g}"]
    return args


def run_child(fabric: Fabric, args: list[str], *, base_env: dict[str, str] | None = None,
              wall_timeout_s: float | None = None, extra: dict[str, Any] | None = None) -> ChildRun:
    """Run the sweep under `fabric`; `extra` is merged into every record's `extra` (e.g. the placement)."""
    run = ChildRun(fabric=fabric)
    uses_nccl = not ("--backend" in args and args[args.index("--backend") + 1] == "gloo")
    with tempfile.TemporaryDirectory(prefix=f"fabricbench-{fabric.name}-") as tmp:
        # NCCL logging only where NCCL runs: gloo ranks would just carry the variables into the records.
        fenv = fabric_env(fabric, base_env, log_dir=tmp if uses_nccl else None)
        run.warnings = fenv.warnings
        out = os.path.join(tmp, "out.jsonl")
        cmd = [sys.executable, "-m", "fabricbench", "sweep", *args, "--fabric", fabric.name, "--out", out,
               "--quiet"]
        run.command = cmd
        try:
            proc = subprocess.run(cmd, env=fenv.env, capture_output=True, text=True, timeout=wall_timeout_s)
            stdout, stderr, run.returncode = proc.stdout, proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as e:
            stdout = _text(e.stdout)
            stderr = _text(e.stderr)
            run.returncode = 124
            run.error = f"did not finish within {wall_timeout_s:g} s"
        from fabricbench.results.writer import read_results

        records = list(read_results(out, kind="collective")) if os.path.exists(out) else []
        summary = read_logs(fenv.log_dir, stdout, stderr)
    if run.returncode and run.error is None:
        run.error = _last_error(stderr) or f"exit status {run.returncode}"
    run.summary = summary
    nranks = records[0].get("nranks") if records else None
    run.transport = summary.label(nranks) if uses_nccl else "gloo (no NCCL)"
    run.mismatch = mismatch(fabric, summary)
    for rec in records:
        rec["transport"] = run.transport
        rec_extra = dict(rec.get("extra") or {})
        rec_extra["transport_detail"] = {**summary.to_dict(), "expected": fabric.expected,
                                         "fabric_env": fabric.variables}
        if extra:
            rec_extra.update(extra)
        rec["extra"] = rec_extra
        if run.mismatch:
            rec["transport_mismatch"] = run.mismatch
    run.records = records
    return run


def _text(v) -> str:
    if v is None:
        return ""
    return v.decode(errors="replace") if isinstance(v, bytes) else v


def _last_error(stderr: str) -> str | None:
    lines = [l.strip() for l in stderr.splitlines() if l.strip()]
    errs = [l for l in lines if l.startswith("Error") or "Error:" in l]
    return (errs or lines or [None])[-1]
