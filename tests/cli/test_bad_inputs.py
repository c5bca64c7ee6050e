"""Every bad input in every command: one line `Error: ...`, exit status 2, no traceback, nothing measured.

The table is data: (command line, a distinctive part of the message). Cases run in-process through
tests/clirun.py's run_cli (fast); a few also run as real processes to prove the exit status and the stderr a
user sees. The machine is made to look GPU-less (visible_gpu_count -> 0) unless a case says otherwise, so
the table means the same on a GPU machine: no case may start a measurement there either.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clirun import one_error_line, refused, run_cli_subprocess
from roots import DATA

TOPO = str(DATA / "topo" / "h200_nvl_two_quads.txt")
GLOO = ["--engine", "torch", "--backend", "gloo"]
SWEEP = ["sweep", *GLOO, "--nprocs", "2", "--sizes", "1K"]
COMPARE = ["compare", "--fabrics", "default", *GLOO, "--nprocs", "2", "--sizes", "1K"]
SCALING = ["scaling", *GLOO]
TRAIN = ["train", "--device", "cpu", "--model", "tiny-mistral"]
EST = ["estimate", "--model", "tiny-mistral"]
NO_DIR = "/proc/nonexistent-dir"

# (args, message part); {tmp} is replaced by the files made in `files` below.
CASES: list[tuple[list[str], str]] = [
    # outputs that collide with each other or with an input
    ([*SWEEP, "--out", "{tmp}/r.jsonl", "--csv", "{tmp}/r.jsonl"], "--out and --csv both name"),
    ([*COMPARE, "--out", "{tmp}/c.jsonl", "--plot", "{tmp}/c.jsonl"], "--plot"),
    (["topo", "--topo-file", TOPO, "--out", TOPO], "is also the input --topo-file"),
    (["p2p", "--out", "{tmp}/p.png", "--plot", "{tmp}/p.png"], "both name"),
    ([*SWEEP, "--out", "{tmp}"], "is a folder; give a file name"),
    # sweep: sizes
    (["sweep", "--sizes", "99999999999999999999999", "--dry-run"], "beyond the largest size"),
    (["sweep", "--sizes", "-8", "--dry-run"], "cannot be negative"),
    (["sweep", "--sizes", "8--16", "--dry-run"], "size '-16' is negative"),
    (["sweep", "--sizes", "64K,-8", "--dry-run"], "is negative"),
    (["sweep", "--sizes", "1.5", "--dry-run"], "not a whole number of bytes"),
    (["sweep", "--sizes", "1M-1G:x1", "--dry-run"], "bad factor"),
    (["sweep", "--sizes", " ", "--dry-run"], "--sizes is empty"),
    (["sweep", "--sizes", "abc", "--dry-run"], "cannot read size 'abc'"),
    (["sweep", "--sizes", "0", "--dry-run"], "is zero"),
    (["sweep", "--sizes", "1G-1M", "--dry-run"], "descends"),
    # sweep: timing and iteration counts
    ([*SWEEP, "--timeout", "nan"], "--timeout 'nan' is not a number"),
    ([*SWEEP, "--timeout", "inf"], "--timeout 'inf' is not a number"),
    ([*SWEEP, "--timeout", "0"], "--timeout 0 is outside [1, 604800 (7 days)] s"),
    ([*SWEEP, "--timeout", "-1"], "--timeout -1 is outside [1, 604800 (7 days)] s"),
    ([*SWEEP, "--adaptive", "0.02", "--max-iters", "0"], "--max-iters 0 is outside 1 to 10,000,000"),
    ([*SWEEP, "--adaptive", "0.02", "--max-iters", "5"], "--max-iters 5 is below --iters 20"),
    ([*SWEEP, "--adaptive", "0"], "--adaptive 0 is outside (0, 1)"),
    ([*SWEEP, "--adaptive", "nan"], "--adaptive 'nan' is not a number"),
    ([*SWEEP, "--iters", "0"], "--iters 0 is outside 1 to 10,000,000"),
    ([*SWEEP, "--iters", "99999999999"], "--iters 99999999999 is outside 1 to 10,000,000"),
    ([*SWEEP, "--warmup", "-1"], "--warmup -1 is outside 0 to 10,000,000"),
    ([*SWEEP, "--max-iters", "-5"], "--max-iters -5"),
    ([*SWEEP, "--graph-iters", "0"], "--graph-iters 0"),
    ([*SWEEP, "--seed", "-1"], "--seed -1"),
    # sweep: processes, engines, GPUs
    (["sweep", *GLOO, "--nprocs", "10000", "--sizes", "1K"], "--nprocs 10000 is outside 1 to 4,096"),
    (["sweep", *GLOO, "--nprocs", "0"], "--nprocs 0 is outside 1 to 4,096"),
    (["sweep", *GLOO, "--nprocs", "-3"], "--nprocs -3 is outside 1 to 4,096"),
    (["sweep", "--engine", "torch", "--backend", "mpi"], "--backend mpi: choose nccl or gloo"),
    (["sweep", "--backend", "gloo"], "applies to --engine torch only"),
    (["sweep", "--engine", "foo"], "--engine foo: choose native or torch"),
    (["sweep", "--ops", "allreduce"], "unknown op 'allreduce'"),
    (["sweep", "--ops", ","], "--ops ',' has an empty item"),
    (["sweep", "--dtype", "float8"], "unknown dtype 'float8'"),
    (["sweep", "--gpus", "0-99999999999", "--dry-run"], "past any one host's GPUs"),
    (["sweep", "--gpus", "3-1", "--dry-run"], "descends"),
    (["sweep", "--gpus", "0,0", "--dry-run"], "more than once"),
    (["sweep", "--sizes", "1K"], "no CUDA GPU is visible for engine native; on CPU, run with `fabricbench sweep --engine torch"),
    (["sweep", "--engine", "torch", "--backend", "nccl", "--sizes", "1K"], "no CUDA GPU is visible"),
    (["sweep", "--nccl-lib", "/nonexistent/libnccl.so.2"], "no such file"),
    (["sweep", "--iters", "many"], "--iters 'many' is not a whole number"),
    (["sweep", "--timeout", "soon"], "--timeout 'soon' is not a number"),
    (["sweep", "--bogus"], "No such option"),
    # sweep: outputs, checked before anything runs
    ([*SWEEP, "--out", f"{NO_DIR}/x.jsonl"], "--out"),
    ([*SWEEP, "--csv", f"{NO_DIR}/x.csv"], "--csv"),
    # topo, fabrics
    (["topo", "--topo-file", "/nonexistent.txt"], "no such file"),
    (["topo", "--topo-file", TOPO, "--gpus", "0-99"], "names GPU 8-99 but the topology has 8 GPU(s) (0-7)"),
    (["topo", "--topo-file", TOPO, "--gpus", "x"], "cannot read GPU list"),
    (["topo", "--topo-file", TOPO, "--out", f"{NO_DIR}/t.jsonl"], "cannot write"),
    (["fabrics", "--bogus"], "No such option"),
    (["fabrics", "extra"], "unexpected extra argument"),
    # compare
    ([*COMPARE, "--timeout", "0"], "--timeout 0 is outside [1, 604800 (7 days)] s"),
    ([*COMPARE, "--timeout", "nan"], "--timeout 'nan' is not a number"),
    ([*COMPARE, "--iters", "0"], "--iters 0"),
    ([*COMPARE, "--sizes", "-8"], "cannot be negative"),
    ([*COMPARE, "--nprocs", "10000"], "--nprocs 10000 is outside 1 to 4,096"),
    (["compare", "--fabrics", "nvlink"], "unknown fabric 'nvlink'"),
    (["compare", "--fabrics", "x:BAD"], "'BAD' is not VAR=VALUE"),
    (["compare", "--fabrics", ""], "--fabrics is empty"),
    (["compare", "--fabrics", "default", "--ops", "all_mix"], "unknown op 'all_mix'"),
    (["compare", "--fabrics", "default"], "no CUDA GPU is visible"),
    ([*COMPARE, "--plot", f"{NO_DIR}/c.png"], "cannot write there"),
    ([*COMPARE, "--plot", "{tmp}/c.txt"], "name it *.png"),
    ([*COMPARE, "--plot", "{tmp}/folder.png"], "is a folder"),
    ([*COMPARE, "--out", f"{NO_DIR}/c.jsonl"], "--out"),
    # scaling
    ([*SCALING, "--num-gpus", "-2"], "--num-gpus -2 is outside 2 to 1,024"),
    ([*SCALING, "--num-gpus", "abc"], "'abc' is not a whole number"),
    ([*SCALING, "--num-gpus", "10000"], "--num-gpus 10000 is outside 2 to 1,024"),
    ([*SCALING, "--num-gpus", "2,2"], "--num-gpus '2,2' names a number twice"),
    ([*SCALING, "--num-gpus", "1"], "--num-gpus 1 is outside 2 to 1,024"),
    ([*SCALING, "--num-gpus", "2", "--timeout", "inf"], "--timeout 'inf' is not a number"),
    ([*SCALING, "--num-gpus", "2", "--plot", f"{NO_DIR}/s.png"], "cannot write there"),
    ([*SCALING, "--topo-file", "/nonexistent.txt"], "no such file"),
    ([*SCALING, "--topo-file", TOPO, "--gpus", "0-3", "--num-gpus", "2,8"], "8 is more than the 4 GPUs"),
    # p2p
    (["p2p", "--size", "abc"], "cannot read size 'abc'"),
    (["p2p", "--size", "-8"], "is negative"),
    (["p2p", "--size", "99999999999999999999999"], "beyond the largest size"),
    (["p2p", "--iters", "0"], "iters 0"),
    (["p2p", "--warmup", "-1"], "warmup -1"),
    (["p2p", "--no-host", "--no-peer"], "leave nothing to measure"),
    (["p2p", "--plot", "{tmp}/p.txt"], "name it *.png"),
    (["p2p", "--gpus", "1-0"], "descends"),
    # train: the model
    ([*TRAIN[:3], "--model-config", "{tmp}/bad.json"], "not valid JSON"),
    ([*TRAIN[:3], "--model-config", "{tmp}/binary.json"], "not a text file"),
    ([*TRAIN[:3], "--model-config", "{tmp}/unknown.json"], "cannot build model_type 'nosuchmodel'"),
    ([*TRAIN[:3], "--model-config", "{tmp}/list.json"], "no \"model_type\" field"),
    ([*TRAIN[:3], "--model-config", "{tmp}/missing.json"], "no such file"),
    ([*TRAIN[:3], "--model-path", "{tmp}/noconfig"], "no config.json there"),
    ([*TRAIN[:3], "--model-path", "{tmp}/badconfig"], "not valid JSON"),
    (["train", "--device", "cpu"], "name exactly one of --model"),
    ([*TRAIN, "--model-config", "{tmp}/bad.json"], "name exactly one of --model"),
    (["train", "--device", "cpu", "--model", "gpt-9"], "unknown model 'gpt-9'"),
    # train: numbers
    ([*TRAIN, "--timeout", "0"], "--timeout 0 is outside [1, 604800 (7 days)] s"),
    ([*TRAIN, "--timeout", "-1"], "--timeout -1 is outside [1, 604800 (7 days)] s"),
    ([*TRAIN, "--timeout", "nan"], "--timeout 'nan' is not a number"),
    ([*TRAIN, "--lr", "-1"], "--lr -1 is outside (0, 10]"),
    ([*TRAIN, "--lr", "0"], "--lr 0 is outside (0, 10]"),
    ([*TRAIN, "--lr", "inf"], "--lr 'inf' is not a number"),
    ([*TRAIN, "--nprocs", "10000"], "--nprocs 10000 is outside 1 to 4,096"),
    ([*TRAIN, "--nprocs", "0"], "--nprocs 0"),
    ([*TRAIN, "--batch-size", "0"], "--batch-size 0 is outside 1 to 1,048,576"),
    ([*TRAIN, "--batch-size", "99999999999"], "--batch-size 99999999999 is outside 1 to 1,048,576"),
    ([*TRAIN, "--seq-len", "0"], "--seq-len 0"),
    ([*TRAIN, "--image-size", "0"], "--image-size 0"),
    ([*TRAIN, "--steps", "4", "--warmup-steps", "3"], "leaves 1 timed step"),
    ([*TRAIN, "--warmup-steps", "0"], "--warmup-steps 0 is outside 1 to 100,000"),
    ([*TRAIN, "--steps", "99999999"], "--steps 99999999"),
    ([*TRAIN, "--strategy", "zero9"], "unknown strategy 'zero9'"),
    ([*TRAIN, "--strategies", ","], "--strategies ',' has an empty item"),
    ([*TRAIN, "--fabric", "nosuch"], "unknown fabric 'nosuch'"),
    ([*TRAIN, "--master-port", "70000"], "--master-port 70000 is outside 1 to 65,535"),
    ([*TRAIN, "--node-rank", "2"], "0 <= node-rank < nnodes"),
    (["train", "--device", "cpu", "--model", "tiny-dinov2", "--dataset", "{tmp}/emptyds"],
     "expected class subfolders"),
    ([*TRAIN, "--dataset", "{tmp}/bad.json"], "make no window of --seq-len 512"),
    ([*TRAIN, "--master-addr", ""], "--master-addr is empty"),
    (["train", "--model", "tiny-mistral"], "no CUDA GPU is visible here"),
    ([*TRAIN, "--out", f"{NO_DIR}/t.jsonl"], "--out"),
    # estimate
    ([*EST, "--gpus", "2", "--batch-size", "-1"], "--batch-size -1 is outside 1 to 1,048,576"),
    ([*EST, "--gpus", "2", "--batch-size", "1", "--seq-len", "0"], "--seq-len 0"),
    ([*EST, "--gpus", "2", "--image-size", "0"], "--image-size 0"),
    ([*EST, "--gpus", "99999999999999999999"], "--gpus 99999999999999999999 is outside 1 to 1,048,576"),
    ([*EST, "--gpus", "0"], "--gpus 0 is outside 1 to 1,048,576"),
    ([*EST, "--gpus", "-1"], "--gpus -1"),
    ([*EST, "--gpus", "2", "--recipe", "fp8"], "unknown recipe 'fp8'"),
    ([*EST], "Missing option '--gpus'"),
    (["estimate", "--model", "gpt-9", "--gpus", "2"], "unknown model 'gpt-9'"),
    (["estimate", "--gpus", "2"], "name exactly one of --model"),
    (["estimate", "--model-config", "{tmp}/bad.json", "--gpus", "2"], "not valid JSON"),
    (["estimate", "--model-config", "{tmp}/binary.json", "--gpus", "2"], "not a text file"),
    (["estimate", "--model-config", "{tmp}/unknown.json", "--gpus", "2"], "model_type 'nosuchmodel'"),
    (["estimate", "--model-config", "{tmp}/missing.json", "--gpus", "2"], "no such file"),
    # the group
    (["nosuchcommand"], "No such command"),
]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "bad.json").write_text("{bad json")
    (tmp_path / "binary.json").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "unknown.json").write_text('{"model_type": "nosuchmodel"}')
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "noconfig").mkdir()
    (tmp_path / "badconfig").mkdir()
    (tmp_path / "badconfig" / "config.json").write_text("{")
    (tmp_path / "folder.png").mkdir()
    (tmp_path / "emptyds").mkdir()
    return tmp_path


def _args(args: list[str], tmp: Path) -> list[str]:
    return [a.replace("{tmp}", str(tmp)) for a in args]


@pytest.fixture
def no_gpu(monkeypatch):
    import fabricbench.gpus

    monkeypatch.setattr(fabricbench.gpus, "visible_gpu_count", lambda: 0)


def test_the_table_is_large_and_covers_every_command():
    commands = {a[0] for a, _ in CASES}
    assert {"sweep", "topo", "fabrics", "compare", "scaling", "p2p", "train", "estimate"} <= commands
    assert len(CASES) >= 60
    assert len({tuple(a) for a, _ in CASES}) == len(CASES), "a case is listed twice"


@pytest.mark.parametrize("args,msg", CASES, ids=[" ".join(a)[:80] for a, _ in CASES])
def test_bad_input_in_process(args, msg, files, no_gpu, capsys, monkeypatch):
    # no rank, child sweep or torchrun may start: one would mean the input got past the checks
    # (look-ups such as `ldconfig -p` are fine)
    popen = subprocess.Popen

    def refuse(argv, *a, **k):
        assert not (isinstance(argv, (list, tuple)) and argv and argv[0] == sys.executable), \
            f"a Python process was started for a bad input: {argv}"
        return popen(argv, *a, **k)

    monkeypatch.setattr(subprocess, "Popen", refuse)
    line = refused(_args(args, files), capsys)
    assert msg in line, line


SUBPROCESS = [
    (["sweep", "--sizes", "99999999999999999999999"], "beyond the largest size"),
    (["scaling", *GLOO, "--num-gpus", "-2"], "--num-gpus -2 is outside 2 to 1,024"),
    (["train", "--device", "cpu", "--model-config", "{tmp}/binary.json"], "not a text file"),
    (["estimate", "--model", "mistral-7b", "--gpus", "99999999999999999999"], "--gpus"),
]


@pytest.mark.parametrize("args,msg", SUBPROCESS, ids=[" ".join(a)[:60] for a, _ in SUBPROCESS])
def test_bad_input_as_a_user_sees_it(args, msg, files):
    code, _, err = run_cli_subprocess(_args(args, files), env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert code == 2 and "Traceback" not in err, err
    assert msg in one_error_line(err)


# A missing optional extra: one line naming the extra to install, exit 2.
EXTRAS = [
    ("transformers", ["estimate", "--model-config", "{tmp}/gptj.json", "--gpus", "2"],
     'pip install "fabricbench[train]"'),
    ("accelerate", [*TRAIN], 'train needs accelerate: pip install "fabricbench[train]"'),
    ("matplotlib", [*COMPARE, "--plot", "{tmp}/c.png"], 'pip install "fabricbench[plot]"'),
    ("matplotlib", [*SCALING, "--num-gpus", "2", "--plot", "{tmp}/s.png"], 'pip install "fabricbench[plot]"'),
]


@pytest.mark.parametrize("module,args,msg", EXTRAS, ids=[f"{m}: {a[0]}" for m, a, _ in EXTRAS])
def test_missing_extra_names_it(module, args, msg, files, no_gpu, capsys, monkeypatch):
    (files / "gptj.json").write_text('{"model_type": "gptj"}')  # a family with no formula: transformers reads it
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # import fails, find_spec says absent
    assert msg in refused(_args(args, files), capsys)


def test_to_dataframe_without_pandas_names_the_extra(monkeypatch):
    import fabricbench
    from fabricbench.errors import UsageError

    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(UsageError, match=r'pip install "fabricbench\[pandas\]"'):
        fabricbench.to_dataframe([])


def test_custom_fabric_with_several_variables_is_one_fabric(tmp_path):
    import fabricbench.errors
    from fabricbench.fabrics import split_fabric_list
    from fabricbench.studying.api import placed

    assert split_fabric_list("x:A=1,B=2,default") == ["x:A=1,B=2", "default"]
    assert split_fabric_list("default,y:NCCL_ALGO=Ring,NCCL_PROTO=Simple") == \
        ["default", "y:NCCL_ALGO=Ring,NCCL_PROTO=Simple"]
    from fabricbench.studying.config import StudyConfig

    config = placed(StudyConfig(out=str(tmp_path / "s"), fabrics="x:NCCL_ALGO=Ring,NCCL_PROTO=Simple,default",
                                model="tiny-mistral", device="cpu"))
    assert len(config.fabrics) == 2 and config.fabric_names[0] == "x"
    with pytest.raises(fabricbench.errors.UsageError, match="belongs to no custom fabric"):
        split_fabric_list("A=1,default")


@pytest.mark.parametrize("cmd", [["advise", "--model", "tiny-mistral", "--num-gpus", "2", "--strategies"],
                                 ["study", "--model", "tiny-mistral", "--device", "cpu", "--out", "never", "--dry-run", "--strategies"],
                                 ["train", "--model", "tiny-mistral", "--device", "cpu", "--strategies"]])
def test_a_strategy_named_twice_is_refused(cmd):
    """One strategy given twice would be run (train, study) or ranked (advise) twice: refused up front by
    the one parser of strategy lists (Registry.pick), in every command."""
    code, _, err = run_cli_subprocess([*cmd, "ddp,fsdp,ddp"])
    assert code == 2, err
    assert err.strip().splitlines()[-1] == "Error: --strategies names ddp twice; give each strategy once"
