"""One status vocabulary: every writer and reader in fabricbench/ names a status (or a qualify severity)
through fabricbench/results/status.py, never as a bare string.

    python -m pytest tests/house/test_status_vocabulary.py

An AST scan of every module flags a status word ("ok", "waived", "critical", ...) written as a string
literal where a status is meant: compared with, assigned to or passed as `status`/`severity` (a name, an
attribute, a ["status"] key, a .get("status")), put under a "status" key of a dict literal, or gathered in a
literal tuple/set/list or dict keys of two or more status words (a private subset or a style table). Such
a literal is how four vocabularies of status words once grew apart; use Status/Severity and the subsets
(REUSABLE, TIMED_TRAIN, TIMED_COLLECTIVE, VERDICT_OK) instead. Records still hold the plain strings:
Status is a str enum.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import fabricbench
import fabricbench.qualifying  # noqa: F401  (registers verdict and qualify_unit with results/)
import fabricbench.studying  # noqa: F401  (registers study_unit, plan and machine)
from fabricbench.results import fields, records
from fabricbench.results.status import (KIND_STATUSES, REUSABLE, TIMED_COLLECTIVE, TIMED_TRAIN, VERDICT_OK,
                                        Severity, Status, parse, parse_severity, worst)

ROOT = Path(fabricbench.__file__).parent
HOME = ROOT / "results" / "status.py"
WORDS = {s.value for s in Status} | {s.value for s in Severity}
NAMES = {"status", "severity", "sev"}  # what a status is called where it is held


def _is_status(node: ast.AST) -> bool:
    """`status`, `x.status`, `x["status"]`, `x.get("status")` (and the same for severity)."""
    if isinstance(node, ast.Name):
        return node.id in NAMES
    if isinstance(node, ast.Attribute):
        return node.attr in NAMES
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value in NAMES
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value in NAMES
    return False


def _words(node: ast.AST | None) -> list[str]:
    """Status words a value spells literally: a constant, either branch of `a if c else b`, `x or "error"`,
    or the items of a literal tuple/list/set."""
    if node is None:
        return []
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) and node.value in WORDS else []
    if isinstance(node, ast.IfExp):
        return _words(node.body) + _words(node.orelse)
    if isinstance(node, ast.BoolOp):
        return [w for v in node.values for w in _words(v)]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [w for v in node.elts for w in _words(v)]
    if isinstance(node, ast.Starred):
        return _words(node.value)
    return []


def _all_words(elts: list[ast.AST | None]) -> bool:
    return len(elts) >= 2 and all(isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value in WORDS
                                  for e in elts)


def violations(source: str) -> list[tuple[int, str]]:
    """(line, what) for every status word spelt as a literal where a status is meant."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        found: list[str] = []
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_status(s) for s in sides):
                found = [w for s in sides if not _is_status(s) for w in _words(s)]
        elif isinstance(node, ast.keyword) and node.arg in NAMES:
            found = _words(node.value)
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value in NAMES:
                    found += _words(v)
            if _all_words(node.keys):
                found += [k.value for k in node.keys]
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            flat = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
            if any(_is_status(t) for t in flat):
                value = node.value
                if isinstance(value, ast.Tuple) and any(isinstance(t, ast.Tuple) for t in targets):
                    # status, message = "ok", None: the element that lands in `status`
                    tgt = next(t for t in targets if isinstance(t, ast.Tuple))
                    found = [w for t, v in zip(tgt.elts, value.elts) if _is_status(t) for w in _words(v)]
                else:
                    found = _words(value)
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and _all_words(node.elts):
            found = [e.value for e in node.elts]
        elif isinstance(node, ast.arguments):
            args = [*node.posonlyargs, *node.args]
            pairs = list(zip(args[len(args) - len(node.defaults):], node.defaults))
            pairs += [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults) if d is not None]
            found = [w for a, d in pairs if a.arg in NAMES for w in _words(d)]
        if found:
            out.append((getattr(node, "lineno", 0), ", ".join(sorted(set(found)))))
    return out


def test_no_status_literal_outside_the_status_module():
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        if path == HOME:
            continue
        for line, words in sorted(set(violations(path.read_text()))):
            bad.append(f"{path.relative_to(ROOT.parent)}:{line}: {words}")
    assert not bad, ("status words spelt as literals; use fabricbench.results.status (Status, Severity, "
                     "the subsets):\n" + "\n".join(bad))


@pytest.mark.parametrize("code", [
    'if rec.get("status") == "ok": pass',
    'ok = r["status"] in ("ok", "flagged")',
    'x = v.status != "waived"',
    'out.update(status="oom", message=m)',
    'rec = {"kind": "train", "status": "error"}',
    'status = "wrong" if wrong else "ok"',
    'status, message = "ok", None',
    'REUSABLE = ("ok", "waived")',
    'STYLE = {"pass": "green", "fail": "red"}',
    'def f(severity="critical"): pass',
    'class U:\n    status: str = "running"',
    'n = sum(1 for v in vs if v.severity in ("critical", "warning"))',
])
def test_the_scan_catches_each_way_a_literal_status_is_written(code):
    assert violations(code), code


@pytest.mark.parametrize("code", [
    'if rec.get("status") == Status.OK: pass',
    'msg = {"error": "no trace"}',  # a key named error, not a status
    'if kind == "error": pass',  # a channel message kind
    'out.update(status=Status.OOM, message="ok")',
    'x = ("#wrong", "wrong", "error", "#error")',  # column names, not all status words
    'verdict = "unknown"',  # advise's fit verdict is another axis
])
def test_the_scan_leaves_other_strings_alone(code):
    assert not violations(code), code


def test_status_is_written_as_the_plain_string():
    rec = {"status": Status.WAIVED, "severity": Severity.CRITICAL}
    assert json.dumps(rec) == '{"status": "waived", "severity": "critical"}'
    assert f"{Status.OK}" == "ok" and str(Severity.INFO) == "info"
    assert {"ok": 1}[Status.OK] == 1  # a table keyed by the enum answers the plain string, and back
    assert {Status.OK: 1}["ok"] == 1


def test_every_kind_reads_back_what_its_writers_write():
    for kind, allowed in KIND_STATUSES.items():
        for s in Status:
            assert (parse(s.value, kind) is s) == (s in allowed), (kind, s)
    assert parse("bogus") is None and parse(None) is None and parse("ok", "verdict") is None
    assert REUSABLE <= KIND_STATUSES["collective"] and TIMED_COLLECTIVE <= KIND_STATUSES["collective"]
    assert TIMED_TRAIN <= KIND_STATUSES["train"] and VERDICT_OK <= KIND_STATUSES["verdict"]


def test_severity_is_ordered_from_best_to_worst():
    assert [s.rank for s in Severity] == [0, 1, 2, 3, 4]
    assert worst(["info", "critical", "warning"]) is Severity.CRITICAL
    assert worst([]) is Severity.PASS
    assert parse_severity("warning") is Severity.WARNING and parse_severity("fail") is None


def test_a_record_with_another_kinds_status_is_skipped():
    line = json.dumps({"schema": "fabricbench/1", "kind": "train", "strategy": "ddp", "status": "pass"})
    got = records.parse_lines(line + "\n")
    assert got.records == [] and "status 'pass' is not one a train record can have" in got.warnings[0]


def test_every_kind_with_a_status_field_names_its_statuses():
    with_status = {kind for kind, spec in fields.FIELDS.items() if {"status", "status!"} & set(spec)}
    assert with_status <= set(KIND_STATUSES), with_status - set(KIND_STATUSES)
