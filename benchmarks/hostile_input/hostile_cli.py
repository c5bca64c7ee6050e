"""Every command fed hostile files and options, as a careless or hostile user would.

    python3 benchmarks/hostile_input/hostile_cli.py [--jobs 2] [--only relate] [--out benchmarks/hostile_input/results/cpu-vm/hostile_cli.txt]

Each case runs `python -m fabricbench ...` in a fresh process under a time limit and is classed:
- error: exit 2 and exactly one stderr line starting "Error:" (the rule for bad input);
- handled: exit 0 or 1 with no traceback (a run that failed cleanly, or input rightly accepted);
- TRACEBACK: a Python traceback on stderr;
- HANG: still running at the limit (killed);
- MESSY: exit 2 with other than one "Error:" line.
Clean = error + handled. The inputs: FIFOs, /dev/zero, /dev/full, folders, empty, binary, truncated and
type-damaged copies of real results files, NaN/huge/negative numbers, control characters, schema 99,
deep nesting, colliding outputs. Exit status 1 when any case is not clean.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COLL = ROOT / "tests/data/qualify/gloo_node_results.jsonl"
TRAIN = ROOT / "benchmarks/study/results/cpu-lab/study/units/train_ddp_default.jsonl"
STUDY = ROOT / "benchmarks/study/results/cpu-lab/study"
TOPO = ROOT / "tests/data/topo/h200_nvl_two_quads.txt"
SPEC = ROOT / "tests/data/qualify/gloo.toml"
LIMIT_S = 90


def make_files(d: Path) -> dict[str, str]:
    """The hostile inputs, by name."""
    f: dict[str, str] = {}
    rng = random.Random(20)

    def put(name: str, data: bytes | str) -> None:
        p = d / name
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        f[name] = str(p)

    os.mkfifo(d / "fifo")
    f["fifo"] = str(d / "fifo")
    f["zero"] = "/dev/zero"
    f["null"] = "/dev/null"
    f["dir"] = str(d)
    f["missing"] = str(d / "no_such_file.jsonl")
    put("empty", b"")
    put("binary", bytes(rng.randrange(256) for _ in range(4096)))
    put("nul", b"\0" * 1000)
    coll = COLL.read_text().splitlines()
    train = TRAIN.read_text().splitlines()
    real = coll + train
    put("real.jsonl", "\n".join(real) + "\n")
    put("coll.jsonl", "\n".join(coll) + "\n")
    put("train.jsonl", "\n".join(train) + "\n")
    text = "\n".join(real)
    put("truncated.jsonl", text[: len(text) // 2])
    put("torn_middle.jsonl", "\n".join(r[:40] if i % 3 == 1 else r for i, r in enumerate(real)) + "\n")
    recs = [json.loads(r) for r in real]

    def damaged(name: str, change) -> None:
        out = []
        for r in recs:
            r = json.loads(json.dumps(r))
            change(r)
            out.append(json.dumps(r))
        put(name, "\n".join(out) + "\n")

    damaged("wrong_types.jsonl", lambda r: r.update({k: "oops" for k in ("bytes", "time_us", "nranks", "step_time",
                                                                         "busbw_gbps", "comm", "strategy")}))
    damaged("lists.jsonl", lambda r: r.update({k: [] for k in list(r)[:40]}))
    damaged("missing_keys.jsonl", lambda r: [r.pop(k, None) for k in ("op", "bytes", "strategy", "kind", "status")])
    damaged("nulls.jsonl", lambda r: r.update({k: None for k in r if k not in ("schema", "kind")}))
    damaged("schema99.jsonl", lambda r: r.update(schema="fabricbench/99"))
    damaged("schema_junk.jsonl", lambda r: r.update(schema=["fabricbench/1"]))
    damaged("status_junk.jsonl", lambda r: r.update(status={"ok": True}))
    damaged("negative.jsonl", lambda r: r.update({k: -1 for k in ("bytes", "time_us", "nranks", "busbw_gbps")}))
    damaged("huge.jsonl", lambda r: r.update({k: 10 ** 400 for k in ("bytes", "time_us", "nranks", "busbw_gbps")}))
    put("nan.jsonl", "\n".join(r.replace('"time_us": ', '"time_us": NaN, "x": ').replace(
        '"busbw_gbps": ', '"busbw_gbps": Infinity, "y": ') for r in real) + "\n")
    damaged("ctrl_names.jsonl", lambda r: r.update(fabric="a\x00b\x1b[31m\nc", strategy="d\x07\re", op="all\x00reduce"))
    damaged("nested_step.jsonl", lambda r: r.update(step_time={"median_s": {"a": 1}}, throughput=[1],
                                                    comm={"collectives": "x"}))
    put("deep.jsonl", "[" * 100000 + "]" * 100000 + "\n")
    put("deep_obj.jsonl", '{"schema": "fabricbench/1", "kind": "collective", "x": ' + "[" * 500 + "]" * 500 + "}\n")
    put("array.jsonl", "[1, 2, 3]\n42\n\"str\"\nnull\ntrue\n")
    put("one_huge_line.jsonl", '{"schema": "fabricbench/1", "kind": "x", "pad": "' + "a" * 5_000_000 + '"}\n')
    put("crlf.jsonl", "\r\n".join(real) + "\r\n")
    put("latin1.jsonl", ("\n".join(real) + "\n").encode("utf-8").replace(b'"vm"', b'"v\xe9m"'))
    put("bom.jsonl", b"\xef\xbb\xbf" + ("\n".join(real) + "\n").encode())
    # topologies
    topo_txt = TOPO.read_text()
    put("topo.txt", topo_txt)
    put("topo_trunc.txt", topo_txt[: len(topo_txt) // 2])
    put("topo_garbage.txt", topo_txt.replace("NV6", "NV\x00").replace("SYS", "ZZZ"))
    put("topo_ragged.txt", "\n".join(ln[: len(ln) // 2] if i % 2 else ln for i, ln in enumerate(topo_txt.splitlines())))
    put("topo_bigidx.txt", topo_txt.replace("GPU7", "GPU99999999999999999999"))
    put("topo_dup.txt", topo_txt.replace("GPU7", "GPU6"))
    good_topo = {"gpus": [{"index": i} for i in range(4)],
                 "links": [["X" if i == j else "NV18" for j in range(4)] for i in range(4)]}
    put("topo.json", json.dumps(good_topo))
    put("topo_asym.json", json.dumps({**good_topo, "links": [["X", "NV1", "SYS", "SYS"], ["SYS", "X", "SYS", "SYS"],
                                                               ["SYS", "SYS", "X", "SYS"], ["SYS", "SYS", "SYS", "X"]]}))
    put("topo_types.json", json.dumps({"gpus": "four", "links": 7}))
    put("topo_types2.json", json.dumps({"gpus": [{"index": "a", "bogus": 1}], "links": [["X"]]}))
    put("topo_ragged.json", json.dumps({"gpus": [0, 1], "links": [["X"], ["NV1", "X", "SYS"]]}))
    put("topo_links.json", json.dumps({"gpus": [0, 1], "links": [["X", 5], [None, "X"]]}))
    put("topo_nan.json", '{"gpus": [NaN, Infinity], "links": [["X","SYS"],["SYS","X"]]}')
    put("topo_empty.json", "{}")
    n = 600
    put("topo_big.json", json.dumps({"gpus": list(range(n)), "links": [["X" if i == j else ("NV18" if i // 4 == j // 4
                                                                                          else "SYS") for j in range(n)]
                                                                      for i in range(n)]}))
    # model configs
    put("model.json", json.dumps({"model_type": "mistral", "hidden_size": 64, "intermediate_size": 128,
                                  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                                  "vocab_size": 1000}))
    put("model_types.json", json.dumps({"model_type": "mistral", "hidden_size": "big", "num_hidden_layers": [2]}))
    put("model_neg.json", json.dumps({"model_type": "mistral", "hidden_size": -64, "num_hidden_layers": -2,
                                      "num_attention_heads": 0, "vocab_size": -1}))
    put("model_huge.json", json.dumps({"model_type": "mistral", "hidden_size": 10 ** 30, "num_hidden_layers": 10 ** 20,
                                       "vocab_size": 10 ** 40, "intermediate_size": 10 ** 30}))
    put("model_nan.json", '{"model_type": "mistral", "hidden_size": NaN, "num_hidden_layers": Infinity}')
    put("model_unknown.json", json.dumps({"model_type": "no-such-model\x00"}))
    put("model_list.json", "[1,2]")
    # study folders
    for name, content in (("study_ok", None), ("study_trunc", "truncated.jsonl"), ("study_bin", "binary"),
                          ("study_types", "wrong_types.jsonl"), ("study_99", "schema99.jsonl"),
                          ("study_nulls", "nulls.jsonl"), ("study_empty", "empty")):
        sd = d / name
        if content is None:
            shutil.copytree(STUDY, sd, ignore=shutil.ignore_patterns("report*"))
        else:
            sd.mkdir()
            shutil.copy(f[content], sd / "results.jsonl")
        f[name] = str(sd)
    sd = d / "study_fifo"
    sd.mkdir()
    os.mkfifo(sd / "results.jsonl")
    f["study_fifo"] = str(sd)
    sd = d / "study_damaged"
    shutil.copytree(STUDY, sd, ignore=shutil.ignore_patterns("report*"))
    lines = (sd / "results.jsonl").read_text().splitlines()
    rng2 = random.Random(3)
    for i in rng2.sample(range(len(lines)), min(8, len(lines))):
        lines[i] = lines[i][: rng2.randrange(len(lines[i]))]
    (sd / "results.jsonl").write_text("\n".join(lines) + "\n")
    f["study_damaged"] = str(sd)
    # specs
    spec = SPEC.read_text()
    put("spec.toml", spec)
    put("spec_trunc.toml", spec[: len(spec) // 2])
    put("spec_nan.toml", spec + "\n[checks.nan_check]\nkind = \"collective\"\nmin_busbw_gbps = nan\n")
    put("spec_deep.toml", "a = " + "[" * 5000 + "]" * 5000 + "\n")
    # outputs
    ro = d / "readonly"
    ro.mkdir()
    (ro / "x.jsonl").write_text("")
    os.chmod(ro / "x.jsonl", 0o444)
    os.chmod(ro, 0o555)
    f["ro_file"] = str(ro / "x.jsonl")
    f["ro_dir_new"] = str(ro / "new" / "x.jsonl")
    f["under_file"] = str(d / "empty" / "x.jsonl")
    f["out"] = str(d / "out.jsonl")
    f["out_dir"] = str(d / "outdir")
    f["ctrl_out"] = str(d / "o\x1b[31mut\n.jsonl")
    f["long_out"] = str(d / ("x" * 300 + ".jsonl"))
    return f


def cases(f: dict[str, str]) -> list[tuple[str, list[str], dict[str, str]]]:
    """(name, argv after `fabricbench`, extra environment)."""
    out: list[tuple[str, list[str], dict[str, str]]] = []
    add = lambda name, argv, env=None: out.append((name, argv, env or {}))  # noqa: E731
    results_inputs = ["fifo", "zero", "null", "dir", "missing", "empty", "binary", "nul", "truncated.jsonl",
                      "torn_middle.jsonl", "wrong_types.jsonl", "lists.jsonl", "missing_keys.jsonl", "nulls.jsonl",
                      "schema99.jsonl", "schema_junk.jsonl", "status_junk.jsonl", "negative.jsonl", "huge.jsonl",
                      "nan.jsonl", "ctrl_names.jsonl", "nested_step.jsonl", "deep.jsonl", "deep_obj.jsonl",
                      "array.jsonl", "one_huge_line.jsonl", "crlf.jsonl", "latin1.jsonl", "bom.jsonl"]
    for name in results_inputs:
        add(f"relate {name}", ["relate", f[name], f["coll.jsonl"]])
        add(f"relate --json {name}", ["relate", "--json", f["real.jsonl"], f[name]])
        add(f"advise --results {name}", ["advise", "--model", "tiny-mistral", "--num-gpus", "2", "--topo-file",
                                         f["topo.txt"], "--results", f[name]])
        add(f"import {name}", ["import", f[name], "--out", f["out"] + ".imp." + name.replace("/", "_")])
        add(f"qualify --from {name}", ["qualify", "--init", f["out_dir"] + "/init_" + name + ".toml",
                                       "--from", f[name]])
    add("relate size cap", ["relate", f["real.jsonl"]], {"FABRICBENCH_MAX_INPUT_BYTES": "100"})
    add("relate bad cap", ["relate", f["real.jsonl"]], {"FABRICBENCH_MAX_INPUT_BYTES": "-1"})
    add("relate --plot onto input", ["relate", f["real.jsonl"], "--plot", f["real.jsonl"]])
    add("relate --plot fifo", ["relate", f["real.jsonl"], "--plot", f["fifo"]])
    add("relate --reference ctrl", ["relate", f["real.jsonl"], "--reference", "x\x00\x1b"])
    for name in ("study_ok", "study_trunc", "study_bin", "study_types", "study_99", "study_nulls", "study_empty",
                 "study_fifo", "study_damaged", "missing", "empty", "fifo", "zero"):
        add(f"report {name}", ["report", f[name]])
    for name in ("fifo", "zero", "dir", "missing", "empty", "binary", "topo_trunc.txt", "topo_garbage.txt",
                 "topo_ragged.txt", "topo_bigidx.txt", "topo_dup.txt", "topo.json", "topo_asym.json", "topo_types.json",
                 "topo_types2.json", "topo_ragged.json", "topo_links.json", "topo_nan.json", "topo_empty.json",
                 "topo_big.json", "deep.jsonl", "real.jsonl"):
        add(f"topo --topo-file {name}", ["topo", "--topo-file", f[name], "--json"])
        add(f"advise --topo-file {name}", ["advise", "--model", "tiny-mistral", "--num-gpus", "2", "--topo-file", f[name]])
    add("scaling --topo-file fifo", ["scaling", "--topo-file", f["fifo"], "--engine", "torch", "--num-gpus", "2"])
    add("scaling --topo-file garbage", ["scaling", "--topo-file", f["topo_garbage.txt"], "--num-gpus", "2"])
    add("topo --out fifo", ["topo", "--from-file", f["topo.txt"], "--out", f["fifo"]])
    add("topo --out /dev/full", ["topo", "--from-file", f["topo.txt"], "--out", "/dev/full"])
    add("topo --out ro", ["topo", "--from-file", f["topo.txt"], "--out", f["ro_file"]])
    add("topo --out ro dir", ["topo", "--from-file", f["topo.txt"], "--out", f["ro_dir_new"]])
    add("topo --out = input", ["topo", "--from-file", f["topo.txt"], "--out", f["topo.txt"]])
    add("topo --gpus junk", ["topo", "--from-file", f["topo.txt"], "--gpus", "0-99999999999"])
    add("topo --gpus neg", ["topo", "--from-file", f["topo.txt"], "--gpus", "-1"])
    for name in ("fifo", "zero", "dir", "missing", "empty", "binary", "model_types.json", "model_neg.json",
                 "model_huge.json", "model_nan.json", "model_unknown.json", "model_list.json", "deep.jsonl"):
        add(f"estimate --model-config {name}", ["estimate", "--model-config", f[name], "--gpus", "2"])
        add(f"advise --model-config {name}", ["advise", "--model-config", f[name], "--num-gpus", "2",
                                             "--topo-file", f["topo.txt"]])
        add(f"train --model-config {name}", ["train", "--model-config", f[name], "--device", "cpu", "--nprocs", "1",
                                            "--steps", "1", "--out", f["out_dir"] + "/train_" + name + ".jsonl"])
        add(f"study --model-config {name}", ["study", "--model-config", f[name], "--device", "cpu", "--dry-run",
                                            "--out", f["out_dir"] + "/study_" + name])
    for flag, vals in (("--num-gpus", ["0", "-1", "99999999999999999999"]), ("--batch-size", ["0", "-5", "10000000000"]),
                       ("--seq-len", ["0", "-1", "99999999999999"]), ("--gpu-memory", ["-80G", "nan", "1e999G", "0", "x"]),
                       ("--strategies", ["", "ddp,ddp", "nope", "\x00"]), ("--gpus", ["0-999999999", "a-b", "7-0"])):
        for v in vals:
            add(f"advise {flag} {v!r}", ["advise", "--model", "tiny-mistral", "--topo-file", f["topo.txt"],
                                          "--num-gpus", "2", flag, v] if flag != "--num-gpus" else
                ["advise", "--model", "tiny-mistral", "--topo-file", f["topo.txt"], flag, v])
    for flag, vals in (("--num-gpus", ["0", "-3", "100000000000"]), ("--batch-size", ["0", "-1", "1e9"]),
                       ("--seq-len", ["-1", "0", "9999999999999999"]), ("--image-size", ["-1", "0"]),
                       ("--recipe", ["nope", ""])):
        for v in vals:
            add(f"estimate {flag} {v!r}", ["estimate", "--model", "tiny-mistral", flag, v])
    # study: fabrics and options (dry runs: nothing measured)
    for fab in ("x:A=1,B=2", "x:A=1,B=2,C=3", "shaped:-5mbit", "shaped:nan", "shaped:1e999gbit", "nope", "",
                "x:", "x:=1", "a\x00b:A=1", "default,default", "x:NCCL_ALGO=Ring,NCCL_PROTO=Simple"):
        add(f"study --fabrics {fab!r}", ["study", "--fabrics", fab, "--device", "cpu", "--dry-run",
                                         "--out", f["out_dir"] + "/study_fab"])
    for flag, vals in (("--steps", ["0", "-1"]), ("--batch-size", ["0", "-2"]), ("--sizes", ["0", "-1", "1e999", "x"]),
                       ("--iters", ["0", "-1"]), ("--train-timeout", ["nan", "-1", "inf", "0"]),
                       ("--sweep-timeout", ["nan", "-5"]), ("--strategies", ["nope", ",", "ddp,ddp"]),
                       ("--nprocs", ["0", "-1", "100000"])):
        for v in vals:
            add(f"study {flag} {v!r}", ["study", "--device", "cpu", "--dry-run", "--out", f["out_dir"] + "/st", flag, v])
    add("study --out file", ["study", "--device", "cpu", "--dry-run", "--out", f["empty"]])
    add("study --out fifo", ["study", "--device", "cpu", "--dry-run", "--out", f["fifo"]])
    add("study --out ro", ["study", "--device", "cpu", "--dry-run", "--out", f["ro_dir_new"]])
    add("study --resume damaged", ["study", "--device", "cpu", "--dry-run", "--resume", "--out", f["study_damaged"]])
    add("study --resume schema99", ["study", "--device", "cpu", "--dry-run", "--resume", "--out", f["study_99"]])
    # sweep
    sweep = ["sweep", "--engine", "torch", "--backend", "gloo", "--nprocs", "1", "--sizes", "8", "--iters", "1",
             "--warmup", "0", "--ops", "all_reduce"]
    add("sweep --out /dev/full", [*sweep, "--out", "/dev/full"])
    add("sweep --out fifo", [*sweep, "--out", f["fifo"]])
    add("sweep --out ro", [*sweep, "--out", f["ro_file"]])
    add("sweep --out dir", [*sweep, "--out", f["dir"]])
    add("sweep --out under file", [*sweep, "--out", f["under_file"]])
    add("sweep --out X --csv X", [*sweep, "--out", f["out"] + ".sw", "--csv", f["out"] + ".sw"])
    add("sweep --csv /dev/full", [*sweep, "--csv", "/dev/full"])
    add("sweep --csv fifo", [*sweep, "--csv", f["fifo"]])
    add("sweep --resume truncated", [*sweep, "--resume", "--out", f["truncated.jsonl"]])
    add("sweep --resume binary", [*sweep, "--resume", "--out", f["binary"]])
    add("sweep --resume schema99", [*sweep, "--resume", "--out", f["schema99.jsonl"]])
    add("sweep --nccl-lib fifo", ["sweep", "--nccl-lib", f["fifo"], "--dry-run"])
    add("sweep --nccl-lib zero", ["sweep", "--nccl-lib", f["zero"], "--dry-run"])
    add("sweep --fabric x:A=1,B=2 dry", [*sweep, "--fabric", "x:A=1,B=2", "--dry-run"])
    for flag, vals in (("--sizes", ["1e999", "-8", "99999999999999999999999", "8-1:x2", "1K-1M:x1", "1K-1M:x0.5",
                                    "nan", "\x00"]),
                       ("--timeout", ["nan", "inf", "-1", "1e999"]), ("--adaptive", ["nan", "-0.1", "inf"]),
                       ("--iters", ["99999999999999999999"]), ("--max-iters", ["-1", "0"]), ("--seed", ["-1", "1e9"]),
                       ("--gpus", ["-1", "0-99999999999999"]), ("--nprocs", ["-1", "100000"]),
                       ("--buffers", ["nope"]), ("--timing", ["nope"]), ("--alloc", ["nope"]),
                       ("--fabric", ["x:", "shaped:-1mbit", "nope", "a\x00b"])):
        for v in vals:
            add(f"sweep {flag} {v!r}", [*sweep, flag, v, "--dry-run"])
    # compare / scaling: collisions and options
    add("compare --out X --plot X", ["compare", "--fabrics", "default", "--engine", "torch", "--nprocs", "2",
                                     "--sizes", "8", "--out", f["out"] + ".cmp", "--plot", f["out"] + ".cmp"])
    add("compare --out fifo", ["compare", "--fabrics", "default", "--engine", "torch", "--nprocs", "2", "--sizes", "8",
                               "--out", f["fifo"]])
    add("compare --fabrics x:A=1,B=2", ["compare", "--fabrics", "x:A=1,B=2,default", "--engine", "torch", "--nprocs",
                                        "1", "--sizes", "8", "--iters", "1", "--warmup", "0",
                                        "--out", f["out"] + ".cmp2"])
    add("compare --resume damaged", ["compare", "--fabrics", "default", "--engine", "torch", "--nprocs", "1",
                                     "--sizes", "8", "--iters", "1", "--warmup", "0", "--resume", "--out",
                                     f["torn_middle.jsonl"]])
    add("compare --timeout nan", ["compare", "--fabrics", "default", "--timeout", "nan", "--engine", "torch"])
    add("scaling --num-gpus junk", ["scaling", "--num-gpus", "0,-1", "--topo-file", f["topo.txt"]])
    add("scaling --out X --plot X", ["scaling", "--topo-file", f["topo.txt"], "--out", f["out"] + ".sc",
                                     "--plot", f["out"] + ".sc"])
    # p2p / train / estimate options
    for v in ("-1", "0", "1e999", "nan", "x"):
        add(f"p2p --size {v!r}", ["p2p", "--size", v, "--out", f["out"] + ".p2p"])
    add("p2p --out /dev/full", ["p2p", "--out", "/dev/full"])
    add("p2p --out X --plot X", ["p2p", "--out", f["out"] + ".p", "--plot", f["out"] + ".p"])
    for flag, vals in (("--lr", ["nan", "inf", "-1"]), ("--steps", ["0", "-1"]), ("--batch-size", ["0"]),
                       ("--timeout", ["nan", "-1"]), ("--dataset", [f["fifo"], f["zero"], f["binary"]]),
                       ("--model-path", [f["fifo"], f["empty"]]), ("--out", ["/dev/full", f["fifo"], f["ro_file"]]),
                       ("--master-port", ["-1", "99999"]), ("--nnodes", ["0"]), ("--fabric", ["x:A=1,B=2\x00"])):
        for v in vals:
            argv = ["train", "--model", "tiny-mistral", "--device", "cpu", "--nprocs", "1", "--steps", "2",
                    "--strategy", "ddp", flag, v]
            if flag != "--out":
                argv += ["--out", f["out_dir"] + "/tr.jsonl"]
            add(f"train {flag} {v!r}", argv)
    # qualify (spec and inputs)
    for name in ("fifo", "zero", "empty", "binary", "spec_trunc.toml", "spec_nan.toml", "spec_deep.toml"):
        add(f"qualify --spec {name} --dry-run", ["qualify", "--spec", f[name], "--dry-run"])
    for name in ("fifo", "binary", "truncated.jsonl", "schema99.jsonl", "wrong_types.jsonl"):
        add(f"qualify --baseline {name}", ["qualify", "--spec", f["spec.toml"], f["coll.jsonl"], "--baseline", f[name],
                                           "--out", f["out_dir"] + "/q_" + name])
        add(f"qualify input {name}", ["qualify", "--spec", f["spec.toml"], f[name], "--out", f["out_dir"] + "/qi_" + name])
    add("qualify --fleet dirs", ["qualify", "--fleet", f["study_trunc"], f["study_bin"], f["fifo"]])
    add("qualify --prometheus /dev/full", ["qualify", "--spec", f["spec.toml"], f["coll.jsonl"], "--prometheus",
                                          "/dev/full", "--out", f["out_dir"] + "/qp"])
    return out


def classify(rc: int | None, err: str) -> str:
    if rc is None:
        return "HANG"
    if "Traceback (most recent call last)" in err:
        return "TRACEBACK"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if rc == 2:
        errs = [ln for ln in lines if ln.startswith("Error:")]
        return "error" if len(errs) == 1 else "MESSY"
    if rc in (0, 1):
        return "handled"
    return f"EXIT{rc}"


def run_case(case, env_base) -> tuple[str, str, float, str]:
    name, argv, extra = case
    argv = [a.replace("\0", "\x01") for a in argv]  # exec() cannot pass NUL; a shell user gets \x01 at most
    env = {**env_base, **extra}
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-m", "fabricbench", *argv], env=env, capture_output=True, text=True,
                           errors="replace", timeout=LIMIT_S, stdin=subprocess.DEVNULL, start_new_session=True)
        rc, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, err = None, (e.stderr or b"").decode("utf-8", "replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
    dt = time.monotonic() - t0
    verdict = classify(rc, err)
    last = [ln for ln in err.splitlines() if ln.strip()]
    return name, verdict, dt, (last[-1] if last else "")[:160]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default=None, help="run the cases whose name starts with this")
    ap.add_argument("--out", default=None, help="also write the report here")
    args = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="fb-hostile-"))
    try:
        files = make_files(d)
        todo = [c for c in cases(files) if not args.only or c[0].startswith(args.only)]
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT))}
        env.pop("FABRICBENCH_MAX_INPUT_BYTES", None)
        rows = []
        with cf.ThreadPoolExecutor(args.jobs) as pool:
            for row in pool.map(lambda c: run_case(c, env), todo):
                rows.append(row)
                name, verdict, dt, last = row
                if verdict not in ("error", "handled"):
                    print(f"{verdict:<9} {dt:5.1f}s {name!r}: {last}", flush=True)
    finally:
        os.chmod(d / "readonly", 0o755)
        shutil.rmtree(d, ignore_errors=True)
    counts: dict[str, int] = {}
    for _, v, _, _ in rows:
        counts[v] = counts.get(v, 0) + 1
    clean = counts.get("error", 0) + counts.get("handled", 0)
    lines = [f"# hostile CLI matrix: {len(rows)} cases, {clean} clean ({100 * clean / max(1, len(rows)):.1f}%): "
             + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
             "# verdict   seconds  case  |  last stderr line"]
    lines += [f"{v:<9} {dt:6.1f}  {n!r}  |  {last!r}" for n, v, dt, last in rows]
    print(lines[0])
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0 if clean == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
