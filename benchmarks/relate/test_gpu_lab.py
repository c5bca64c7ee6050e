"""The one-GPU relate lab's own script (gpu_lab.py): its sweep plan from a trace, and its check re-reading
a committed H100 run. Tests of the lab script, beside it, so that tests/ never reads benchmarks/:
    python3 -m pytest -q -n 0 benchmarks/relate
"""

from __future__ import annotations

import json
from pathlib import Path


def _trace(*colls):
    return [{"kind": "train", "comm": {"collectives": [
        {"op": op, "bytes": b, "dtype": dt, "group_size": n, "calls_per_step": 1.0} for op, b, dt, n in colls]}}]


def _gpu_lab():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent / "gpu_lab.py"
    spec = importlib.util.spec_from_file_location("relate_gpu_lab", path)
    gpu_lab = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_lab)
    return gpu_lab


def test_gpu_lab_check_rereads_a_run_without_rewriting_its_files(tmp_path, capsys):
    """check --reread on a committed H100 run of the script's defaults (12 points, two runs a rate): today's
    relate's figures, the reference steps, and the run's own relate.txt left as it was. The figures are the
    records', so a change to relate that moves them shows here."""
    import shutil
    from pathlib import Path

    src = Path(__file__).resolve().parent / "results" / "h100-2026-12-06" / "three-strategies-a"
    shutil.copytree(src / "lab", tmp_path / "lab")
    (tmp_path / "relate.txt").write_text("as the run wrote it\n")
    gpu_lab = _gpu_lab()
    asked = gpu_lab._asked("zero2,fsdp,ddp", "3", "4gbit,2gbit,3gbit,6gbit")
    assert gpu_lab.check(tmp_path, asked, write=False) == 0
    out = capsys.readouterr().out
    assert ("figures: 12 held-out points: median |error| 2.4%, largest 6.4%; coverage: 12 of 12 observed steps "
            "inside their predicted 95% interval (100%)") in out
    assert "reference steps (under every point of their strategy; not judged): zero2 n=3 16.6 ms" in out
    assert (tmp_path / "relate.txt").read_text() == "as the run wrote it\n"
    assert not (tmp_path / "relate.json").exists()
    gpu_lab.check(tmp_path, asked)  # the lab's own call writes relate's outputs
    assert (tmp_path / "relate.json").exists() and "overlap window" in (tmp_path / "relate.txt").read_text()


def test_gpu_lab_plan_sweeps_each_traced_dtype_but_folds_latency_bound_flags(tmp_path, capsys):
    """gpu_lab.py plan: bfloat16 and float32 each get their own sweep; int64 calls of 8 B
    (latency-bound) are swept with the dtype of the most bytes, which then reaches down to 8 B."""
    gpu_lab = _gpu_lab()
    rec = dict(_trace(("all_reduce", 2 << 20, "bfloat16", 3), ("all_gather", 1 << 20, "bfloat16", 3),
                      ("all_reduce", 1 << 20, "float32", 3), ("all_reduce", 8, "int64", 3))[0], status="ok")
    f = tmp_path / "train.jsonl"
    f.write_text(json.dumps(rec) + "\n")
    assert gpu_lab.plan([str(f)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "# int64: every call at most 8 B (latency-bound): swept as bfloat16"
    plan = {ln.split()[0]: ln.split()[1:] for ln in lines[1:]}
    assert plan["bfloat16"] == ["all_gather,all_reduce", "8,32,128,512,2048,8192,32768,131072,524288,2097152"]
    assert plan["float32"] == ["all_reduce", "1048576"]
