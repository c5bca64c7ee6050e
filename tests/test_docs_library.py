"""docs/library.md's train example runs as written, and gives what its words say: a TrainResult per run, of
the steps asked for (it said "one record per strategy" and gave 10 records of 37-40 steps in 9 minutes),
and the records it wrote as its to_dict()."""

import json
import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parent.parent / "docs" / "library.md"


def _train_lines() -> str:
    code = re.search(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S).group(1)
    lines = code.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("cfg = fabricbench.TrainConfig"))
    end = next(i for i, ln in enumerate(lines) if ln.startswith("[(r.strategy"))
    return "\n".join(lines[start:end + 1])


def test_the_example_is_on_the_page():
    src = _train_lines()
    assert "repeats=1, target_ci=None" in src and src.splitlines()[-1].startswith("[(r.strategy")


@pytest.mark.slow
def test_the_train_example_runs_as_written(tmp_path, monkeypatch):
    import fabricbench

    monkeypatch.chdir(tmp_path)
    src = _train_lines().splitlines()
    *body, shape = src
    scope = {"fabricbench": fabricbench}
    exec("\n".join(body), scope)  # noqa: S102 - the page's own lines
    got = eval(shape.split("  #")[0], scope)  # noqa: S307
    t = scope["t"]
    assert isinstance(t, fabricbench.TrainRunResult) and len(t.records) == 2  # one run per strategy, as the page says
    assert all(isinstance(r, fabricbench.TrainResult) for r in t.records)
    assert [(s, st, n) for s, st, n, _ in got] == [("ddp", "ok", 6), ("fsdp", "ok", 6)]
    assert all(sps > 0 for *_, sps in got)
    written = [json.loads(ln) for ln in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert written == t.to_dict()  # what --json prints, as written
