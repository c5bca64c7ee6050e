"""Qualification grading on CPU: severities and exit codes, stable codes and actions, levels and the
dry-run plan, retries (flaky), the Prometheus textfile (parsed back with prometheus_client), verdicts.json
and JUnit fields, the Reproduce line, --init from the measured spread, and a small fleet (worst first,
codes). Hostile specs and readers: test_qualify_hostile.py.

    python3 -m pytest -q tests/unit/test_qualify_grading.py
"""

import json
import math
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fabricbench.qualifying import api
from fabricbench.qualifying.checks import CHECKS
from fabricbench.qualifying.checks.base import Check, CheckKind, retries_of
from fabricbench.qualifying.codes import CODES, code_for, markdown_table
from fabricbench.qualifying.config import FleetConfig, QualifyConfig
from fabricbench.qualifying.fleet import run_fleet
from fabricbench.qualifying.plan import make_plan
from fabricbench.qualifying.prometheus import TextFile
from fabricbench.qualifying.spec import RunSettings, builtin_names, load_spec, parse_spec
from fabricbench.qualifying.verdict import Policy, at_least, at_most, combine, equal, error, exit_code, waived
from clirun import run_cli
from roots import DATA, ROOT

QDATA = DATA / "qualify"
TOPO = DATA / "topo"
GLOO = QDATA / "gloo_node_results.jsonl"


# -- severities -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("item,policy,severity", [
    (at_least("busbw", 300.0, 431.0, unit="GB/s"), Policy(), "critical"),  # a floor missed
    (at_least("busbw", 420.0, 431.0), Policy(warn_fraction=0.95), "warning"),  # in the band below the floor
    (at_least("busbw", 400.0, 431.0), Policy(warn_fraction=0.95), "critical"),  # below the band (409.45)
    (at_most("latency", 60.0, 50.0), Policy(), "warning"),  # latency misses warn by default
    (at_most("cv", 0.3, 0.2), Policy(), "warning"),
    (at_most("cv", 0.3, 0.2), Policy(severity="critical"), "critical"),  # the spec says otherwise
    (at_least("busbw", 300.0, 431.0), Policy(severity="info"), "info"),
    (at_most("latency", 52.0, 50.0), Policy(severity="critical", warn_fraction=0.95), "warning"),  # ceiling band
    (equal("link", "SYS", "NV18"), Policy(warn_fraction=0.9), "critical"),  # no band for an equality
    (waived("busbw", "1 rank"), Policy(), "info"),
    (error("busbw", "child died"), Policy(), "unknown"),
    (at_least("busbw", 500.0, 431.0), Policy(), "pass"),
])
def test_severity_of_an_item(item, policy, severity):
    v = combine("c", "collective", [item], policy=policy)
    assert v.severity == severity and v.items[0].severity == severity


def test_verdict_takes_its_gravest_item_and_exit_codes_follow_severity():
    items = [at_most("cv", 0.3, 0.2), at_least("busbw", 100.0, 431.0), waived("latency", "no size")]
    v = combine("allreduce", "collective", items)
    assert (v.severity, v.criterion, v.code) == ("critical", "busbw", "FB_COLL_BUSBW_LOW")
    assert "nvidia-smi nvlink -s" in v.action and "drain" in v.action
    warn = combine("w", "collective", [at_most("cv", 0.3, 0.2)])
    unknown = combine("u", "collective", [error("busbw", "timed out")])
    ok = combine("p", "collective", [at_least("busbw", 500.0, 431.0)])
    info = combine("i", "p2p", [waived("min_gbps", "one GPU")])
    assert (ok.code, info.code, unknown.code, warn.code) == ("FB_PASS", "FB_WAIVED", "FB_UNMEASURED",
                                                            "FB_COLL_CV_HIGH")
    assert exit_code([ok, info]) == 0
    assert exit_code([ok, warn]) == 4
    assert exit_code([ok, warn, unknown]) == 3
    assert exit_code([warn, unknown, v]) == 1


# -- codes and actions ----------------------------------------------------------------------------------

