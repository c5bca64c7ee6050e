"""Reading torch.profiler traces of loops that are not fabricbench's (usertrace.read, kineto): every
collective, step and overlap of a trace, older PyTorch and NCCL spellings, hostile files, bounded memory.
What relate --trace and sweep --for-trace do with a trace read: tests/e2e/test_usertrace_relate.py.

    python3 -m pytest -q -p no:xdist tests/unit/test_usertrace.py

Fixtures (tests/data/traces/SOURCES.md): two real multi-GPU NCCL traces from Holistic Trace Analysis and
two gloo traces of plain PyTorch loops (DDP, FSDP2) made by the script beside them. Every expected
collective is counted here again from the file with a plain json load, independently of the reader.
"""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter
from pathlib import Path

import pytest

from fabricbench.errors import UsageError
from fabricbench.relating import traceplan, usertrace
from fabricbench.relating.concurrency import stretches
from fabricbench.measuring.config import SweepConfig
from fabricbench.training import kineto
from fabricbench.training.calltimes import as_dicts
from clirun import one_error_line, run_cli
import roots

DATA = roots.DATA / "traces"
HTA2 = DATA / "hta_nccl_2ranks_allreduce.json.gz"
HTA16 = DATA / "hta_nccl_16ranks_rank0.json.gz"
DDP = DATA / "ddp_gloo_2ranks"
FSDP = DATA / "fsdp_gloo_2ranks"


def plain(path: Path) -> dict:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as fh:
        return json.load(fh)


