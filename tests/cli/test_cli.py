"""The command-line surface: frozen option names, --help speed, and one line + exit 2 for bad input."""

import importlib.util
import os
import subprocess
import sys

import pytest

from fabricbench.cli import COMMANDS
from clirun import refused, run_cli, run_cli_subprocess

SWEEP_OPTIONS = {"--stall-timeout", "--gpus", "--ops", "--sizes", "--dtype", "--iters", "--warmup", "--adaptive", "--max-iters",
                 "--inplace", "--out-of-place", "--both", "--graph", "--graph-iters", "--check", "--engine", "--device",
                 "--backend", "--nprocs", "--timeout", "--nccl-lib", "--fabric", "--seed", "--out", "--json",
                 "--csv", "--dry-run", "--quiet", "--list-ops", "--buffers", "--timing", "--alloc", "--resume", "--gap",
                 "--for-trace", "--help", "-h"}


def test_sweep_surface_is_frozen():
    from fabricbench.cli.sweep import sweep

    names = {opt for p in sweep.params for opt in p.opts + p.secondary_opts}
    assert names | {"--help", "-h"} == SWEEP_OPTIONS, "options changed: update this list on purpose"


IMPORT_OPTIONS = {"--out", "--json", "--fabric", "--nranks", "--help"}


def test_import_surface_is_frozen():
    from fabricbench.cli import COMMANDS
    from fabricbench.cli.importer import importer

    names = {opt for p in importer.params for opt in p.opts + p.secondary_opts if opt.startswith("-")}
    assert names | {"--help"} == IMPORT_OPTIONS, "options changed: update this list on purpose"
    assert importer.name == "import" and COMMANDS["import"][0] == "fabricbench.cli.importer:importer"
    assert [p.name for p in importer.params if not p.opts[0].startswith("-")] == ["files"]


def test_commands_table():
    assert {"sweep", "topo", "fabrics", "compare", "scaling", "p2p", "train", "estimate"} <= set(COMMANDS)