def test_codes_are_unique_documented_and_actionable():
    names = [c.code for c in CODES]
    assert len(names) == len(set(names)) and all(re.fullmatch(r"FB_[A-Z0-9_]+", n) for n in names)
    page = (ROOT / "docs" / "qualify.md").read_text(encoding="utf-8")
    assert markdown_table() in page, "docs/qualify.md's table of codes is out of date: paste codes.markdown_table()"
    assert all(c.action for c in CODES if c.code != "FB_PASS")
    assert code_for("topology", "link").code == "FB_TOPO_LINK" and "nvidia-smi nvlink -s" in code_for(
        "topology", "link").action
    assert code_for("host_copy", "h2d").code == "FB_HOST_BW_LOW"
    assert code_for("correctness", "wrong").action.startswith("drain")
    assert code_for("nosuchkind", "x").code == "FB_FAIL"


def test_a_missing_link_gets_its_code_and_action_from_a_saved_topology(tmp_path, capsys):
    spec = (tmp_path / "s.toml")
    spec.write_text('[spec]\nname = "nv"\n[[check]]\nname = "wiring"\nkind = "topology"\nlink = "NV18"\n')
    res = api.qualify(QualifyConfig(spec=str(spec), topo_file=str(TOPO / "h200_nvl_two_quads.txt"),
                                    out=tmp_path / "q"))
    v = res.verdicts[0]
    assert (v.status, v.severity, v.code) == ("fail", "critical", "FB_TOPO_LINK") and res.exit_code == 1
    assert "nvidia-smi nvlink -s" in v.action
    d = json.loads((tmp_path / "q" / "verdicts.json").read_text())
    head = d["verdicts"][0]
    for key in ("severity", "code", "action", "measured", "threshold", "headroom", "attempts"):
        assert key in head
    assert head["attempts"] == [{"attempt": 1, "status": "fail", "severity": "critical", "code": "FB_TOPO_LINK",
                                 "measured": head["measured"], "threshold": "NV18", "headroom": None,
                                 "duration_s": head["attempts"][0]["duration_s"], "message": head["message"]}]
    tc = ET.parse(tmp_path / "q" / "junit.xml").getroot().find(".//testcase")
    props = {p.get("name"): p.get("value") for p in tc.find("properties")}
    assert props["severity"] == "critical" and props["code"] == "FB_TOPO_LINK"
    assert tc.find("failure").get("type") == "critical"


# -- levels and the plan ---------------------------------------------------------------------------------

LEVELED = """
[spec]
name = "leveled"
[run]
engine = "torch"
backend = "gloo"
nprocs = 2
iters = 10
[level.1]
iters = 3
[level.3]
iters = 40
retries = 2
[[check]]
name = "quick"
kind = "collective"
levels = [1]
op = "all_reduce"
sizes = ["1K"]
max_latency_us = 1000
[[check]]
name = "full"
kind = "collective"
levels = [2, 3]
op = "all_reduce"
sizes = ["1K", "1M"]
max_latency_us = 1000
retries = 1
[[check]]
name = "everywhere"
kind = "correctness"
"""


def test_levels_choose_checks_and_run_settings():
    spec = parse_spec(LEVELED, "leveled.toml")
    l1, l2, l3 = (spec.at_level(n) for n in (1, 2, 3))
    assert [c.name for c in l1.checks] == ["quick", "everywhere"] and l1.run.iters == 3
    assert [c.name for c in l2.checks] == ["full", "everywhere"] and (l2.run.iters, l2.run.retries) == (10, 0)
    assert (l3.run.iters, l3.run.retries) == (40, 2) and l3.check("full").retries == 1
    p1, p3 = make_plan(l1, l1.checks), make_plan(l3, l3.checks)
    assert 0 < p1.seconds < p3.seconds and p3.max_retries == 2 and p1.level == 1
    with pytest.raises(Exception, match="runs at --level 1"):
        api.select(spec, ["quick"], None, 2)


