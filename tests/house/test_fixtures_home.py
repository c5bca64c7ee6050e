"""No test reads benchmarks/: that folder is the lab's notebook, organised by question, whose results move and
are pruned as the lab goes on. A test that needs a recorded run reads its copy in tests/data/.

A test reads a path when it builds one: `ROOT / "benchmarks" / ...` (a path joined with a string that starts
with that folder) or a call given such a string (`Path("benchmarks/...")`, `open(...)`, `copytree(...)`).
A string that only names a file, as a docstring or a label the documents print does, reads nothing.

    python3 -m pytest -q -p no:xdist tests/house/test_fixtures_home.py
"""

from __future__ import annotations

import ast

from roots import TESTS


def _bench(node) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value.strip("/").split("/")[0] == "benchmarks")


def reads_of_benchmarks(source: str) -> list[int]:
    """The lines of `source` that build a path into benchmarks/."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and (_bench(node.left) or _bench(node.right)):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and any(_bench(a) for a in node.args):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_no_test_builds_a_path_into_benchmarks():
    found = {str(p.relative_to(TESTS)): reads_of_benchmarks(p.read_text())
             for p in sorted(TESTS.rglob("*.py")) if "data" not in p.relative_to(TESTS).parts}
    assert {name: lines for name, lines in found.items() if lines} == {}


def test_the_check_sees_each_way_of_building_such_a_path():
    planted = '''
from pathlib import Path
ROOT = Path(__file__).parent.parent
a = ROOT / "benchmarks" / "results" / "cpu-lab"
b = ROOT / "benchmarks/study/results/cpu-lab/study"
c = Path("benchmarks/relate/table.py")
d = open("benchmarks/README.md")
label = "benchmarks/relate/results/cpu-lab/relate-lab/before/records.jsonl"  # printed, not read
"""benchmarks/relate/table.py makes it"""
'''
    assert reads_of_benchmarks(planted) == [4, 5, 6, 7]
