"""Typed readers check physics, not only JSON types: a count below 0, a fraction above 1, a time of 0,
bytes that are not whole elements for the dtype and rank count; topology files past their documented
limits (topology/links.py); and a damaged study folder is one line from every command that reads it.

    python3 -m pytest -q tests/unit/test_reader_physics.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fabricbench.studying  # noqa: F401  (registers the study's record kinds with the reader)
from fabricbench.errors import UsageError
from fabricbench.results import records
from fabricbench.results.fields import COUNT, FRACTION, TIME
from fabricbench.results.schema import SCHEMA
from fabricbench.topology.links import MAX_NVLINKS, normalize_link
from fabricbench.topology.model import MAX_GPUS, Gpu, Topology
from clirun import one_error_line, run_cli_subprocess
from roots import DATA, TESTS

STUDY = DATA / "study" / "cpu-lab"

COLL = {"schema": SCHEMA, "kind": "collective", "op": "all_gather", "dtype": "float32", "bytes": 4096,
        "requested_bytes": 4096, "count": 1024, "nranks": 2, "time_us": 12.5, "busbw_gbps": 0.16, "cv": 0.02,
        "iters": 5, "wrong": 0, "status": "ok"}
TRAIN = {"schema": SCHEMA, "kind": "train", "strategy": "ddp", "status": "ok", "nranks": 2, "steps": 5,
         "step_time": {"median_s": 0.2, "cv": 0.1},
         "comm": {"collectives": [{"op": "all_reduce", "bytes": 4096, "calls_per_step": 2}],
                  "timeline": {"exposed_fraction": 0.4, "step_s": 0.2}},
         "gpu_busy_fraction": 0.7}


def _read(*recs: dict) -> records.Records:
    return records.parse_lines("".join(json.dumps(r) + "\n" for r in recs), source="r.jsonl")


def test_physical_records_are_read():
    got = _read(COLL, TRAIN)
    assert len(got.records) == 2 and got.warnings == []


@pytest.mark.parametrize("rec, field, why", [
    ({**COLL, "iters": -1}, "iters", "is -1, not a count (>= 0)"),
    ({**COLL, "wrong": -3}, "wrong", "not a count"),
    ({**COLL, "time_us": 0}, "time_us", "is 0, not a time (> 0)"),
    ({**COLL, "time_us": -2.5}, "time_us", "not a time"),
    ({**COLL, "busbw_gbps": -0.1}, "busbw_gbps", "not an amount (>= 0)"),
    ({**COLL, "nranks": 0}, "nranks", "not a rank count (>= 1)"),
    ({**COLL, "gpus": [0, -1]}, "gpus[1]", "not an index"),
    ({**COLL, "bytes": 4097, "requested_bytes": 4097}, "bytes", "not whole float32 elements on each of 2 ranks"),
    ({**COLL, "op": "all_reduce", "bytes": 4098, "requested_bytes": 4098}, "bytes", "a multiple of 4"),
    ({**COLL, "count": 1000}, "count", "but bytes 4096 hold 1024 float32 elements"),
    ({**COLL, "requested_bytes": 1024}, "bytes", "more than the 1024 requested"),
    ({**TRAIN, "comm": {"collectives": [{"op": "all_reduce", "bytes": 8, "calls_per_step": -2}]}},
     "comm.collectives[0].calls_per_step", "not an amount"),
    ({**TRAIN, "comm": {"timeline": {"exposed_fraction": 1.5}}}, "comm.timeline.exposed_fraction",
     "is 1.5, not a fraction (>= 0 and <= 1)"),
    ({**TRAIN, "gpu_busy_fraction": -0.1}, "gpu_busy_fraction", "not a fraction"),
    ({**TRAIN, "step_time": {"median_s": 0.0}}, "step_time.median_s", "not a time"),
    ({**TRAIN, "steps": -5}, "steps", "not a count"),
])
def test_a_record_that_breaks_physics_is_left_out_with_one_warning(rec, field, why):
    got = _read(COLL, rec, TRAIN)
    assert len(got.records) == 2 and len(got.warnings) == 1  # the others kept
    w = got.warnings[0]
    assert w.startswith("r.jsonl: line 2: ") and f"{field} " in w and why in w and w.endswith("; skipped"), w


def test_the_ranges_are_what_they_say():
    assert COUNT.problem(0) is None and COUNT.problem(-1)
    assert FRACTION.problem(0) is None and FRACTION.problem(1) is None and FRACTION.problem(1.0001)
    assert TIME.problem(1e-9) is None and TIME.problem(0) and TIME.problem(-1)


def test_an_imported_record_keeps_its_nulls_but_not_impossible_values():
    rec = {"schema": SCHEMA, "kind": "collective", "op": None, "bytes": 4096, "nranks": None, "status": "ok",
           "time_us": 12.0, "source": {"tool": "nccl-tests"}}
    assert len(_read(rec).records) == 1
    assert _read({**rec, "time_us": -12.0}).warnings[0].endswith("time_us is -12.0, not a time (> 0); skipped")


# -- topology files: the limits of topology/links.py ---------------------------------------------------------

def _topo(n: int, link: str, index0: int = 0) -> dict:
    return {"gpus": [{"index": index0 + i} for i in range(n)],
            "links": [["X" if i == j else link for j in range(n)] for i in range(n)]}


def test_nvlink_counts_beyond_what_exists_are_refused():
    assert normalize_link("NV18") == "NV18" and normalize_link(f"NV{MAX_NVLINKS}") == f"NV{MAX_NVLINKS}"
    for bad in ("NV0", f"NV{MAX_NVLINKS + 1}", "NV999", "NV018"):
        assert normalize_link(bad) is None
        with pytest.raises(UsageError, match=f"links are NV1 to NV{MAX_NVLINKS}"):
            Topology.from_dict(_topo(2, bad))


def test_gpu_indices_beyond_what_a_table_holds_are_refused():
    Topology.from_dict(_topo(2, "NV18", index0=MAX_GPUS - 2))  # the last indices are fine
    with pytest.raises(UsageError, match=f"0 to {MAX_GPUS - 1}"):
        Topology.from_dict(_topo(2, "NV18", index0=MAX_GPUS - 1))
    with pytest.raises(UsageError, match=f"outside 0-{MAX_GPUS - 1}"):
        Topology(gpus=(Gpu(index=0), Gpu(index=MAX_GPUS)), links=(("X", "SYS"), ("SYS", "X")))


def test_a_topo_m_file_with_an_absurd_link_is_one_line(tmp_path):
    text = ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tNV99\t0-7\t0\n"
            "GPU1\tNV99\t X \t0-7\t0\n")
    (tmp_path / "topo.txt").write_text(text)
    code, _, err = run_cli_subprocess(["topo", "--topo-file", tmp_path / "topo.txt"])
    assert code == 2 and err.count("\n") == 1 and "NV99" in err and "Traceback" not in err


# -- a damaged study folder: one line from every command that reads it ---------------------------------------

def _damaged(tmp_path: Path, name: str, change) -> Path:
    out = tmp_path / name
    shutil.copytree(STUDY, out)
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in map(change, lines) if r is not None))
    return out


def _plan(edit):
    def change(r):
        if r["kind"] == "plan":
            edit(r["study"])
        return r
    return change


DAMAGE = {
    "a count that is text": _plan(lambda s: s["config"].update(nprocs="x")),
    "no settings": _plan(lambda s: s.update(config={})),
    "a list that is text": _plan(lambda s: s["config"].update(fabrics="default")),
    "a unit without a name": _plan(lambda s: s.update(units=[{"name": 5}])),
    "no plan": lambda r: None if r["kind"] == "plan" else r,
}


COMMANDS = (["report", "{out}"], ["report", "{out}", "--json"], ["study", "--out", "{out}", "--resume"],
            ["advise", "--results", "{out}", "--num-gpus", "2", "--model", "tiny-mistral"])


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_study_folder_is_one_line_from_every_command(tmp_path, damage):
    out = _damaged(tmp_path, "s", DAMAGE[damage])
    # every command in one fresh process (one start instead of four), each through clirun as in-process tests
    # run the CLI; what each said comes back as one JSON line
    script = ("import json, sys\nfrom clirun import run_cli_captured\n"
              "print(json.dumps([run_cli_captured(argv) for argv in json.loads(sys.argv[1])]))\n")
    argv = [[a.format(out=out) for a in cmd] for cmd in COMMANDS]
    path = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    r = subprocess.run([sys.executable, "-c", script, json.dumps(argv)], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": path})
    assert r.returncode == 0, r.stderr
    said = json.loads(r.stdout.splitlines()[-1])
    assert len(said) == len(COMMANDS), r.stdout
    for cmd, (code, _, err) in zip(COMMANDS, said):
        assert code == 2, (cmd, err)
        line = one_error_line(err, " ".join(cmd))
        assert "plan record" in line or "no study" in line or "plan" in line, line