def steps_of(events: list[dict]) -> list[tuple[float, float]]:
    return sorted((e["ts"], e["ts"] + e["dur"]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#")
                  and e.get("cat") != "gpu_user_annotation")


def inside(e: dict, windows: list[tuple[float, float]]) -> bool:
    return any(a <= e["ts"] <= b for a, b in windows)


def got(job: usertrace.TraceJob, steps: int) -> Counter:
    return Counter({(c["op"], c["bytes"], c["dtype"], c["group_size"]): round(c["calls_per_step"] * steps)
                    for c in job.collectives})


# ------------------------------------------------------------------ public NCCL traces


def test_hta_two_rank_nccl_trace_matches_its_record_param_comms():
    """NCCL 2.17, no shapes: every call's op, S, dtype and group size from record_param_comms, counted here."""
    events = plain(HTA2)["traceEvents"]
    windows = steps_of(events)
    ops = {"allreduce": "all_reduce", "broadcast": "broadcast"}
    elem = {"Float": (4, "float32"), "Long": (8, "int64")}
    expect: Counter = Counter()
    for e in events:
        a = e.get("args", {})
        if e.get("name") == "record_param_comms" and a.get("Collective name") in ops and inside(e, windows):
            size, dtype = elem[a["dtype"]]
            expect[(ops[a["Collective name"]], a["In msg nelems"] * size, dtype, a["Group size"])] += 1
    job = usertrace.read([HTA2])
    assert len(windows) == 3 and len(job.step_times_s) == 3
    assert (job.world_size, job.backend, job.device) == (2, "nccl", "cuda")
    assert got(job, 3) == expect and sum(expect.values()) == 21
    # each call is timed by its own NCCL kernel (the kernel carries its record_param_comms' External id)
    kernel = {e["args"]["External id"]: e["dur"] for e in events if e.get("cat") == "kernel"
              and e["name"].startswith("ncclKernel")}
    rows = as_dicts(job.comm["calls"])
    for i, (a, b) in enumerate(windows):
        theirs = sorted(round(kernel[e["args"]["External id"]] * 1e-6, 9) for e in events
                        if e.get("name") == "record_param_comms" and e["args"].get("Collective name") in ops
                        and a <= e["ts"] <= b)
        assert sorted(round(r["dur_s"], 9) for r in rows if r["step"] == i) == theirs
    assert job.comm["timeline"]["source"] == "cuda kernels"


@pytest.mark.slow
def test_hta_sixteen_rank_trace_matches_its_nccl_events_and_subgroups():
    """An older PyTorch (record_param_comms names nothing): sizes from the nccl:* events, counted here;
    the all-gathers and reduce-scatters run in groups of 8 (their c10d op's whole over its part)."""
    events = plain(HTA16)["traceEvents"]
    windows = steps_of(events)
    elem = {"float": (4, "float32"), "int": (4, "int32"), "long": (8, "int64")}
    ops = {"nccl:all_reduce": "all_reduce", "nccl:all_to_all": "all_to_all", "nccl:_all_gather_base": "all_gather",
           "nccl:_reduce_scatter_base": "reduce_scatter"}
    groups = {}
    for e in events:  # the group of each gather/scatter: output over input elements of its c10d op
        if e.get("name") in ("c10d::_allgather_base_", "c10d::_reduce_scatter_base_"):
            d = e["args"]["Input Dims"]
            big, small = (d[0], d[1]) if "allgather" in e["name"] else (d[1], d[0])
            groups[e["ts"]] = math.prod(big) // math.prod(small)
    assert set(groups.values()) == {8}
    expect: Counter = Counter()
    for e in events:
        if e.get("name") in ops and e.get("cat") != "gpu_user_annotation" and inside(e, windows):
            op = ops[e["name"]]
            size, dtype = elem[e["args"]["Input type"][0]]
            n = 8 if op in ("all_gather", "reduce_scatter") else 16
            nbytes = math.prod(e["args"]["Input Dims"][0]) * size * (n if op == "all_gather" else 1)
            expect[(op, nbytes, dtype, n)] += 1
    job = usertrace.read([HTA16])
    assert job.world_size == 16 and len(windows) == 5
    assert got(job, 5) == expect and sum(expect.values()) == 85
    assert not job.notes  # every call read: nothing left out
    configs, _ = traceplan.configs([HTA16], SweepConfig())  # the subgroup's gathers and scatters swept on 8
    assert Counter(len(c.gpus) for c in configs) == Counter({16: 3, 8: 1})


# ------------------------------------------------------------------ gloo traces of plain loops


def test_gloo_ddp_trace_reads_every_all_reduce_and_their_overlap():
    ranks = sorted(DDP.iterdir())
    events = plain(ranks[0])["traceEvents"]
    windows = steps_of(events)
    gloo = [e for e in events if e.get("name") == "gloo:all_reduce" and inside(e, windows)]
    job = usertrace.read([DDP])
    assert (job.world_size, job.backend, job.device, job.ranks) == (2, "gloo", "cpu", [0, 1])
    assert gloo and got(job, len(windows)) == Counter(
        ("all_reduce", math.prod(e["args"]["Input Dims"][0]) * 4, "float32", 2) for e in gloo)
    # the step is the slowest rank's ProfilerStep, per step
    other = steps_of(plain(ranks[1])["traceEvents"])
    assert job.step_times_s == pytest.approx([max(a[1] - a[0], b[1] - b[0]) * 1e-6 for a, b in zip(windows, other)])
    # DDP's buckets ran on two gloo worker threads at once: stretches of several calls (concurrency.py)
    assert max(len(s) for s in stretches(as_dicts(job.comm["calls"]))) > 1
    tl = job.comm["timeline"]
    assert tl["source"] == "cpu threads" and 0 < tl["exposed_fraction"] < 1


def test_gloo_fsdp2_trace_reads_gathers_and_scatters():
    job = usertrace.read([FSDP / "rank0.json.gz"])  # rank 0 alone
    events = plain(FSDP / "rank0.json.gz")["traceEvents"]
    windows = steps_of(events)
    gathers = [e for e in events if e.get("name") == "c10d::_allgather_base_" and inside(e, windows)]
    scatters = [e for e in events if e.get("name") == "c10d::_reduce_scatter_base_" and inside(e, windows)]
    ops = Counter(c["op"] for c in job.collectives for _ in range(round(c["calls_per_step"] * len(windows))))
    assert ops == Counter({"all_gather": len(gathers), "reduce_scatter": len(scatters)}) and gathers and scatters
    assert job.ranks == [0] and job.world_size == 2


# ------------------------------------------------------------------ hostile traces: one line, exit 2


def _events_file(tmp_path: Path, events: list[dict], name: str = "t.json", **header) -> Path:
    p = tmp_path / name
    p.write_text(json.dumps({**header, "traceEvents": events}))
    return p


def test_a_trace_without_collectives_is_one_line(tmp_path, capsys):
    p = _events_file(tmp_path, [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0,
                                 "dur": 10},
                                {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
                                 "ts": 0, "dur": 20}])
    code, _, err = run_cli(["relate", "--trace", p], capsys)
    assert code == 2 and "no collective" in one_error_line(err)


