"""relate --trace and sweep --for-trace on torch.profiler traces of loops that are not fabricbench's: a trace
priced on every swept fabric, the sweep a fabric lacks named, and a for-trace sweep planned to be exactly
what relate then asks for. How a trace is read: tests/unit/test_usertrace.py.

    python3 -m pytest -q -p no:xdist tests/e2e/test_usertrace_relate.py

Fixtures (tests/data/traces/SOURCES.md): a real two-rank NCCL trace from Holistic Trace Analysis and two
gloo traces of plain PyTorch loops (DDP, FSDP2) made by the script beside them.
"""

from __future__ import annotations

import dataclasses

import json
from pathlib import Path

import pytest

import fabricbench
from fabricbench.errors import UsageError
from fabricbench.measuring.config import SweepConfig
from fabricbench.relating import traceplan, usertrace
from clirun import one_error_line, run_cli, run_cli_subprocess
import roots

DATA = roots.DATA / "traces"
HTA2 = DATA / "hta_nccl_2ranks_allreduce.json.gz"
DDP = DATA / "ddp_gloo_2ranks"
FSDP = DATA / "fsdp_gloo_2ranks"


def sweep_recs(fabric: str, gbps: float, ops: tuple[str, ...], sizes: list[int], nranks: int = 2) -> list[dict]:
    return [{"schema": "fabricbench/1", "kind": "collective", "fabric": fabric, "op": op, "dtype": "float32",
             "bytes": s, "nranks": nranks, "time_us": 40.0 + s / (gbps * 1e9) * 1e6, "graph": False, "status": "ok",
             "inplace": False} for op in ops for s in sizes]


