"""One meaning per exit status: the enum (fabricbench/exitcodes.py) is the only place a status is chosen,
docs/exit-codes.md's table says exactly what it says, and the stall watchdog's status is none of qualify's.

    python3 -m pytest -q -p no:xdist tests/house/test_exit_table.py
"""

from __future__ import annotations

import ast
import re
import signal
from pathlib import Path

import pytest

from fabricbench import procs
from fabricbench.exitcodes import MEANINGS, Exit, by_signal
from fabricbench.jobs import heartbeat
from fabricbench.jobs.command import TIMEOUT_EXIT
from fabricbench.qualifying.verdict import EXIT, EXIT_NOTHING_MEASURED
from roots import ROOT

DOC = ROOT / "docs" / "exit-codes.md"
EXITS = {("sys", "exit"), ("os", "_exit"), ("ctx", "exit")}  # the calls that end a process with a status


def doc_table(text: str) -> dict[int, str]:
    """The first table of the page: status -> meaning."""
    rows: dict[int, str] = {}
    lines = text.splitlines()
    start = lines.index("| exit | meaning |")
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        m = re.fullmatch(r"\| (\d+) \| (.*) \|", line)
        assert m, f"docs/exit-codes.md: {line!r} is not a `| N | meaning |` row"
        assert int(m.group(1)) not in rows, f"docs/exit-codes.md gives {m.group(1)} twice"
        rows[int(m.group(1))] = m.group(2)
    return rows


def test_the_doc_table_is_the_enum_row_for_row():
    assert doc_table(DOC.read_text()) == {int(c): MEANINGS[c] for c in Exit}


def test_the_table_opens_the_page():
    text = DOC.read_text()
    assert text.index("| exit | meaning |") < text.index("\n## "), "the table comes before the page's sections"


def test_a_planted_drift_fails_the_doc_check():
    text = DOC.read_text().replace(f"| {int(Exit.STALLED)} |", f"| {int(Exit.WARNING)} |", 1)
    with pytest.raises(AssertionError, match="twice"):
        doc_table(text)
    text = DOC.read_text().replace(MEANINGS[Exit.USAGE], "bad input", 1)
    assert doc_table(text) != {int(c): MEANINGS[c] for c in Exit}


def test_no_number_means_two_things():
    assert len(Exit.__members__) == len({int(c) for c in Exit})  # no alias (@unique refuses one at import)


def test_the_stall_status_is_none_of_qualifys():
    qualify = set(EXIT.values()) | {EXIT_NOTHING_MEASURED}
    assert heartbeat.STALL_EXIT == Exit.STALLED and heartbeat.STALL_EXIT not in qualify
    from fabricbench.training import worker  # torch only inside its functions

    assert worker.STALL_EXIT == Exit.STALLED and worker.OOM_EXIT == Exit.OUT_OF_MEMORY
    assert worker.OOM_EXIT not in qualify  # a rank's OOM under srun is no "could not be measured"


def test_qualify_statuses_by_severity():
    from fabricbench.results.status import Severity

    assert EXIT == {Severity.PASS: 0, Severity.INFO: 0, Severity.CRITICAL: 1, Severity.UNKNOWN: 3,
                    Severity.WARNING: 4}
    assert EXIT_NOTHING_MEASURED == 5 and TIMEOUT_EXIT == 124


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_signals_end_with_the_shells_status(signum, status):
    e = KeyboardInterrupt()
    e.signum = signum  # type: ignore[attr-defined]
    assert by_signal(signum) == status and procs.exit_status(e) == status
    assert str(procs.exit_status(e)) == str(status)  # printed as its number, on every Python


def _literal_exits(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)):
            continue
        if (node.func.value.id, node.func.attr) in EXITS and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, int):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_every_chosen_status_is_a_member_not_a_number():
    found = [hit for p in sorted((ROOT / "fabricbench").rglob("*.py")) for hit in _literal_exits(p)]
    assert not found, "exit with a member of fabricbench.exitcodes.Exit (add one for a new meaning): " + \
                      "; ".join(found)