def test_builtin_specs_have_a_plan_at_every_level():
    for name in builtin_names():
        spec = load_spec(f"builtin:{name}")
        plans = [make_plan(spec.at_level(n), spec.at_level(n).checks) for n in (1, 2, 3)]
        assert all(p.steps for p in plans), name
        if not spec.run.cpu_ranks:  # GPU wiring (the CPU lab has none to check)
            assert "wiring" in [s.check for s in plans[0].steps], name  # topology is quick: level 1
        assert plans[0].seconds <= plans[2].seconds, name
        assert plans[0].seconds < 60, (name, plans[0].seconds)  # level 1 aims at about a minute
    h200 = load_spec("builtin:h200-sxm-8")
    assert "allreduce_pairs" in [c.name for c in h200.at_level(3).checks]
    assert "allreduce_pairs" not in [c.name for c in h200.at_level(1).checks]


def test_builtin_floors_name_their_sources():
    h200, h100 = load_spec("builtin:h200-sxm-8"), load_spec("builtin:h100-sxm-8")
    ar = h200.check("allreduce_8gpu")
    assert ar.params["reference_busbw_gbps"] * ar.params["min_fraction"] == 431 and 16 << 30 in ar.params["sizes"]
    assert "Azure" in ar.source and ar.warn_fraction == 0.95
    assert h100.check("allreduce_8gpu").params["reference_busbw_gbps"] == 460
    assert h200.check("peer_copies").params["min_gbps"] == 335
    assert h200.check("host_links").params["min_h2d_gbps"] == 48
    for spec in (h200, h100):
        floors = [c for c in spec.checks if c.kind in ("collective", "p2p", "host_copy", "contrast")]
        assert all(c.source for c in floors), [c.name for c in floors if not c.source]


def test_dry_run_shows_the_plan_and_an_estimate(capsys):
    code, out, err = run_cli(["qualify", "--spec", "builtin:h200-sxm-8", "--level", "1", "--dry-run"], capsys)
    assert code == 0, err
    assert "at level 1 (quick)" in out.splitlines()[0] and out.splitlines()[-1].startswith("estimate: ~")
    code, out, err = run_cli(["qualify", "--spec", "builtin:h200-sxm-8", "--level", "3", "--dry-run", "--json"], capsys)
    doc = json.loads(out)
    assert doc["level"] == 3 and doc["plan"]["estimate_s"] > 0 and doc["plan"]["budget_s"] == 1200
    assert {s["check"] for s in doc["plan"]["steps"]} == {c["name"] for c in doc["checks"]}


# -- retries ---------------------------------------------------------------------------------------------

class _Ctx:
    def __init__(self, retries):
        self.run = RunSettings(retries=retries)
        self.attempt = 0

    def retry(self, n):
        self.attempt = n


def _kind(values):
    return CheckKind(name="fake", description="", fields={},
                     judge=lambda check, ctx: [at_least("busbw", values[ctx.attempt], 100.0, unit="GB/s")])


def test_a_pass_after_a_miss_is_flaky_with_every_attempt_recorded():
    check = Check(name="bw", kind="collective", params={})
    ctx = _Ctx(retries=2)
    v = api._judge(check, _kind([90.0, 101.0, 120.0]), ctx, False, None)
    assert (v.status, v.severity, v.code) == ("pass", "warning", "FB_FLAKY") and ctx.attempt == 0
    assert [a["status"] for a in v.attempts] == ["fail", "pass"] and v.attempts[0]["measured"] == 90.0
    assert "attempt 2" in v.reason and exit_code([v]) == 4


def test_a_miss_on_every_attempt_stays_critical_and_retries_stop_at_a_pass():
    check = Check(name="bw", kind="collective", params={}, retries=1)  # the check's own retries win
    v = api._judge(check, _kind([90.0, 80.0, 500.0]), _Ctx(retries=5), False, None)
    assert (v.status, v.severity, v.measured) == ("fail", "critical", 80.0) and len(v.attempts) == 2
    once = api._judge(Check(name="ok", kind="collective", params={}), _kind([150.0]), _Ctx(retries=3), False, None)
    assert len(once.attempts) == 1 and once.severity == "pass"


