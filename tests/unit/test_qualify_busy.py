"""qualify on a busy host: a miss while other processes load the host is measured once more after the load
passes, or reported unknown with "busy host" (FB_BUSY_HOST), never critical on the load alone; the
report, junit.xml and verdicts.json say so.

    fabricbench qualify --init node.toml --from q/results.jsonl --factor 0.9
    fabricbench qualify --spec node.toml      (a minute later, another job at load 6-8: it was CRITICAL)
"""

import json
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

from fabricbench.qualifying import api, busy
from fabricbench.qualifying.api import qualify
from fabricbench.qualifying.config import QualifyConfig
from fabricbench.qualifying.checks.base import Check, CheckKind
from fabricbench.qualifying.children import UnitResult
from fabricbench.qualifying.verdict import at_least
from fabricbench.results.status import Severity, Status
from roots import DATA

LAB = DATA / "study/cpu-lab/units/sweep_default.jsonl"
BUSY = {"window_s": 20.0, "cpus": 2, "others_cpu_s": 26.0, "ours_cpu_s": 30.0, "others_cpus": 1.3,
        "threshold_cpus": 0.5, "busy": True, "readings": 20, "top": [{"pid": 4242, "name": "make", "cpus": 1.1}]}
QUIET = {**BUSY, "others_cpu_s": 0.4, "others_cpus": 0.02, "busy": False, "top": []}


class _Ctx:
    """What api._judge asks of a context: the run's retries, fresh attempts, the units a judge read."""

    offline = False

    def __init__(self, loads):
        self.run = SimpleNamespace(retries=0)
        self.loads, self.attempt, self.used = loads, 0, []

    def retry(self, attempt):
        self.attempt = attempt

    def sweep(self):  # the unit of this attempt, measured under the load the test gives it
        load = self.loads[min(self.attempt, len(self.loads) - 1)]
        res = UnitResult(key=f"u{self.attempt}", records=[{"kind": "collective", "host_load": load}])
        self.used.append(res)
        return res


def _judge(loads, figures, monkeypatch, *, quiet_comes: bool):
    waits = []
    monkeypatch.setattr(busy, "wait_for_quiet", lambda name, echo=None: waits.append(name) or quiet_comes)

    def judge(check, ctx):
        ctx.sweep()
        return [at_least("busbw", figures[min(ctx.attempt, len(figures) - 1)], 0.0191, unit="GB/s")]

    kind = CheckKind(name="collective", description="", fields={}, judge=judge)
    v = api._judge(Check(name="ar", kind="collective", params={}), kind, _Ctx(loads), False, None)
    return v, waits


def test_a_busy_miss_is_measured_again_when_the_load_passes(monkeypatch):
    v, waits = _judge([BUSY, QUIET], [0.0135, 0.0205], monkeypatch, quiet_comes=True)
    assert waits == ["ar"] and len(v.attempts) == 2
    assert v.status == Status.PASS and v.severity == Severity.PASS and v.busy_host is None  # the quiet figure
    assert v.reason.startswith("passed when measured again on a quiet host, after 1 miss(es) on a busy one")


def test_a_miss_on_a_quiet_retry_is_the_nodes(monkeypatch):
    v, _ = _judge([BUSY, QUIET], [0.0135, 0.0135], monkeypatch, quiet_comes=True)
    assert v.status == Status.FAIL and v.severity == Severity.CRITICAL  # measured quiet: a real miss


@pytest.mark.parametrize("quiet_comes, loads", [(False, [BUSY]), (True, [BUSY, BUSY])],
                         ids=["the load never passes", "busy again on the retry"])
def test_a_busy_miss_no_quiet_attempt_settles_is_unknown_never_critical(quiet_comes, loads, monkeypatch):
    v, _ = _judge(loads, [0.0135], monkeypatch, quiet_comes=quiet_comes)
    assert v.severity == Severity.UNKNOWN and v.status == Status.ERROR and v.code == "FB_BUSY_HOST"
    assert v.reason.startswith("busy host (") and "make (pid 4242)" in v.reason and "0.0135" in v.reason
    assert v.busy_host and "busy host during 1 of 1" in v.busy_host
    assert len(v.attempts) == (2 if quiet_comes else 1)


def test_a_pass_on_a_busy_host_is_not_retried(monkeypatch):
    v, waits = _judge([BUSY], [0.0205], monkeypatch, quiet_comes=True)
    assert waits == [] and v.status == Status.PASS and v.busy_host  # said, but nothing to settle


def test_waiting_for_quiet_reads_the_host_in_windows(monkeypatch):
    from fabricbench import hostload

    loads = iter([True, True, False])
    lines = []

    class _Watch:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.load = SimpleNamespace(busy=next(loads), to_dict=lambda: BUSY)

    monkeypatch.setattr(hostload, "watch", _Watch)
    assert busy.wait_for_quiet("ar", echo=lines.append, wait_s=1.0, window_s=0.01)
    assert len(lines) == 3 and "waiting for the load to pass" in lines[0] and "quiet" in lines[-1]
    loads = iter([True] * 10)
    assert not busy.wait_for_quiet("ar", echo=lines.append, wait_s=0.03, window_s=0.01)
    assert "stayed busy" in lines[-1]


def test_results_from_a_busy_host_say_so_in_every_output(tmp_path):
    # recorded results (--from) measured on a busy host: no retry can be quieter, so the miss is unknown
    recs = [json.loads(ln) for ln in LAB.read_text().splitlines()]
    for r in recs:
        r["host_load"] = BUSY
    src = tmp_path / "busy.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in recs))
    spec = tmp_path / "spec.toml"
    spec.write_text('[spec]\nname = "n"\n[run]\nengine = "torch"\nbackend = "gloo"\nnprocs = 2\n'
                    '[[check]]\nname = "ar"\nkind = "collective"\nop = "all_reduce"\nsizes = ["8M"]\n'
                    'min_busbw_gbps = 100\n')
    res = qualify(QualifyConfig(spec=str(spec), records_from=str(src), out=str(tmp_path / "q")))
    (v,) = res.verdicts
    assert v.severity == Severity.UNKNOWN and v.code == "FB_BUSY_HOST" and res.exit_code == 3
    assert "its figures were measured on a busy host" in v.reason
    q = tmp_path / "q"
    verdicts = json.loads((q / "verdicts.json").read_text())
    assert verdicts["verdicts"][0]["busy_host"].startswith("busy host during")
    assert any(n.startswith("busy host during") for n in verdicts["notes"])
    props = {p.get("name"): p.get("value") for p in ET.parse(q / "junit.xml").iter("property")}
    assert props["busy_host"].startswith("busy host during") and props["code"] == "FB_BUSY_HOST"
    md = (q / "report.md").read_text()
    assert "Busy host while it measured: busy host during" in md and "FB_BUSY_HOST" in md