def test_a_truncated_gz_trace_is_one_line(tmp_path, capsys):
    whole = (DDP / "rank0.json.gz").read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    code, _, err = run_cli(["relate", "--trace", cut], capsys)
    assert code == 2 and "cut short" in one_error_line(err)
    raw = tmp_path / "cut.json"
    raw.write_text(gzip.decompress(whole).decode()[:50_000])
    with pytest.raises(UsageError, match="cut short"):
        usertrace.read([raw])


@pytest.mark.parametrize("text, said", [
    ("", "not a JSON object"), ("[1, 2]", "not a JSON object"), ('{"schemaVersion": 1}', "no traceEvents"),
    ('{"traceEvents": [{"ph": "X"} {"ph": "X"}]}', "',' or ']'"), ("\xff\xfe", "UTF-8"),
])
def test_what_is_not_a_trace_is_one_line(tmp_path, text, said):
    p = tmp_path / "bad.json"
    p.write_bytes(text.encode("latin-1"))
    with pytest.raises(UsageError, match=said):
        kineto.scan(p)


def _renamed(src: Path, dst: Path, rename, *, first_step: bool = False) -> Path:
    """src with each event passed through rename (first_step: only the first profiled step's events)."""
    doc = plain(src)
    events = doc["traceEvents"]
    if first_step:
        lo, hi = steps_of(events)[0]
        events = [e for e in events if e.get("ph") == "M" or lo <= e.get("ts", lo - 1) <= hi + 50_000]
    doc["traceEvents"] = [rename(dict(e)) for e in events]
    opener = gzip.open if dst.name.endswith(".gz") else open
    with opener(dst, "wt") as fh:
        json.dump(doc, fh)
    return dst


def test_older_spellings_read_as_todays(tmp_path):
    """PyTorch's names have moved: `Operator` was the op category, record_param_comms counted "In msg size",
    NCCL < 2.19 named its kernels ncclKernel_*, NCCL >= 2.19 ncclDevKernel_*. Each spelling reads alike."""
    def old(e: dict) -> dict:
        if e.get("cat") == "cpu_op":
            e["cat"] = "Operator"
        a = e.get("args") or {}
        for side in ("In", "Out"):
            if f"{side} msg nelems" in a:
                a[f"{side} msg size"] = a.pop(f"{side} msg nelems")
        if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel_AllReduce"):
            e["name"] = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
        return e

    before = usertrace.read([_renamed(HTA2, tmp_path / "new.json", lambda e: e, first_step=True)])
    after = usertrace.read([_renamed(HTA2, tmp_path / "old.json", old, first_step=True)])
    assert before.collectives
    assert after.collectives == before.collectives and after.comm["calls"] == before.comm["calls"]
    assert after.comm["timeline"] == before.comm["timeline"]


def test_functional_collectives_of_torch_2_1_read_as_todays(tmp_path):
    """Before torch 2.2 the functional collectives were `c10d_functional::`, since then `_c10d_functional::`."""
    def old(e: dict) -> dict:
        if e.get("name") == "c10d::allreduce_":
            e["name"] = "c10d_functional::all_reduce"
        return e

    before = usertrace.read([DDP / "rank0.json.gz"])
    after = usertrace.read([_renamed(DDP / "rank0.json.gz", tmp_path / "f.json.gz", old)])
    assert after.collectives == before.collectives and after.collectives


def test_rank_files_given_one_by_one_read_as_their_folder():
    files = sorted(DDP.iterdir(), reverse=True)  # rank 1 first: ordered by the rank each file names
    one_by_one, folder = usertrace.read(files), usertrace.read([DDP])
    assert one_by_one.ranks == folder.ranks == [0, 1]
    assert one_by_one.comm == folder.comm and one_by_one.step_times_s == folder.step_times_s