def test_a_topology_miss_is_final_not_retried():
    """The topology is read, not timed: a retry would read the same GPU count, so the miss is not retried
    (and never 'flaky'), and the plan counts no retry for it."""
    topo = CheckKind(name="topology", description="", fields={}, measures=False,
                     judge=lambda check, ctx: [at_least("gpus", [1, 8][ctx.attempt], 8)])
    v = api._judge(Check(name="wiring", kind="topology", params={}), topo, _Ctx(retries=2), False, None)
    assert v.status == "fail" and len(v.attempts) == 1
    assert retries_of(Check(name="w", kind="topology", params={}, retries=3), CHECKS.get("topology"),
                      RunSettings(retries=2)) == 0
    assert retries_of(Check(name="c", kind="collective", params={}), CHECKS.get("collective"),
                      RunSettings(retries=2)) == 2


# -- Prometheus -------------------------------------------------------------------------------------------

def _families(path):
    return {f.name: f for f in text_string_to_metric_families(Path(path).read_text())}


def test_prometheus_textfile_parses_with_busbw_status_and_timestamp(tmp_path):
    recs = [json.loads(line) for line in GLOO.read_text().splitlines()]
    verdicts = [combine("allreduce_bw", "collective", [at_least("busbw", 1.0, 2.0)]),
                combine("links", "topology", [equal("link", "NV18", "NV18")])]
    tf = TextFile()
    tf.add_records(recs, host="node7")
    tf.add_verdicts("node7", "gloo-2", verdicts, when=1_700_000_000.0)
    path = tf.write(str(tmp_path / "sub" / "fb.prom"))
    fams = _families(path)
    busbw = [s for s in fams["fabricbench_busbw_gbps"].samples]
    want = [r for r in recs if r.get("kind") == "collective" and not r.get("inplace") and r.get("busbw_gbps")]
    assert len(busbw) == len({(r["op"], r["requested_bytes"]) for r in want}) > 0
    s = next(x for x in busbw if x.labels["op"] == "all_reduce" and x.labels["size_bytes"] == "4194304")
    assert s.labels["host"] == "node7" and s.labels["fabric"] == "default" and s.value == pytest.approx(
        next(r["busbw_gbps"] for r in want if r["op"] == "all_reduce" and r["requested_bytes"] == 4194304))
    status = {x.labels["check"]: x for x in fams["fabricbench_check_status"].samples}
    assert status["allreduce_bw"].labels["severity"] == "critical" and status["allreduce_bw"].value == 4
    assert status["links"].labels["severity"] == "pass" and status["links"].value == 0
    assert fams["fabricbench_qualify_timestamp_seconds"].samples[0].value == 1_700_000_000.0
    assert fams["fabricbench_qualify_worst_severity"].samples[0].value == 4
    assert not [p for p in os.listdir(tmp_path / "sub") if p != "fb.prom"]  # the temp file was renamed


