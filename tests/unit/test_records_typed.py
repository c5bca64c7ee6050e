"""Typed readers per record kind: a results file's collective, train and verdict records read back as
CollectiveResult, TrainResult and qualify's Verdict (results/records.py Records.typed, read_typed), their
status the Status enum, written back as the same plain strings.

    python -m pytest tests/unit/test_records_typed.py
"""

from __future__ import annotations

import json

from fabricbench.files import dumps
from fabricbench.qualifying.verdict import Verdict, at_least, combine, error, waived
from fabricbench.results import fields, records
from fabricbench.results.schema import SCHEMA, CollectiveResult, TrainResult, header
from fabricbench.results.status import Severity, Status
from fabricbench.studying.kinds import unit_of


def _collective(**over) -> CollectiveResult:
    fields = dict(op="all_reduce", dtype="float32", bytes=1 << 20, requested_bytes=1 << 20, count=1 << 18, nranks=2,
                  gpus=[0, 1], inplace=False, graph=False, iters=20, time_us=41.5, mean_us=42.0, min_us=40.0,
                  max_us=47.0, p95_us=46.0, cv=0.03, ci95_rel=0.01, algbw_gbps=25.27, busbw_gbps=25.27,
                  busbw_factor=1.0, busbw_note=None, wrong=0, status=Status.OK, engine="torch", backend="gloo",
                  context=header("collective", run_id="r1"))
    return CollectiveResult(**{**fields, **over})


def test_collective_records_read_back_typed_with_the_status_enum(tmp_path):
    wrote = [_collective(), _collective(requested_bytes=64, bytes=64, count=16, wrong=3, status=Status.WRONG)]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(dumps(r.to_dict()) + "\n" for r in wrote) + '{"not": "a record"}\n')
    assert '"status": "ok"' in path.read_text()  # the file holds the plain string
    got, warnings = records.read_typed(path, CollectiveResult)
    assert [g.status for g in got] == [Status.OK, Status.WRONG]
    assert got[0].status is Status.OK and got[1].wrong == 3 and got[0].busbw_gbps == 25.27
    assert got[0].to_dict() == wrote[0].to_dict()  # nothing lost on the way back
    assert len(warnings) == 1 and "line 3" in warnings[0]


def test_an_imported_collective_missing_fields_types_with_none():
    rec = {"schema": SCHEMA, "kind": "collective", "op": None, "bytes": 4096, "nranks": None, "status": "ok",
           "time_us": 12.0, "source": {"tool": "nccl-tests"}}
    got = records.parse_lines(json.dumps(rec) + "\n")
    (res,) = got.typed(CollectiveResult)
    assert res.op is None and res.nranks is None and res.bytes == 4096 and res.time_us == 12.0
    assert res.dtype is None and res.status is Status.OK and res.context["source"] == {"tool": "nccl-tests"}


def test_train_records_read_back_typed():
    lines = [json.dumps({"schema": SCHEMA, "kind": "train", "strategy": "zero2", "status": "flagged",
                         "step_time": {"median_s": 0.25}, "nranks": 2, "custom": 7}),
             json.dumps({"schema": SCHEMA, "kind": "collective", "op": "all_reduce", "bytes": 8, "nranks": 2,
                         "status": "ok"})]
    got = records.parse_lines("\n".join(lines) + "\n")
    (t,) = got.typed(TrainResult)
    assert t.strategy == "zero2" and t.status is Status.FLAGGED and t.step_time == {"median_s": 0.25}
    assert t.nranks == 2 and t.extra == {"custom": 7} and t.model is None


def test_verdict_records_round_trip_through_the_shared_reader():
    v = combine("busbw", "collective", [at_least("busbw", 280.0, 300.0, unit="GB/s", subject="GPUs 0,1"),
                                        at_least("busbw", 310.0, 300.0, unit="GB/s", subject="GPUs 2,3")])
    w = combine("pairs", "p2p", [waived("p2p", "one GPU")])
    text = "".join(dumps(x.to_record("r1")) + "\n" for x in (v, w))
    got = records.parse_lines(text)
    assert got.warnings == []
    back = got.typed(Verdict)
    assert [(b.check, b.kind, b.status, b.severity) for b in back] == [
        ("busbw", "collective", Status.FAIL, Severity.CRITICAL), ("pairs", "p2p", Status.WAIVED, Severity.INFO)]
    assert back[0].headroom == v.headroom and back[0].code == v.code and back[0].message() == v.message()
    assert [i.status for i in back[0].items] == [Status.FAIL, Status.PASS]