def write(path: Path, recs: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return str(path)


def test_relate_trace_prices_the_trace_on_every_swept_fabric(tmp_path):
    sizes = [2**k for k in range(16, 22)]
    sweeps = write(tmp_path / "s.jsonl", sweep_recs("default", 2.0, ("all_reduce",), sizes)
                   + sweep_recs("shaped:1gbit", 0.0625, ("all_reduce",), sizes))
    res = fabricbench.relate(fabricbench.RelateConfig(traces=[DDP], inputs=[sweeps]))
    job = usertrace.read([DDP])
    assert res.reference == "default" and [r.fabric for r in res.rows] == ["default", "shaped:1gbit"]
    ref, slow = res.rows
    assert ref.observed_step_s == pytest.approx(job.step_s) and ref.predicted_step_s == pytest.approx(job.step_s)
    assert slow.observed_step_s is None and slow.predicted_step_s > ref.predicted_step_s
    assert slow.predicted_step_ci95[0] <= slow.predicted_step_s <= slow.predicted_step_ci95[1]
    assert "shared link" in ref.flags  # the overlapped buckets are priced as relate prices them
    assert ref.comm_bytes_per_step == job.comm["total_bytes_per_step"]


def test_relate_trace_names_the_sweep_a_fabric_lacks(tmp_path):
    only_other = write(tmp_path / "s.jsonl", sweep_recs("shaped:1gbit", 0.0625, ("all_reduce",), [1 << 16, 1 << 20]))
    with pytest.raises(UsageError, match=r"no sweep of the reference fabric default.*fabricbench sweep --for-trace "
                                         r"\S*ddp_gloo_2ranks --fabric default --out FILE"):
        fabricbench.relate(fabricbench.RelateConfig(traces=[DDP], inputs=[only_other]))
    with pytest.raises(UsageError, match="--for-trace"):
        fabricbench.relate(fabricbench.RelateConfig(traces=[DDP], inputs=[]))
    sizes = [2**k for k in range(16, 22)]
    partial = write(tmp_path / "p.jsonl", sweep_recs("default", 2.0, ("all_gather",), sizes)
                    + sweep_recs("default", 2.0, ("reduce_scatter",), sizes[:1])
                    + sweep_recs("shaped:1gbit", 0.0625, ("all_gather",), sizes))
    res = fabricbench.relate(fabricbench.RelateConfig(traces=[FSDP], inputs=[partial]))
    assert any("shaped:1gbit's sweeps lack" in p and "--for-trace" in p and "--fabric shaped:1gbit" in p
               for p in res.problems)


def test_sweeps_as_planned_lack_nothing(tmp_path):
    """What sweep --for-trace measures is all relate asks for: an int64 broadcast swept as float64 (no
    sweep runs int64) is no lack, and no note sends the user to sweep again."""
    configs, job = traceplan.configs([HTA2], SweepConfig())
    recs = []
    for c in configs:
        for op in c.ops:
            for size in c.sizes.expand():
                recs += [{**r, "dtype": c.dtype} for r in sweep_recs("default", 20.0, (op,), [size])]
    res = fabricbench.relate(fabricbench.RelateConfig(traces=[HTA2], inputs=[write(tmp_path / "s.jsonl", recs)]))
    assert {c.dtype for c in configs} == {"float32", "float64"} and res.rows
    assert not [p for p in res.problems if "lack" in p]


def test_sweep_for_trace_plans_exactly_what_the_trace_needs():
    configs, job = traceplan.configs([FSDP], SweepConfig(engine="torch", backend="gloo"))
    assert len(configs) == 1
    c = configs[0]
    assert (c.ops, c.dtype, c.nprocs, c.backend, c.engine) == (("all_gather", "reduce_scatter"), "float32", 2, "gloo",
                                                               "torch")
    sizes = c.sizes.expand()
    traced = [x["bytes"] for x in job.collectives]
    assert sizes[0] <= min(traced) and sizes[-1] >= max(traced) and len(sizes) <= 3


def test_on_a_token_bucket_link_the_plan_sweeps_again_after_an_idle_gap():
    """shaped:RATE banks credit while idle: the plan measures what a call realises after a gap (the sweeps
    again with --gap, 3 B/R at least 5 ms); a fabric without a bucket, or a sweep that names its own gap,
    gets no twins."""
    base = SweepConfig(engine="torch", backend="gloo")
    plain, _ = traceplan.configs([FSDP], base)
    shaped, _ = traceplan.configs([FSDP], dataclasses.replace(base, fabric="shaped:500mbit"))
    assert len(shaped) == 2 * len(plain)
    b2b, gapped = shaped[:len(plain)], shaped[len(plain):]
    assert all(c.gap_s == 0 for c in b2b)
    assert [c.gap_s for c in gapped] == [pytest.approx(3 * 256 * 1024 * 8 / 500e6)] * len(gapped)
    assert [dataclasses.replace(c, gap_s=0.0) for c in gapped] == b2b
    assert traceplan.configs([FSDP], dataclasses.replace(base, fabric="shaped:10gbit"))[0][-1].gap_s == 0.005
    own, _ = traceplan.configs([FSDP], dataclasses.replace(base, fabric="shaped:500mbit", gap_s=0.05))
    assert [c.gap_s for c in own] == [0.05] * len(plain)


def test_relate_trace_says_a_bucketed_fabric_lacks_its_gapped_sweep(tmp_path):
    sizes = [2**k for k in range(16, 22)]
    recs = sweep_recs("default", 2.0, ("all_reduce",), sizes) + sweep_recs("shaped:1gbit", 0.0625, ("all_reduce",), sizes)
    res = fabricbench.relate(fabricbench.RelateConfig(traces=[DDP], inputs=[write(tmp_path / "s.jsonl", recs)]))
    (said,) = [p for p in res.problems if "ran after an idle gap" in p]
    assert said.startswith("fabric shaped:1gbit is a token-bucket link") and "--fabric shaped:1gbit" in said
    gapped = [{**r, "extra": {"gap_s": 0.0063}, "time_us": r["time_us"] * 0.9} for r in recs
              if r["fabric"] == "shaped:1gbit"]
    res = fabricbench.relate(fabricbench.RelateConfig(traces=[DDP], inputs=[write(tmp_path / "g.jsonl", recs + gapped)]))
    assert not [p for p in res.problems if "ran after an idle gap" in p]
    assert any("on shaped:1gbit: a call after an idle gap realised" in p for p in res.problems)  # and it is taken


def test_cli_sweep_for_trace_dry_run_and_conflicts(capsys, tmp_path):
    code, out, _ = run_cli(["sweep", "--for-trace", FSDP, "--dry-run"], capsys)
    assert not code and "all_gather" in out and "reduce_scatter" in out and "2 rank(s)" in out
    code, _, err = run_cli(["sweep", "--for-trace", FSDP, "--ops", "all_reduce", "--dry-run"], capsys)
    assert code == 2 and "drop --ops" in one_error_line(err)
    code, _, err = run_cli(["sweep", "--for-trace", HTA2, "--csv", tmp_path / "x.csv"], capsys)
    assert code == 2 and err.splitlines()[-1].startswith("Error: --csv holds one sweep")


def test_cli_relate_trace_json(tmp_path, capsys):
    sizes = [2**k for k in range(16, 22)]
    sweeps = write(tmp_path / "s.jsonl", sweep_recs("default", 2.0, ("all_reduce",), sizes)
                   + sweep_recs("shaped:1gbit", 0.0625, ("all_reduce",), sizes))
    code, out, _ = run_cli(["relate", "--trace", DDP, sweeps, "--json"], capsys)
    assert not code
    doc = json.loads(out)
    rows = {r["fabric"]: r for r in doc["rows"]}
    assert set(rows) == {"default", "shaped:1gbit"} and doc["reference"] == "default"
    for key in ("observed_step_s", "predicted_step_s", "predicted_step_ci95", "flags"):
        assert key in rows["default"]
    assert rows["shaped:1gbit"]["observed_step_s"] is None


@pytest.mark.slow
def test_end_to_end_sweep_for_trace_then_relate(tmp_path):
    """The commands as a user runs them on a gloo trace: the for-trace sweep measures what relate then
    prices, with no note that a fabric lacks anything."""
    out = tmp_path / "sweeps.jsonl"
    code, _, err = run_cli_subprocess(["sweep", "--for-trace", DDP, "--iters", "5", "--warmup", "1", "--out", out,
                                       "--quiet"], timeout=300)
    assert code == 0, err
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    swept = {(r["op"], r["nranks"]) for r in recs if r.get("kind") == "collective" and r.get("status") == "ok"}
    assert swept == {("all_reduce", 2)}
    code, done, err = run_cli_subprocess(["relate", "--trace", DDP, out, "--json"], timeout=300)
    assert code == 0, err
    doc = json.loads(done)
    assert [r["fabric"] for r in doc["rows"]] == ["default"]
    assert not [p for p in doc["problems"] if "lack" in p or "not priced" in p or "extrapolated" in p]