def test_qualify_writes_prometheus_and_a_reproduce_line_with_every_flag(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('[spec]\nname = "t"\n[[check]]\nname = "wiring"\nkind = "topology"\ngpu_count = 8\n'
                    '[[check]]\nname = "other"\nkind = "topology"\nisland_count = 1\n')
    base = tmp_path / "base.jsonl"
    base.write_text(GLOO.read_text())
    res = api.qualify(QualifyConfig(spec=str(spec), topo_file=str(TOPO / "h200_sxm_nvswitch.txt"), out=tmp_path / "q",
                                    prometheus=tmp_path / "q.prom", only=["wiring"], skip=["other"],
                                    baseline=str(base), tolerance=0.1, fabric="p2p-off", level=1))
    assert [v.check for v in res.verdicts] == ["wiring", "baseline"]
    line = res.reproduce
    for flag in ("--level 1", "--only wiring", "--skip other", "--fabric p2p-off", f"--baseline {base}",
                 "--tolerance 0.1", "--topo-file", f"--prometheus {tmp_path / 'q.prom'}", f"--out {tmp_path / 'q'}"):
        assert flag in line, (flag, line)
    assert line in (tmp_path / "q" / "report.md").read_text()
    fams = _families(tmp_path / "q.prom")
    assert {s.labels["check"] for s in fams["fabricbench_check_status"].samples} == {"wiring", "baseline"}


# -- fleet ----------------------------------------------------------------------------------------------

def _fleet_file(path, hosts, bad=()):
    with open(path, "w") as fh:
        for h in range(hosts):
            for op, base in (("all_reduce", 400.0), ("all_gather", 300.0)):
                for size, scale in ((1 << 20, 0.2), (1 << 30, 1.0)):
                    bw = base * scale * (1 + 0.001 * (h % 7)) * (0.5 if h in bad and op == "all_reduce" else 1)
                    t = size / (bw * 1e3)
                    fh.write(json.dumps({"schema": "fabricbench/1", "kind": "collective", "host": f"h{h:03d}",
                                         "op": op, "dtype": "float32", "requested_bytes": size, "nranks": 8,
                                         "gpus": list(range(8)), "time_us": t, "busbw_gbps": bw, "cv": 0.01,
                                         "status": "ok", "fabric": "default"}) + "\n")
        fh.write('{"torn line\n')


def test_a_small_fleet_lists_the_worst_hosts_first_with_codes_in_every_format(tmp_path):
    f = tmp_path / "all.jsonl"
    _fleet_file(f, 300, bad={17, 230})
    res = run_fleet(FleetConfig(inputs=[f], out=tmp_path / "fleet", prometheus=tmp_path / "fleet.prom"))
    assert len(res.nodes) == 300 and [n.name for n in res.nodes[:2]] == ["h017", "h230"]
    assert res.nodes[0].severity == "critical" and res.nodes[0].codes == ["FB_FLEET_OUTLIER"]
    assert res.nodes[2].severity == "pass" and res.exit_code == 1
    assert any("skipped 1 of" in n for n in res.notes)  # the torn line is counted, not fatal
    doc = json.loads((tmp_path / "fleet" / "fleet.json").read_text())
    assert doc["nodes"][0]["name"] == "h017" and doc["severities"]["critical"] == 2
    cases = ET.parse(tmp_path / "fleet" / "junit.xml").getroot().findall(".//testcase")
    assert len(cases) == 300 and cases[0].find("failure").get("type") == "critical"
    fams = _families(tmp_path / "fleet.prom")
    outl = {s.labels["host"]: s.value for s in fams["fabricbench_fleet_outliers"].samples}
    assert outl["h017"] >= 1 and outl["h001"] == 0 and len(outl) == 300
    assert len(fams["fabricbench_busbw_gbps"].samples) == 300 * 2  # busbw at the largest size, per op
    md = (tmp_path / "fleet" / "report.md").read_text()
    assert md.index("h017") < md.index("h001") and "FB_FLEET_OUTLIER" in md


# -- init from the measured spread ------------------------------------------------------------------------

def test_init_never_writes_absurd_or_non_finite_thresholds_and_its_baseline_passes(tmp_path, capsys):
    recs = [json.loads(line) for line in GLOO.read_text().splitlines()]
    odd = [dict(r, busbw_gbps=1e12, time_us=1e12) if r.get("kind") == "collective" and r["requested_bytes"] == 4096
           else r for r in recs]
    src = tmp_path / "odd.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in odd).replace("0.19070638595033476", "NaN"))
    out = tmp_path / "init.toml"
    code, _, err = run_cli(["qualify", "--init", str(out), "--from", str(src)], capsys)
    assert code == 0, err
    text = out.read_text()
    assert not re.search(r"\b(nan|inf)\b", text) and "1e+12" not in text and "1000000000000" not in text
    spec = load_spec(str(out))
    nums = [v for c in spec.checks for v in c.params.values() if isinstance(v, float)]
    assert nums and all(math.isfinite(v) and 0 < v <= 1e6 for v in nums)
    assert 0.05 <= spec.run.baseline_tolerance <= 0.5
    # the same machine again, within its own noise: the baseline verdict passes
    again = [dict(r, busbw_gbps=r["busbw_gbps"] * 0.85, time_us=r["time_us"] * 1.15)
             if r.get("kind") == "collective" and r.get("busbw_gbps") else r for r in recs]
    v = api._baseline_verdict(recs, again, spec.run.baseline_tolerance)
    assert v.status == "pass", v.message()
