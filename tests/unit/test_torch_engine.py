"""The torch engine on gloo with several local processes: real sweeps, values checked."""

import dataclasses
import json
import os
import socket
import subprocess
import sys

import pytest

from fabricbench.collectives import COLLECTIVES
from fabricbench.measuring.api import make_config
from fabricbench.measuring.runner import run_sweep
from fabricbench.results.writer import ResultWriter, read_results
from clirun import run_cli_subprocess

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")


@pytest.fixture(scope="module")
def gloo_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "r.jsonl"
    config = make_config(engine="torch", backend="gloo", nprocs=2, ops=OPS, sizes="1K-256K:x16", iters=6,
                         warmup=1, check=True, inplace="both", timeout_s=60)
    with ResultWriter(out) as w:
        results = run_sweep(config, writer=w)
    return results, out


def test_every_case_measured_and_checked(gloo_results):
    results, _ = gloo_results
    ran = [r for r in results if r.status != "waived"]
    waived = [r for r in results if r.status == "waived"]
    # 5 ops x 2 modes x 3 sizes, less all_to_all in place (waived)
    assert len(ran) == 27 and len(waived) == 3
    assert all(r.op == "all_to_all" and r.inplace for r in waived)
    for r in ran:
        assert r.status == "ok" and r.wrong == 0, (r.op, r.bytes, r.inplace, r.wrong)
        assert r.nranks == 2 and r.iters == 6 and r.engine == "torch" and r.backend == "gloo"
        assert r.gpus == [] and r.extra["hosts"] == [socket.gethostname()]  # CPU ranks, one host


def test_bandwidth_formulas_hold_on_every_record(gloo_results):
    results, _ = gloo_results
    for r in results:
        if r.status == "waived":
            continue
        assert r.min_us <= r.time_us <= r.max_us and r.min_us <= r.p95_us <= r.max_us
        assert r.algbw_gbps == pytest.approx(r.bytes / (r.time_us * 1e-6) / 1e9)
        factor = COLLECTIVES.get(r.op).busbw_factor(2)
        assert r.busbw_factor == factor
        assert r.busbw_gbps == pytest.approx(r.algbw_gbps * factor)
        assert r.count * 4 == r.bytes


def test_records_are_in_the_file_in_the_common_schema(gloo_results):
    results, out = gloo_results
    recs = list(read_results(out, kind="collective"))
    assert len(recs) == len(results)
    assert [r["bytes"] for r in recs] == [r.bytes for r in results]
    assert all(r["schema"] == "fabricbench/1" and r["engine"] == "torch" for r in recs)


def test_check_catches_a_wrong_result():
    """A collective whose expectation is off by one must report every element wrong."""
    from fabricbench.measuring.engines.torch_engine import TorchSession
    from fabricbench.measuring.plan import build_plan

    config = make_config(engine="torch", backend="gloo", ops=["all_reduce"], sizes="4K", check=True)
    session = TorchSession(config, None)
    try:
        case = build_plan(config, 1, seed=1234)[0].case
        coll = COLLECTIVES.get("all_reduce")
        assert session.measure(case).wrong == 0
        broken = dataclasses.replace(coll, expected=lambda inputs, rank, n, part: inputs(0, 0, part) + 1)
        import torch

        assert session._check(case, broken, torch.float32) == case.count
    finally:
        session.close()


def test_three_ranks_round_split_sizes_down(tmp_path):
    config = make_config(engine="torch", backend="gloo", nprocs=3, ops=["all_gather", "reduce_scatter"],
                         sizes="1000", iters=3, warmup=0, check=True, dtype="bfloat16")
    results = run_sweep(config)
    for r in results:
        # 1000 B of bfloat16 = 500 elements -> 166 per rank -> 498 elements moved
        assert (r.count, r.bytes, r.wrong, r.nranks) == (498, 996, 0, 3)
        assert r.busbw_gbps == pytest.approx(r.algbw_gbps * 2 / 3)


def test_adaptive_mode_runs_more_iterations():
    config = make_config(engine="torch", backend="gloo", nprocs=2, ops=["all_reduce"], sizes="64K", iters=6,
                         warmup=1, adaptive=1e-6, max_iters=18)
    (r,) = run_sweep(config)
    assert r.iters == 18 and r.extra["adaptive_converged"] is False