def test_help_imports_no_torch():
    # how fast it answers (0.5 s) is a wall-clock figure: benchmarks/startup/times.py measures it
    code = ("import sys; from fabricbench.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "assert 'torch' not in sys.modules, 'torch imported by --help'\n"
            "assert 'fabricbench.cli.sweep' not in sys.modules\n"
            "print('imported', len(sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1].startswith("imported ")


def test_import_fabricbench_is_light():
    code = "import sys, fabricbench; assert 'torch' not in sys.modules; assert 'numpy' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


BAD = [
    (["sweep", "--gpus", "0,0", "--dry-run"], "more than once"),
    (["sweep", "--gpus", "", "--dry-run"], "--gpus is empty"),
    (["sweep", "--gpus", "x", "--dry-run"], "cannot read GPU list"),
    (["sweep", "--sizes", "abc"], "cannot read size"),
    (["sweep", "--sizes", "0"], "zero"),
    (["sweep", "--sizes", "1G-1M"], "descends"),
    (["sweep", "--ops", "allreduce"], "unknown op"),
    (["sweep", "--dtype", "float8"], "unknown dtype"),
    (["sweep", "--iters", "0"], "--iters 0 is outside 1 to 10,000,000"),
    (["sweep", "--iters", "-3"], "--iters -3 is outside 1 to 10,000,000"),
    (["sweep", "--engine", "foo"], "--engine foo: choose native or torch"),
    (["sweep", "--nprocs", "0", "--engine", "torch"], "--nprocs 0 is outside 1 to 4,096"),
    (["sweep", "--timeout", "0"], "--timeout 0 is outside [1, 604800 (7 days)] s"),
    (["sweep", "--adaptive", "2"], "--adaptive 2 is outside (0, 1)"),
    (["sweep", "--bogus"], "No such option"),
    (["sweep", "--iters", "many"], "--iters 'many' is not a whole number"),
    (["sweep", "--engine", "torch", "--backend", "gloo", "--nprocs", "2", "--out", "/proc/nope/x.jsonl"],
     "cannot write"),
    (["nosuchcommand"], "No such command"),
    (["sweep", "--iters", "\u0661\u0662"], "is not a whole number (ASCII digits"),  # Arabic-Indic 12
    (["sweep", "--sizes", "1K,,4K"], "empty item"),
    (["sweep", "--timeout", "1e308"], "is outside [1, 604800 (7 days)] s"),
    (["sweep", "--timeout", "inf"], "--timeout 'inf' is not a number"),
    (["sweep", "--nccl-lib", "/nonexistent/libnccl.so.2"], "no such file"),
]


@pytest.mark.parametrize("args,msg", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_exit_2(args, msg, capsys):
    # in this process (main, as `python -m fabricbench` calls it); tests/cli/test_bad_inputs.py's
    # test_bad_input_as_a_user_sees_it runs the same path in a fresh process
    assert msg in refused(args, capsys)


def test_no_gpu_visible_names_the_cpu_alternative():
    code, _, err = run_cli_subprocess(["sweep", "--sizes", "8"], env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert code == 2
    assert err.strip() == ("Error: no CUDA GPU is visible for engine native; on CPU, run with "
                                  "`fabricbench sweep --engine torch --backend gloo --nprocs 2`")


def test_gpus_out_of_range_shows_arithmetic(monkeypatch, capsys):
    import fabricbench.gpus

    monkeypatch.setattr(fabricbench.gpus, "visible_gpu_count", lambda: 8)
    code, _, err = run_cli(["sweep", "--gpus", "0-9", "--sizes", "8"], capsys)
    assert code == 2
    assert err.strip() == \
        "Error: --gpus 0-9 names 10 GPU(s) up to 9 but 8 are visible (0-7)"


def test_dry_run_prints_plan_without_gpu():
    code, out, err = run_cli_subprocess(["sweep", "--gpus", "0-3", "--sizes", "8-1K:x4", "--ops", "all_gather",
                                         "--dry-run"], env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert code == 0, err
    assert "4 rank(s)" in out and "4 measurements" in out
    assert "waived" in out  # 8 B of float32 cannot give 4 ranks an element each
    row = next(line.split() for line in out.splitlines() if " 128B " in line)
    assert row == ["all_gather", "out", "128B", "128", "32", "8", "32", "128"]  # S, count, nccl_count, send, recv
    # no --gpus and no GPU here: the plan for one GPU, said on stderr
    code, out, err = run_cli_subprocess(["sweep", "--sizes", "1K", "--ops", "all_reduce", "--dry-run"],
                                        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert code == 0 and "1 rank(s)" in out and "plan for one GPU" in err, err


@pytest.mark.skipif(importlib.util.find_spec("fabricbench._engine") is None, reason="native engine not built")
def test_nccl_lib_that_is_not_nccl(tmp_path):
    import ctypes.util

    libm = ctypes.util.find_library("m")
    path = next(p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib64/libm.so.6", "/lib64/libm.so.6")
                if os.path.exists(p)) if libm else None
    code, _, err = run_cli_subprocess(["sweep", "--nccl-lib", path])
    assert code == 2
    assert err.startswith("Error: --nccl-lib: ") and "not an NCCL library" in err


def test_bare_fabricbench_prints_readable_help():
    # the first command a newcomer types: the help, one entry a line, not one squashed `Error: Usage:` line
    code, out, err = run_cli_subprocess([], env={**os.environ, "COLUMNS": "80"}, timeout=60)
    assert code == 0 and err == "", (code, err)
    lines = out.splitlines()
    assert lines[0].startswith("Usage: fabricbench") and "Error" not in out
    assert any(ln.split()[:1] == ["sweep"] for ln in lines) and any(ln.split()[:1] == ["qualify"] for ln in lines)
    assert max(map(len, lines)) <= 80


def test_train_quiet_prints_nothing_and_still_runs_and_writes(monkeypatch, capsys):
    """train takes --quiet as sweep, study and qualify do: no line per run, no table, no progress; the runs
    and their records are the same (run_train is called, and told to keep quiet)."""
    import fabricbench.cli.train as train_cli
    from fabricbench.training.result import TrainRunResult

    got = {}

    def fake_run(config, *, out, echo, quiet, since):
        got.update(quiet=quiet, strategies=config.strategies, since=since > 0)
        rec = {"strategy": "ddp", "status": "ok", "model": "tiny-mistral"}
        echo(rec)
        return TrainRunResult(records=())

    monkeypatch.setattr(train_cli, "run_train", fake_run)
    code, out, err = run_cli(["train", "--device", "cpu", "--strategies", "ddp", "--model", "tiny-mistral", "--quiet"],
                             capsys)
    assert code == 0, err
    assert out == err == "" and got == {"quiet": True, "strategies": "ddp", "since": True}
