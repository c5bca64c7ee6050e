"""qualify without measuring: spec mistakes (exit 2, one line naming file:line and key), topology specs on
saved `nvidia-smi topo -m` files, verdict arithmetic, JUnit, --init and --fleet on recorded results."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from clirun import one_error_line, refused, run_cli, run_cli_subprocess
from roots import DATA

TOPO = DATA / "topo"
QDATA = DATA / "qualify"

GOOD = """\
[spec]
name = "t"

[run]
engine = "torch"
backend = "gloo"
nprocs = 2

[[check]]
name = "bw"
kind = "collective"
op = "all_reduce"
sizes = ["1M"]
min_busbw_gbps = 0.1
"""


def _write(tmp_path, text, name="spec.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_good_spec_parses():
    from fabricbench.qualifying.spec import parse_spec

    s = parse_spec(GOOD, "good.toml")
    assert s.run.cpu_ranks and s.run.nprocs == 2
    c = s.checks[0]
    assert (c.name, c.kind, c.params["sizes"], c.params["gpus"], c.params["fabric"]) == \
        ("bw", "collective", (1 << 20,), "all", "default")


# (what is wrong, how to make it from GOOD, text the one-line error must hold, its line number or None)
MISTAKES = [
    ("toml syntax", lambda s: s.replace("min_busbw_gbps = 0.1", "min_busbw_gbps = "), "not valid TOML", 14),
    ("no [spec]", lambda s: s.replace('[spec]\nname = "t"\n', ""), "no [spec] table", None),
    ("unknown table", lambda s: s + "\n[checks]\nx = 1\n", "unknown table or key 'checks'", 16),
    ("no checks", lambda s: s.split("[[check]]")[0], "no [[check]] tables", None),
    ("[check] not [[check]]", lambda s: s.replace("[[check]]", "[check]"), "array of tables", 9),
    ("no kind", lambda s: s.replace('kind = "collective"\n', ""), "has no kind", 9),
    ("no name", lambda s: s.replace('name = "bw"\n', ""), "has no name", 9),
    ("unknown kind", lambda s: s.replace('"collective"', '"bandwidth"'), "unknown kind 'bandwidth'", 11),
    ("duplicate name", lambda s: s + s[s.index("[[check]]"):], "used twice", 16),
    ("unknown key", lambda s: s.replace("min_busbw_gbps", "min_bw"), "unknown key 'min_bw'", 14),
    ("wrong type", lambda s: s.replace("= 0.1", '= "fast"'), "min_busbw_gbps: expected a number", 14),
    ("negative threshold", lambda s: s.replace("= 0.1", "= -3"), "expected a number > 0", 14),
    ("unknown op", lambda s: s.replace('"all_reduce"', '"allreduce"'), "unknown op 'allreduce'", 12),
    ("unknown dtype", lambda s: s + 'dtype = "float7"\n', "unknown dtype 'float7'", 15),
    ("bad size", lambda s: s.replace('["1M"]', '["1Q"]'), "sizes:", 13),
    ("bad gpu set", lambda s: s + 'gpus = "some"\n', "expected one of all, each_island, each_pair", 15),
    ("unknown fabric", lambda s: s + 'fabric = "warp"\n', "unknown fabric 'warp'", 15),
    ("fraction > 1", lambda s: s.replace("min_busbw_gbps = 0.1", "reference_busbw_gbps = 367\nmin_fraction = 1.5"),
     "expected a fraction in (0, 1]", 15),
    ("reference without fraction", lambda s: s.replace("min_busbw_gbps", "reference_busbw_gbps"),
     "go together", None),
    ("no threshold", lambda s: s.replace("min_busbw_gbps = 0.1\n", ""), "sets no threshold", 9),
    ("threshold size not measured", lambda s: s + 'busbw_size = "1G"\n', "is not among sizes", 15),
    ("backend with native", lambda s: s.replace('engine = "torch"', 'engine = "native"'),
     "applies to engine = \"torch\" only", 6),
    ("gloo without nprocs", lambda s: s.replace("nprocs = 2\n", ""), "need nprocs", 6),
    ("nprocs 0", lambda s: s.replace("nprocs = 2", "nprocs = 0"), "expected at least 1", 7),
    # the ranges of the command-line options these keys feed, in their words, at parse time (--dry-run too)
    ("nprocs past sweep's range", lambda s: s.replace("nprocs = 2", "nprocs = 100000"),
     "outside 1 to 4,096, the range `fabricbench sweep --nprocs` takes", 7),
    ("timeout past sweep's range", lambda s: s.replace("nprocs = 2", "nprocs = 2\ntimeout_s = 1e6"),
     "outside [1, 604800] s, the range `fabricbench sweep --timeout` takes", 8),
    ("unit timeout under a second", lambda s: s.replace("nprocs = 2", "nprocs = 2\nunit_timeout_s = 0.5"),
     "outside [1, 604800] s", 8),
    ("unknown engine", lambda s: s.replace('"torch"', '"cuda"'), "expected one of native, torch", 5),
    ("bad transport family", lambda s: s + '\n[[check]]\nname = "tr"\nkind = "transport"\n'
                                           'expect = { default = "NVLINK" }\n', "not a transport family", 19),
    ("bad link", lambda s: s + '\n[[check]]\nname = "w"\nkind = "topology"\nlink = "NV"\n',
     "expected a `nvidia-smi topo -m` link", 19),
    ("islands not lists", lambda s: s + '\n[[check]]\nname = "w"\nkind = "topology"\nislands = [0, 1]\n',
     "expected a list of GPU lists", 19),
    ("bad check name", lambda s: s.replace('name = "bw"', 'name = "all reduce"'), "must be letters", 10),
    ("contrast of one fabric", lambda s: s + '\n[[check]]\nname = "c"\nkind = "contrast"\nfast = "net"\n'
                                             'slow = "net"\nmin_ratio = 2\n', "compare two different", 20),
    ("unknown strategy", lambda s: s + '\n[[check]]\nname = "t1"\nkind = "train"\nstrategy = "zero9"\n'
                                       'loss_falls = true\n', "unknown strategy 'zero9'", 19),
]


@pytest.mark.parametrize("what,make,expect,line", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_bad_spec_is_one_line_exit_2(tmp_path, capsys, what, make, expect, line):
    p = _write(tmp_path, make(GOOD))
    code, out, err = run_cli(["qualify", "--spec", str(p), "--out", str(tmp_path / "q")], capsys)
    assert code == 2, (what, err)
    said = one_error_line(err, what)
    assert str(p) in said and expect in said, said
    if line is not None:
        assert f"{p}:{line}:" in said, said
    assert not (tmp_path / "q").exists(), "nothing may run or be written for a bad spec"


def test_dry_run_refuses_what_the_run_would(tmp_path, capsys):
    """`[run] nprocs = 100000` passed --dry-run (exit 0) and the run then ended 3: now both say it, exit 2."""
    p = _write(tmp_path, GOOD.replace("nprocs = 2", "nprocs = 100000"))
    assert "the range `fabricbench sweep --nprocs` takes" in refused(["qualify", "--spec", p, "--dry-run"], capsys)


def test_mistake_kinds_count():
    assert len(MISTAKES) >= 15


@pytest.mark.parametrize("args,expect", [
    (["--spec", "/nonexistent/spec.toml"], "no such file"),
    (["--spec", "builtin:nope"], "no such built-in spec"),
    (["--spec", "builtin:h200-sxm-8", "--only", "wiring,nosuch"], "--only nosuch: no such check"),
    (["--spec", "builtin:h200-sxm-8", "--init", "x.toml"], "give one of"),
    ([], "give one of"),
    (["--init", "x.toml"], "--init needs --from"),
    (["--fleet", str(QDATA / "gloo_node_results.jsonl")], "at least 2 nodes"),
    (["--spec", "builtin:h200-sxm-8", "--baseline", "x"], "--baseline x: no such file"),
    (["--spec", "builtin:h200-sxm-8", "--tolerance", "2"], "--tolerance 2 is outside [0, 1)"),
    (["--spec", "builtin:h200-sxm-8", "--resume"], "--resume continues the run in --out"),
    (["--spec", "builtin:h200-sxm-8", "--topo-file", "/nonexistent/topo.txt"], "--topo-file /nonexistent"),
    (["--init", "x.toml", "--from", str(QDATA / "gloo_node_results.jsonl"), "--factor", "1.5"], "--factor 1.5"),
    (["--fleet", str(QDATA), str(QDATA), "--fraction", "0"], "--fraction 0"),
    (["--spec", "builtin:h200-sxm-8", "--fabric", "warp"], "--fabric: unknown fabric 'warp'"),
    (["--list-specs", "stray"], "stray: no such file"),
])
def test_bad_invocations(capsys, args, expect):
    assert expect in refused(["qualify", *args], capsys)


def test_bad_spec_in_a_fresh_process_has_no_traceback(tmp_path):
    p = _write(tmp_path, GOOD.replace("= 0.1", "= -1"))
    code, _, err = run_cli_subprocess(["qualify", "--spec", p])
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1, err


# -- built-in specs and topology checks on saved topo -m files ---------------------------------------

def test_builtin_specs_parse_and_cite_sources():
    from fabricbench.qualifying.spec import builtin_names, builtin_text, load_spec

    names = builtin_names()
    assert {"h200-sxm-8", "h100-sxm-8", "h200-nvl-8", "pcie-gen5-8"} <= set(names)
    for n in names:
        s = load_spec(f"builtin:{n}")
        assert s.source and s.checks
        for line in builtin_text(n).splitlines():  # every numeric threshold says where it comes from
            key = line.split("=")[0].strip()
            if key.startswith(("min_", "max_", "reference_")):
                assert "#" in line, f"{n}: {line!r} has no source comment"


def _topo_verdict(capsys, spec, topo_file, tmp_path):
    out = tmp_path / "q"
    code, stdout, err = run_cli(["qualify", "--spec", spec, "--only", "wiring", "--topo-file", str(TOPO / topo_file),
                                 "--out", str(out), "--quiet"], capsys)
    return code, json.loads((out / "verdicts.json").read_text())["verdicts"][0], out


def test_nvl_topology_fails_nvswitch_spec_with_the_pair_named(capsys, tmp_path):
    code, v, out = _topo_verdict(capsys, "builtin:h200-sxm-8", "h200_nvl_two_quads.txt", tmp_path)
    assert code == 1 and v["status"] == "fail"
    assert v["subject"] == "GPU0-GPU4" and v["measured"] == "SYS" and v["threshold"] == "NV18"
    failing = {i["subject"] for i in v["items"] if i["status"] == "fail" and i["criterion"] == "link"}
    assert "GPU0-GPU1" in failing and "GPU3-GPU4" in failing and len(failing) == 28  # every pair: NV6 or SYS
    assert any(i["criterion"] == "gpu_count" and i["status"] == "pass" for i in v["items"])
    # the file names no GPUs: the name criterion is waived, not guessed
    assert any(i["criterion"] == "gpu_name" and i["status"] == "waived" for i in v["items"])
    tc = ET.parse(out / "junit.xml").getroot().find(".//testcase[@name='wiring']")
    assert "GPU0-GPU4: link SYS != NV18" in tc.find("failure").get("message")


@pytest.mark.parametrize("spec,topo_file,code", [
    ("builtin:h200-sxm-8", "h200_sxm_nvswitch.txt", 0),
    ("builtin:h200-nvl-8", "h200_nvl_two_quads.txt", 0),
    ("builtin:h200-nvl-8", "h200_sxm_nvswitch.txt", 1),
    ("builtin:pcie-gen5-8", "l40s_pcie.txt", 0),
    ("builtin:pcie-gen5-8", "h200_nvl_two_quads.txt", 1),
])
def test_topology_specs_on_saved_files(capsys, tmp_path, spec, topo_file, code):
    got, v, _ = _topo_verdict(capsys, spec, topo_file, tmp_path)
    assert got == code, v["message"]
    # PCIe facts are not in a topo -m file: waived with the reason, never passed blindly
    assert any(i["criterion"] == "pcie_gen" and i["status"] == "waived" and "no PCIe link facts" in i["reason"]
               for i in v["items"])


def test_one_gpu_topology_waives_pair_criteria(capsys, tmp_path):
    code, v, _ = _topo_verdict(capsys, "builtin:h200-sxm-8", "h200_1gpu_real.txt", tmp_path)
    assert code == 1  # 1 GPU is not 8: that is a failure, honestly
    waived = {i["criterion"]: i["reason"] for i in v["items"] if i["status"] == "waived"}
    assert "pair check needs at least 2 GPUs" in waived["link"] and "uniform" in waived
    assert v["subject"] == "node" and v["measured"] == 1 and v["threshold"] == 8


# -- verdicts ------------------------------------------------------------------------------------

def test_margins_and_combination():
    from fabricbench.qualifying.verdict import at_least, at_most, combine, waived

    a = at_least("busbw", 270.0, 300.0, unit="GB/s", subject="GPUs 0,1")
    assert a.status == "fail" and a.headroom == pytest.approx(-0.1)
    b = at_most("latency", 20.0, 25.0, unit="µs")
    assert b.status == "pass" and b.headroom == pytest.approx(0.2)
    v = combine("c", "collective", [b, a, waived("cv", "why")])
    assert v.status == "fail" and v.subject == "GPUs 0,1" and v.measured == 270.0 and v.threshold == 300.0
    assert v.message() == "GPUs 0,1: busbw 270.0 GB/s < 300.0 GB/s (-10.0%)"
    assert combine("c", "k", [waived("x", "1 GPU")]).status == "waived"
    assert combine("c", "k", [b, at_least("x", 1.0, 1.0)]).headroom == pytest.approx(0.0)  # the tightest


# -- --init, --baseline and --fleet on recorded results --------------------------------------------

def test_init_from_recorded_run(tmp_path, capsys):
    spec_path = tmp_path / "init.toml"
    code, out, err = run_cli(["qualify", "--init", str(spec_path), "--from", str(QDATA / "gloo_node_results.jsonl"),
                              "--factor", "0.8"], capsys)
    assert code == 0, err
    from fabricbench.qualifying.spec import load_spec

    s = load_spec(spec_path)
    assert (s.run.engine, s.run.backend, s.run.nprocs) == ("torch", "gloo", 2)
    recs = [json.loads(l) for l in (QDATA / "gloo_node_results.jsonl").read_text().splitlines()]
    big = max((r for r in recs if r.get("kind") == "collective" and r["op"] == "all_reduce"),
              key=lambda r: r["requested_bytes"])
    ar = s.check("all_reduce_float32")
    # the margin widens to the figure's own spread (1 - 3 cv, never below 0.5): gloo's cv here is ~0.21
    factor = min(0.8, max(0.5, 1 - 3 * big["cv"]))
    assert factor < 0.8 and ar.params["min_busbw_gbps"] == pytest.approx(big["busbw_gbps"] * factor, rel=1e-3)
    assert ar.params["sizes"] == (4096, 4 << 20) and ar.params["dtype"] == "float32"
    assert s.check("correct").params["ops"] == ("all_gather", "all_reduce")


def test_init_takes_plain_records_over_checked_ones(tmp_path):
    """A size measured plainly and again with --check: the thresholds come from the plain record (the
    collective check measures without --check), the checked one still makes the correctness check."""
    from fabricbench.qualifying.init_spec import spec_from_results
    from fabricbench.qualifying.spec import load_spec

    recs = [json.loads(l) for l in (QDATA / "gloo_node_results.jsonl").read_text().splitlines()]
    small = min((r for r in recs if r.get("kind") == "collective" and r["op"] == "all_reduce"
                 and not r.get("inplace")), key=lambda r: r["requested_bytes"])
    plain = dict(small, wrong=None, time_us=100.0)
    checked = dict(small, wrong=0, time_us=400.0)
    with open(tmp_path / "r.jsonl", "w") as fh:
        for r in [x for x in recs if x is not small] + [plain, checked]:  # the checked one written last
            fh.write(json.dumps(r) + "\n")
    (tmp_path / "s.toml").write_text(spec_from_results(tmp_path / "r.jsonl", factor=0.5))
    s = load_spec(tmp_path / "s.toml")
    assert s.check("all_reduce_float32").params["max_latency_us"] == pytest.approx(200.0)
    assert "all_reduce" in s.check("correct").params["ops"]


def _scaled_nodes(tmp_path, factors):
    src = [json.loads(l) for l in (QDATA / "gloo_node_results.jsonl").read_text().splitlines()]
    dirs = []
    for i, f in enumerate(factors):
        d = tmp_path / f"node{i + 1}"
        d.mkdir()
        with open(d / "results.jsonl", "w") as fh:
            for r in src:
                r = dict(r, host=f"node{i + 1}")
                if r.get("kind") == "collective" and r.get("time_us"):
                    r["busbw_gbps"] = r["busbw_gbps"] * f if r.get("busbw_gbps") is not None else None
                    r["algbw_gbps"] *= f
                    r["time_us"] /= f
                fh.write(json.dumps(r) + "\n")
        dirs.append(d)
    return dirs


def test_fleet_finds_the_slow_node(tmp_path, capsys):
    dirs = _scaled_nodes(tmp_path, [1.0, 0.97, 0.5])
    code, out, err = run_cli(["qualify", "--fleet", *map(str, dirs), "--out", str(tmp_path / "fleet")], capsys)
    assert code == 1
    f = json.loads((tmp_path / "fleet" / "fleet.json").read_text())
    assert {o["node"] for o in f["outliers"]} == {"node3"}
    bw = next(o for o in f["outliers"] if o["figure"].startswith("busbw all_reduce"))
    assert bw["ratio"] == pytest.approx(0.5 / 0.97, rel=1e-6)
    assert "outlier node3" in out
    for name in ("fleet.png", "report.md", "report.html"):
        assert (tmp_path / "fleet" / name).stat().st_size > 0


def test_fleet_from_one_file_of_many_hosts(tmp_path, capsys):
    dirs = _scaled_nodes(tmp_path, [1.0, 1.01, 0.99, 0.45])
    merged = tmp_path / "all.jsonl"
    merged.write_text("".join((d / "results.jsonl").read_text() for d in dirs))
    import fabricbench

    res = fabricbench.fleet(fabricbench.FleetConfig(inputs=(merged,)))
    assert [n.name for n in res.nodes] == ["node4", "node1", "node2", "node3"]  # the worst first
    assert {o.node for o in res.outliers} == {"node4"} and res.exit_code == 1
    assert res.nodes[0].severity == "critical" and res.nodes[0].codes == ["FB_FLEET_OUTLIER"]


def test_fleet_of_equal_nodes_passes(tmp_path, capsys):
    dirs = _scaled_nodes(tmp_path, [1.0, 0.98, 1.02])
    code, out, err = run_cli(["qualify", "--fleet", *map(str, dirs)], capsys)
    assert code == 0, out


def test_baseline_flags_regression():
    from fabricbench.qualifying.figures import compare, figures

    recs = [json.loads(l) for l in (QDATA / "gloo_node_results.jsonl").read_text().splitlines()]
    # gloo's own spread is wide (cv ~0.2: tolerance 3 x sqrt(2 x 0.2^2) ~ 0.9 at most): a 10% drop is a tie
    slow = [dict(r, busbw_gbps=r["busbw_gbps"] * 0.9) if r.get("busbw_gbps") else r for r in recs]
    assert all(i.status == "pass" for i in compare(figures(recs), figures(slow), 0.05))
    quiet = [dict(r, cv=0.01) if r.get("kind") == "collective" else r for r in recs]  # a quiet machine
    slow = [dict(r, busbw_gbps=r["busbw_gbps"] * 0.9) if r.get("busbw_gbps") else r for r in quiet]
    items = compare(figures(quiet), figures(slow), 0.05)
    bad = [i for i in items if i.status == "fail"]
    assert bad and all(i.subject.startswith("busbw") for i in bad)
    assert all(i.status == "pass" for i in compare(figures(recs), figures(recs), 0.05))


def test_cli_surface_is_frozen():
    from fabricbench.cli.qualify import qualify

    names = {opt for p in qualify.params for opt in p.opts}
    assert names == {"inputs", "--spec", "--out", "--resume", "--only", "--skip", "--fabric", "--topo-file",
                     "--baseline", "--tolerance", "--init", "--from", "--factor", "--name", "--fleet",
                     "--fraction", "--list-specs", "--list-kinds", "--json", "--quiet", "--dry-run", "--level",
                     "--prometheus", "--list-codes"}


def test_dry_run_checks_the_spec_and_measures_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["qualify", "--spec", "builtin:h200-sxm-8", "--dry-run", "--skip", "wiring"], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("h200-sxm-8 (builtin:h200-sxm-8) at level 2 (standard): ") and "nothing measured" in lines[0]
    assert lines[-1].startswith("estimate: ~")
    assert any(ln.split()[:2] == ["allreduce_8gpu", "collective"] and "sizes=8B,16G" in ln for ln in lines)
    assert not any(ln.split()[0] == "wiring" for ln in lines[1:])
    code, out, err = run_cli(["qualify", "--spec", "builtin:h200-sxm-8", "--dry-run", "--json", "--only",
                              "transports"], capsys)
    doc = json.loads(out)
    assert code == 0 and [c["name"] for c in doc["checks"]] == ["transports"] and doc["run"]["engine"] == "native"
    bad = tmp_path / "bad.toml"
    bad.write_text('[spec]\nname = "x"\n[[check]]\nname = "c"\nkind = "collective"\nop = "all_reduce"\n'
                   'sizes = ["1G"]\nmin_busbw_gbps = "fast"\n')
    code, out, err = run_cli(["qualify", "--spec", str(bad), "--dry-run"], capsys)
    assert code == 2 and err.startswith("Error: ") and "bad.toml" in err and "min_busbw_gbps" in err
    assert list(tmp_path.iterdir()) == [bad]  # nothing written


def test_library_returns_typed_verdicts(tmp_path):
    import fabricbench
    from fabricbench.qualifying.verdict import Verdict

    topo = str(TOPO / "h200_nvl_two_quads.txt")
    res = fabricbench.qualify(fabricbench.QualifyConfig(spec="builtin:h200-nvl-8", only=["wiring"], topo_file=topo))
    assert res.exit_code == 0 and res.out is None and res.files == {}
    (v,) = res.verdicts
    assert isinstance(v, Verdict) and v.status == "pass" and v.kind == "topology"
    assert {i.criterion for i in v.items} >= {"gpu_count", "islands", "island_link", "uniform"}
    inline = GOOD.replace("engine = \"torch\"\nbackend = \"gloo\"\nnprocs = 2\n", "") + \
        '\n[[check]]\nname = "w"\nkind = "topology"\nlink = "NV18"\n'
    res = fabricbench.qualify(fabricbench.QualifyConfig(spec=inline, only=["w"], topo_file=topo, out=tmp_path / "lib"))
    assert res.exit_code == 1 and res.verdicts[0].subject == "GPU0-GPU4"
    assert Path(res.files["junit"]).is_file() and Path(res.files["report_html"]).is_file()


def test_init_from_a_cpu_training_run(tmp_path):
    from fabricbench.qualifying.api import init_spec
    from fabricbench.qualifying.spec import parse_spec

    rec = {"schema": "fabricbench/1", "kind": "train", "status": "ok", "host": "n1", "strategy": "fsdp", "model": "tiny-mistral",
           "device": "cpu", "nranks": 3, "steps": 6, "warmup_steps": 2, "batch_size": 4, "seq_len": 64,
           "fabric": "default", "throughput": {"samples_per_s": 100.0}, "loss_decreased": True}
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(rec) + "\n")
    s = parse_spec(init_spec(p, factor=0.8), "init.toml")
    assert (s.run.engine, s.run.backend, s.run.nprocs) == ("torch", "gloo", 3)
    t = s.check("train_fsdp")
    assert t.params["min_samples_per_s"] == 80.0 and t.params["loss_falls"] is True and t.params["seq_len"] == 64