def test_a_verdict_record_with_a_stranger_severity_is_skipped():
    rec = {**combine("c", "collective", [error("busbw", "no GPU")]).to_record("r1"), "severity": "meh"}
    got = records.parse_lines(json.dumps(rec) + "\n")
    assert got.records == [] and "severity 'meh' is not a severity" in got.warnings[0]


def test_older_and_foreign_verdicts():
    # a verdicts.json entry (kind = the check's kind) from before severities: graded from its status
    old = Verdict.from_record({"check": "bw", "kind": "collective", "status": "fail", "measured": 1.0})
    assert old.kind == "collective" and old.severity is Severity.CRITICAL and old.code == "FB_FAIL"
    err = Verdict.from_record({"check": "bw", "kind": "collective", "status": "error"})
    assert err.severity is Severity.UNKNOWN
    assert Verdict.from_record({"check": "bw", "status": "ok"}) is None  # a collective's status, not a verdict's
    assert Verdict.from_record({"status": "pass"}) is None and Verdict.from_record(["x"]) is None


def test_the_fleet_reader_checks_the_shared_readers_field_types():
    from fabricbench.qualifying import inputs

    assert fields.flat_types("collective", "time_us") == (int, float)
    assert fields.flat_types("copy", "src") == (str,) and fields.flat_types(None, "host") == (str,)
    for kind, table in inputs._TYPES.items():  # every type the fleet checks is the shared table's
        for key, types in table.items():
            assert types == fields.flat_types(kind, key), (kind, key)
    good = {"schema": SCHEMA, "kind": "collective", "op": "all_reduce", "time_us": 3, "status": "ok"}
    assert inputs.well_typed(good)
    assert not inputs.well_typed({**good, "time_us": "3"}) and not inputs.well_typed({**good, "time_us": True})
    assert records.parse_lines(json.dumps({**good, "bytes": 8, "nranks": 2, "time_us": "3"})).records == []


def test_qualify_resumes_units_through_the_one_store_by_status():
    from fabricbench.qualifying.context import UnitResult, _closed_units

    def unit(key, **kw):
        return {**header("qualify_unit", run_id="r1"), **UnitResult(key=key, **kw).to_record()}

    recs = [unit("a"), unit("b", error="child exit 1"), unit("c", waived="no root for a shaped fabric"),
            unit("d", error="timed out"), unit("d"),  # failed, then measured again: the last one counts
            {**header("qualify_unit", run_id="r0"), "key": "e", "error": "exit 1"},  # before units had a status
            {**header("qualify_unit", run_id="r0"), "key": "f", "error": None},
            {**header("collective", run_id="r1"), "op": "all_reduce", "extra": {"qualify_unit": "a"}}]
    assert recs[0]["status"] == "ok" and recs[1]["status"] == "error" and recs[2]["status"] == "waived"
    assert records.parse_lines("".join(json.dumps(r) + "\n" for r in recs[:5])).warnings == []
    closed = _closed_units(recs)
    assert sorted(closed) == ["a", "c", "d", "f"]
    assert closed["c"].waived and closed["c"].status is Status.WAIVED and closed["a"].status is Status.OK
    assert [r["op"] for r in closed["a"].records] == ["all_reduce"] and closed["a"].reused


