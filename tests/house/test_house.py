"""Comments, docstrings, docs and test data say what and why, never which issue or lab round a change came
from, and never point at the maintainers' shared folder (a clone of this repository does not have it; the
domain facts are in docs/domain.md). The history is git's.

Every text file under fabricbench/, tests/ and docs/ is searched as `grep -rniE` would search it for an
issue number, a round number or that folder. A study's statistical rounds are real: spell them out ("the
third round") or quote the unit label ("train fsdp @ default #3"). A fixture quoted from an upstream
project's tracker is named and cited for that project ("nccl1911", "NVIDIA/nccl#1911").

Rooms stay small: no Python file under fabricbench/ or tests/ over MAX_FILE_LINES lines and no function over
MAX_FUNCTION_LINES, so that a reader holds a file's one concern, or a function's one step, in view. A file
that grows past it is split by concern (a section banner inside it is the seam), never trimmed of its
comments to pass.

    python3 -m pytest -q -p no:xdist tests/house/test_house.py
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from roots import ROOT

FOLDERS = ("fabricbench", "tests", "docs")
SKIP_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"}

# the words are built from pieces so that this file does not match itself
ISSUE, ROUND, SHARED = "iss" + "ue", "rou" + "nd", "sha" + "red/"
HISTORY = re.compile(rf"{ISSUE} ?[0-9]+|{ROUND} [0-9]+|{SHARED}", re.IGNORECASE)


def _texts():
    for top in FOLDERS:
        for path in sorted((ROOT / top).rglob("*")):
            if not path.is_file() or SKIP_DIRS & set(path.relative_to(ROOT).parts):
                continue
            data = path.read_bytes()
            if b"\0" in data[:8192]:  # binary, as grep -I skips it
                continue
            yield path, data.decode("utf-8", errors="replace")


def hits(text: str) -> list[tuple[int, str]]:
    """(line number, line) of each line that names an issue, a round by number or the shared folder."""
    return [(i, line) for i, line in enumerate(text.splitlines(), 1) if HISTORY.search(line)]


def test_the_pattern_finds_what_it_is_for():
    for bad in [f"({ISSUE} 37, item 5)", f"{ISSUE.title()} 18: a run", f"{ISSUE}19_check.py",
                f"relate, {ROUND} 2", f"see {SHARED}DOMAIN.md", f"a{ROUND} 450 ms"]:
        assert hits(bad), bad
    for fine in ["the third round", "train fsdp @ default #3", "NVIDIA/nccl#1911", "rounds 1, 3, 4",
                 "https://github.com/NVIDIA/nccl/issues/1911", "ncclras_nccl1911_2_26_2_mismatch.txt"]:
        assert not hits(fine), fine


def test_no_issue_or_round_numbers_and_no_shared_folder():
    found = [f"{path.relative_to(ROOT)}:{i}: {line.strip()[:120]}"
             for path, text in _texts() for i, line in hits(text)]
    assert not found, ("history labels or references to the shared folder (say what and why instead; a "
                       "study's round as 'the third round' or '#3'):\n" + "\n".join(found))


MAX_FILE_LINES = 400  # a file's newlines
MAX_FUNCTION_LINES = 80  # from its def to its last line; a nested function counts on its own
SIZED = ("fabricbench", "tests")


def too_long(root: Path, folders: tuple[str, ...] = SIZED) -> list[str]:
    """'PATH: N lines' for each Python file (.py, .pyi) under root's folders longer than MAX_FILE_LINES, and
    'PATH:LINE NAME(): N lines' for each function longer than MAX_FUNCTION_LINES (decorators not counted)."""
    found = []
    for top in folders:
        for path in sorted((root / top).rglob("*.py*")):
            rel = path.relative_to(root)
            if path.suffix not in (".py", ".pyi") or not path.is_file() or SKIP_DIRS & set(rel.parts):
                continue
            text = path.read_text(encoding="utf-8")
            lines = text.count("\n")
            if lines > MAX_FILE_LINES:
                found.append(f"{rel}: {lines} lines (at most {MAX_FILE_LINES})")
            for node in ast.walk(ast.parse(text, str(path))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1
                    if length > MAX_FUNCTION_LINES:
                        found.append(f"{rel}:{node.lineno} {node.name}(): {length} lines (at most "
                                     f"{MAX_FUNCTION_LINES})")
    return found


def test_the_size_guard_names_each_file_and_function_too_long(tmp_path):
    """Planted: a file one line over, one exactly at the bound, a function one line over with a nested one
    over it too, and one at the bound."""
    (tmp_path / "fabricbench" / "sub").mkdir(parents=True)
    (tmp_path / "tests").mkdir()
    (tmp_path / "fabricbench" / "sub" / "big.py").write_text("x = 1\n" * (MAX_FILE_LINES + 1))
    (tmp_path / "fabricbench" / "fits.py").write_text("x = 1\n" * MAX_FILE_LINES)
    inner = ["    def inner():"] + ["        pass"] * MAX_FUNCTION_LINES
    outer = ["def outer():", *inner, "    return inner"]
    at_bound = ["async def fits():"] + ["    pass"] * (MAX_FUNCTION_LINES - 1)
    (tmp_path / "tests" / "test_planted.py").write_text("\n".join(at_bound + outer) + "\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "long.py").write_text("x = 1\n" * 1000)  # outside the guarded folders
    assert too_long(tmp_path) == [
        f"fabricbench/sub/big.py: {MAX_FILE_LINES + 1} lines (at most {MAX_FILE_LINES})",
        f"tests/test_planted.py:{MAX_FUNCTION_LINES + 1} outer(): {MAX_FUNCTION_LINES + 3} lines (at most "
        f"{MAX_FUNCTION_LINES})",
        f"tests/test_planted.py:{MAX_FUNCTION_LINES + 2} inner(): {MAX_FUNCTION_LINES + 1} lines (at most "
        f"{MAX_FUNCTION_LINES})",
    ]


def test_no_file_or_function_too_long():
    found = too_long(ROOT)
    assert not found, ("split by concern (a module per concern, a function per named step), not by trimming "
                       "comments:\n" + "\n".join(found))


TIERS = ("unit", "cli", "e2e", "lab", "gpu", "house")


def misplaced_tests(tests: Path) -> list[str]:
    """Test files that sit outside the tier folders docs/testing.md names."""
    return sorted(str(p.relative_to(tests)) for p in tests.rglob("test_*.py")
                  if p.relative_to(tests).parts[0] not in TIERS and "data" not in p.relative_to(tests).parts
                  and "typed_user" not in p.relative_to(tests).parts)


def test_every_test_file_sits_in_a_tier_folder(tmp_path):
    assert misplaced_tests(ROOT / "tests") == []
    (tmp_path / "unit").mkdir()
    (tmp_path / "unit" / "test_ok.py").write_text("")
    (tmp_path / "test_flat.py").write_text("")
    (tmp_path / "misc").mkdir()
    (tmp_path / "misc" / "test_odd.py").write_text("")
    assert misplaced_tests(tmp_path) == ["misc/test_odd.py", "test_flat.py"]
    page = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    assert all(f"`tests/{tier}/`" in page for tier in TIERS)