def test_sweep_cli_on_gloo_writes_jsonl_and_csv(tmp_path):
    out, csv_path = tmp_path / "r.jsonl", tmp_path / "r.csv"
    code, stdout, err = run_cli_subprocess(["sweep", "--engine", "torch", "--backend", "gloo", "--nprocs", "2",
                                            "--ops", "all_reduce", "--sizes", "1K,64K", "--iters", "4", "--check",
                                            "--out", out, "--csv", csv_path], timeout=180)
    assert code == 0, err
    assert "all_reduce" in stdout and "busbw" in stdout
    recs = list(read_results(out, kind="collective"))
    assert [r["bytes"] for r in recs] == [1024, 65536] and all(r["wrong"] == 0 for r in recs)
    assert len(csv_path.read_text().splitlines()) == 3


def test_library_and_cli_sweeps_in_one_torchrun_launch(tmp_path):
    """One rank per process under torchrun, one launch (each costs an agent and two ranks' imports): two
    library sweeps, then `fabricbench sweep --out` (main, as `torchrun -m fabricbench` calls it). The ranks
    share the agent's store for the whole launch: a later sweep must not read an earlier one's run id or
    communicator keys (it used to hang until --timeout); rank 0 alone writes --out."""
    out = tmp_path / "r.jsonl"
    code = ("import json, sys, fabricbench\n"
            "from fabricbench.cli import main\n"
            "for op in ('all_reduce', 'all_gather'):\n"
            "    cfg = fabricbench.SweepConfig(engine='torch', backend='gloo', ops=[op], sizes='4K', iters=3,\n"
            "                                  check=True, timeout_s=60)\n"
            "    rows = fabricbench.sweep(cfg).records\n"
            "    if rows:  # rank 0's (the others get none); one write, so the ranks' lines do not interleave\n"
            "        print(f'ROWS {json.dumps([[r.op, r.nranks, r.wrong] for r in rows])}', flush=True)\n"
            "try:\n"
            "    main(['sweep', '--engine', 'torch', '--backend', 'gloo', '--ops', 'all_gather', '--sizes', '4K',\n"
            "          '--iters', '3', '--check', '--quiet', '--out', sys.argv[1]])\n"
            "except SystemExit as e:\n"
            "    sys.exit(e.code)\n")
    # TMPDIR: the test's own torchrun (standing in for the user's) keeps its torchelastic_* folder there
    env = {**{k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")},
           "TMPDIR": str(tmp_path)}
    with socket.socket() as s:  # a port nobody holds, so parallel runs do not collide
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    script = tmp_path / "three.py"
    script.write_text(code)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                           "--master-port", port, str(script), str(out)], capture_output=True, text=True,
                          timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = [json.loads(ln[5:]) for ln in proc.stdout.splitlines() if ln.startswith("ROWS ")]
    assert got == [[["all_reduce", 2, 0]], [["all_gather", 2, 0]]]
    recs = list(read_results(out, kind="collective"))
    assert len(recs) == 1  # rank 0 alone writes
    assert recs[0]["nranks"] == 2 and recs[0]["wrong"] == 0


def test_json_output_is_one_object_per_line(tmp_path):
    code, stdout, err = run_cli_subprocess(["sweep", "--engine", "torch", "--backend", "gloo", "--nprocs", "2",
                                            "--ops", "reduce_scatter", "--sizes", "8K", "--iters", "3", "--json"],
                                           timeout=180)
    assert code == 0, err
    lines = [json.loads(ln) for ln in stdout.splitlines() if ln.startswith("{")]
    assert len(lines) == 1 and lines[0]["op"] == "reduce_scatter" and lines[0]["bytes"] == 8192


def test_library_api_measure_sweep_dataframe():
    import fabricbench

    cpu = fabricbench.SweepConfig(engine="torch", backend="gloo", nprocs=2, iters=3)
    r = fabricbench.measure("all_gather", "64K", dataclasses.replace(cpu, check=True, inplace="inplace"))
    assert isinstance(r, fabricbench.CollectiveResult) and r.op == "all_gather" and r.bytes == 65536
    assert r.wrong == 0 and r.to_dict()["schema"] == "fabricbench/1" and r.inplace is True
    with pytest.raises(fabricbench.UsageError, match="not \"both\""):
        fabricbench.measure("all_gather", "64K", dataclasses.replace(cpu, inplace="both"))
    rows = fabricbench.sweep(dataclasses.replace(cpu, sizes="1K,4K", ops="all_reduce"))
    assert isinstance(rows, fabricbench.SweepResult) and [x.bytes for x in rows.records] == [1024, 4096]
    assert rows.to_dict() == [x.to_dict() for x in rows.records] and rows.out is None
    pd = pytest.importorskip("pandas")
    df = fabricbench.to_dataframe(rows)
    assert isinstance(df, pd.DataFrame) and list(df["bytes"]) == [1024, 4096]
