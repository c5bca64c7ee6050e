"""docs/library.md's examples run as written. Every ```python block of the page runs in a folder of its own
(tests/data linked into it, as a reader's clone of the repository has it), by its fence's tier:

    ```python          the default tests (CPU, seconds: files read, plans, nothing measured)
    ```python slow     -m slow (real processes on the CPU: gloo ranks, training, a study)
    ```python gpu:N    where N GPUs are detected (tests/conftest.py GPUS), skipped with the count otherwise

A block stands alone: it imports what it uses and reads only tests/data, so that any one of them can run
by itself. CHECKS holds, for a block that says what its result is, the check that it is so.

    python3 -m pytest -q -p no:xdist tests/house/test_docs_library.py                 # the default tier
    python3 -m pytest -q -p no:xdist -m slow tests/house/test_docs_library.py -k train  # one slow block
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from roots import DATA, ROOT

PAGE = ROOT / "docs" / "library.md"
FENCE = re.compile(r"^```python(?P<tags>[^\n]*)\n(?P<code>.*?)^```$", re.M | re.S)
TAG = re.compile(r"^(?:slow|gpu:(?P<gpus>[1-9][0-9]*))$")


@dataclass(frozen=True)
class Block:
    line: int  # of its fence, in docs/library.md
    tier: str  # "default", "slow" or "gpu"
    gpus: int  # GPUs it needs (0: none)
    code: str

    @property
    def name(self) -> str:
        """L<line>-<the first verb it calls>, a test id that -k can pick (and CHECKS is keyed by)."""
        verb = re.search(r"fabricbench\.([a-z_]\w*)\(", self.code)
        return f"L{self.line}-{verb.group(1) if verb else 'block'}"


def blocks(text: str) -> list[Block]:
    out = []
    for m in FENCE.finditer(text):
        tags, line = m.group("tags").strip(), text.count("\n", 0, m.start()) + 1
        tag = TAG.match(tags) if tags else None
        assert not tags or tag, f"docs/library.md:{line}: ```python {tags}: the tiers are slow and gpu:N"
        gpus = int(tag.group("gpus")) if tag and tag.group("gpus") else 0
        out.append(Block(line, "gpu" if gpus else (tags or "default"), gpus, m.group("code")))
    return out


def run_block(block: Block, folder: Path, monkeypatch) -> dict[str, Any]:
    """The block's code, run in `folder` (tests/data linked in) as a script of its own; its names."""
    (folder / "tests").mkdir()
    (folder / "tests" / "data").symlink_to(DATA)
    monkeypatch.chdir(folder)
    scope: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(block.code, f"{PAGE}:{block.line + 1}", "exec"), scope)  # noqa: S102 - the page's own code
    return scope


def check_train(scope: dict[str, Any], folder: Path) -> None:
    """The page says one run of 6 steps per strategy, a TrainResult each, and the records it wrote as to_dict()."""
    import fabricbench

    t = scope["t"]
    assert isinstance(t, fabricbench.TrainRunResult) and len(t.records) == 2
    assert all(isinstance(r, fabricbench.TrainResult) for r in t.records)
    assert [(r.strategy, r.status, r.steps) for r in t.records] == [("ddp", "ok", 6), ("fsdp", "ok", 6)]
    assert all(r.samples_per_s > 0 for r in t.records)
    written = [json.loads(ln) for ln in (folder / "t.jsonl").read_text().splitlines()]
    assert written == t.to_dict()  # what --json prints, as written


def check_execute(scope: dict[str, Any], folder: Path) -> None:
    r = scope["r"]
    assert (r.exit_status, r.status) == (0, "ok")
    written = [json.loads(ln) for ln in (folder / "exec.jsonl").read_text().splitlines()]
    assert [rec["kind"] for rec in written] == ["exec"] and written[0]["exit_status"] == 0


def check_relate(scope: dict[str, Any], folder: Path) -> None:
    """A row per strategy and fabric of the CPU lab, and the job's one row unpriced, as the page says."""
    assert {(row.strategy, row.fabric) for row in scope["rel"].rows} >= {("ddp", "default"), ("fsdp", "default")}
    assert [row.verdict for row in scope["j"].rows] == ["unpriced"] and "nranks differ" in scope["j"].problems[0]


CHECKS: dict[str, Callable[[dict[str, Any], Path], None]] = {  # by the verb of Block.name
    "train": check_train, "execute": check_execute, "relate": check_relate}


def _params(tier: str) -> list:
    chosen = [b for b in blocks(PAGE.read_text()) if b.tier == tier]
    def marks(b: Block) -> list:
        return {"slow": [pytest.mark.slow], "gpu": [pytest.mark.gpu(b.gpus)]}.get(b.tier, [])

    return [pytest.param(b, id=b.name, marks=marks(b)) for b in chosen]


def _run_and_check(block: Block, tmp_path: Path, monkeypatch) -> None:
    scope = run_block(block, tmp_path, monkeypatch)
    check = CHECKS.get(block.name.partition("-")[2])
    if check is not None:
        check(scope, tmp_path)


@pytest.mark.parametrize("block", _params("default"))
def test_a_cpu_block_runs(block, tmp_path, monkeypatch):
    _run_and_check(block, tmp_path, monkeypatch)


@pytest.mark.parametrize("block", _params("slow"))
def test_a_slow_block_runs(block, tmp_path, monkeypatch):
    _run_and_check(block, tmp_path, monkeypatch)


@pytest.mark.parametrize("block", _params("gpu"))
def test_a_gpu_block_runs(block, tmp_path, monkeypatch):
    _run_and_check(block, tmp_path, monkeypatch)


def test_the_page_is_read_as_its_fences_say():
    found = blocks(PAGE.read_text())
    assert {b.tier for b in found} == {"default", "slow", "gpu"}
    assert any(b.name.endswith("-train") and "repeats=1, target_ci=None" in b.code for b in found)
    assert set(CHECKS) <= {b.name.partition("-")[2] for b in found}  # a check whose block was renamed checks nothing
    page = "```python\nx = 1\n```\n\n```python slow\ny = 2\n```\n\n```python gpu:4\nz = 3\n```\n\n```sh\nls\n```\n"
    assert [(b.line, b.tier, b.gpus, b.code) for b in blocks(page)] == [
        (1, "default", 0, "x = 1\n"), (5, "slow", 0, "y = 2\n"), (9, "gpu", 4, "z = 3\n")]
    with pytest.raises(AssertionError, match="the tiers are slow and gpu:N"):
        blocks("```python gpu\nz = 3\n```\n")