def test_names_no_version_writes_are_said(tmp_path):
    """A trace whose collectives carry names no PyTorch from 2.4 on writes: the line names them."""
    def alien(e: dict) -> dict:
        if e.get("name", "").startswith(("c10d::", "gloo:")):
            e["name"] = e["name"].replace("c10d::", "c10dx::").replace("gloo:", "glooz:")
        return e

    p = _renamed(DDP / "rank0.json.gz", tmp_path / "alien.json.gz", alien)
    with pytest.raises(UsageError, match=r"no collective.*c10dx::allreduce_"):
        usertrace.read([p])


def test_no_step_marks_take_the_whole_window_as_one_step(tmp_path):
    p = _renamed(DDP / "rank0.json.gz", tmp_path / "nosteps.json.gz",
                 lambda e: {**e, "name": "x"} if str(e.get("name", "")).startswith("ProfilerStep#") else e)
    job = usertrace.read([p])
    assert len(job.step_times_s) == 1 and any("one step" in n for n in job.notes)
    assert job.collectives and job.collectives[0]["op"] == "all_reduce"


def test_two_files_of_one_rank_are_refused(tmp_path):
    a = tmp_path / "a.json.gz"
    a.write_bytes((DDP / "rank0.json.gz").read_bytes())
    with pytest.raises(UsageError, match="two traces of rank 0"):
        usertrace.read([DDP / "rank0.json.gz", a])


def _repeated(src: Path, dst: Path, steps: int) -> Path:
    """A trace of `steps` copies of src's first profiled step, shifted in time, written as the profiler does."""
    events = plain(src)["traceEvents"]
    lo, hi = steps_of(events)[0]
    one = [e for e in events if e.get("ph") == "X" and lo <= e.get("ts", -1) <= hi]
    with dst.open("w") as fh:
        fh.write('{"distributedInfo": {"backend": "gloo", "rank": 0, "world_size": 2}, "traceEvents": [')
        for k in range(steps):
            shift = k * (hi - lo + 10)
            for i, e in enumerate(one):
                fh.write(("," if k or i else "") + json.dumps({**e, "ts": e["ts"] + shift}))
        fh.write("]}")
    return dst


@pytest.mark.slow  # real processes for more than ~3 s (docs/testing.md)
def test_a_large_trace_streams_in_bounded_memory(tmp_path, monkeypatch):
    """Memory follows the steps read, not the file: past kineto.MAX_STEPS (10 here) eight times the steps
    cost no more memory than the reader's window of text (benchmarks/trace/ measures the 1 GB case). The peak
    moves by a few hundred KB with where the window's buffers fall (1.53, 1.90, 1.79, 1.79 MB at 12, 48, 96
    and 192 steps), so the files differ by 8 MB, against which that is small."""
    import tracemalloc

    monkeypatch.setattr(kineto, "MAX_STEPS", 10)
    monkeypatch.setattr(kineto.scan, "__defaults__", (10,))
    peaks, sizes = [], []
    for steps in (12, 96):
        p = _repeated(DDP / "rank0.json.gz", tmp_path / f"big{steps}.json", steps)
        tracemalloc.start()
        job = usertrace.read([p])
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        sizes.append(p.stat().st_size)
        assert len(job.step_times_s) == 10 and f"has {steps} profiled steps; the first 10" in " ".join(job.notes)
    assert peaks[1] - peaks[0] < (sizes[1] - sizes[0]) / 10, f"peak {peaks} B for traces of {sizes} B"


@pytest.mark.parametrize("path, device", [(HTA2, "cuda"), (DDP / "rank0.json.gz", "cpu")])
def test_the_streamed_timeline_is_the_in_memory_one(path, device):
    """kinetoline measures in two passes what timeline.timeline measures on every event held at once."""
    from fabricbench.training import kinetoline, timeline

    events = [{**e, "name": timeline.STEP_MARK} if str(e.get("name", "")).startswith("ProfilerStep#") else e
              for e in plain(path)["traceEvents"]]
    whole = timeline.timeline(events, device_type=device)
    streamed, late = kinetoline.measure(kineto.scan(path), device_type=device)
    assert late == 0 and whole is not None and streamed is not None
    assert streamed.keys() == whole.keys()
    for k, v in whole.items():
        assert streamed[k] == (pytest.approx(v, rel=1e-9, abs=1e-12) if not isinstance(v, (str, list)) else v), k