def test_records_in_memory_are_checked_then_typed():
    good = {"schema": SCHEMA, "kind": "train", "strategy": "ddp", "status": "ok", "first_loss": 2.5}
    bad = {**good, "first_loss": "2.5"}
    other = {"schema": SCHEMA, "kind": "collective", "op": "all_reduce", "bytes": 8, "nranks": 2, "status": "ok"}
    runs, warnings = records.typed([other, bad, good], TrainResult, source="child")
    assert [r.first_loss for r in runs] == [2.5] and runs[0].status is Status.OK
    assert warnings == ["child: record 2: train record: first_loss is a string, not a number; skipped"]
    assert runs[0].reached("last_loss") is None and runs[0].reached("first_loss") == 2.5


def test_a_train_trace_entry_needs_an_op_and_a_size():
    # relate prices each traced collective and advise sums their sizes: an entry without op or bytes, or
    # a null in place of one, was a KeyError or TypeError there; now the reader leaves the record out
    base = {"schema": SCHEMA, "kind": "train", "strategy": "ddp", "status": "ok"}
    good = {"op": "all_reduce", "bytes": 1024, "calls_per_step": 1.0}
    lines = [dict(base, comm={"collectives": [good]}),
             dict(base, comm={"collectives": [{"bytes": 1024}]}),
             dict(base, comm={"collectives": [{"op": "all_reduce"}]}),
             dict(base, comm={"collectives": [None, good]}),
             dict(base, losses=[1.0, None, 0.5], gpu_busy_fraction=0.4, step_time={"median_s": 0.1, "ci95_rel": 0.02})]
    got = records.parse_lines("".join(json.dumps(x) + "\n" for x in lines))
    assert [w.split(": ", 2)[-1] for w in got.warnings] == [
        "train record: comm.collectives[0].op is missing; skipped",
        "train record: comm.collectives[0].bytes is missing; skipped",
        "train record: comm.collectives[0] is null, not an object; skipped"]
    first, last = got.typed(TrainResult)
    assert first.fabric == "default" and last.gpu_busy_fraction == 0.4 and last.losses == [1.0, None, 0.5]
    bad = records.parse_lines(json.dumps(dict(base, gpu_busy_fraction="busy")) + "\n")
    assert bad.warnings == ["results file: line 1: train record: gpu_busy_fraction is a string, not a number; skipped"]


def test_the_facts_a_study_writes_onto_a_record_read_typed():
    # study/runner adds the study tag and the fabric's facts after to_dict, and measuring/child the mismatch
    # flag: the report reads them as attributes; a record without them writes no null for them
    facts = {"study": {"unit": "sweep @ shaped:1gbit", "attempt": "a1"}, "fabric_env": {"NCCL_P2P_DISABLE": "1"},
             "shaped_rate_bps": 1e9, "netns": "fb-1", "transport_mismatch": "asked P2P off, saw P2P"}
    coll = {"schema": SCHEMA, "kind": "collective", "op": "all_reduce", "bytes": 8, "nranks": 2, "status": "ok",
            "extra": None, **facts}
    train = {"schema": SCHEMA, "kind": "train", "strategy": "ddp", "status": "ok", **facts}
    got = records.parse_lines(json.dumps(coll) + "\n" + json.dumps(train) + "\n")
    (c,), (t,) = got.typed(CollectiveResult), got.typed(TrainResult)
    assert unit_of(c) == "sweep @ shaped:1gbit" and unit_of(coll) == unit_of(c) and c.fabric_env == {"NCCL_P2P_DISABLE": "1"}
    assert c.shaped_rate_bps == 1e9 and c.netns == "fb-1" and c.transport_mismatch == "asked P2P off, saw P2P"
    assert c.extra == {}  # null (an imported record's) reads as no extras
    assert t.reached("fabric_env") == {"NCCL_P2P_DISABLE": "1"} and t.reached("shaped_rate_bps") == 1e9
    assert t.netns == "fb-1"
    assert "transport_mismatch" not in _collective().to_dict() and unit_of(_collective()) is None
    bad = records.parse_lines("".join(json.dumps(dict(coll, **{k: v})) + "\n" for k, v in
                                      (("fabric_env", "x"), ("shaped_rate_bps", "1g"), ("netns", 3),
                                       ("transport_mismatch", [1]))))
    assert not bad.records and len(bad.warnings) == 4
    assert "fabric_env is a string, not an object" in bad.warnings[0]
