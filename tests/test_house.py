"""Comments, docstrings, docs and test data say what and why, never which issue or lab round a change came
from, and never point at the maintainers' shared folder (a clone of this repository does not have it; the
domain facts are in docs/domain.md). The history is git's.

Every text file under fabricbench/, tests/ and docs/ is searched as `grep -rniE` would search it for an
issue number, a round number or that folder. A study's statistical rounds are real: spell them out ("the
third round") or quote the unit label ("train fsdp @ default #3"). A fixture quoted from an upstream
project's tracker is named and cited for that project ("nccl1911", "NVIDIA/nccl#1911").

    python3 -m pytest -q -p no:xdist tests/test_house.py
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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
