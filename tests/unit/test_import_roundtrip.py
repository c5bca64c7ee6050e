"""The import round trip, for every op: each nccl-tests file in tests/data/imports imports into records
that `compare --with` and `qualify --from` then use (all_gather records included, although
nccl-tests prints a rank's count beside the whole buffer's size). Every step is the command itself:
`fabricbench import`, `fabricbench compare --with ... --json` (its own fabric's child sweep stood in for) and
`fabricbench qualify --spec ... --from ...`; every op fabricbench measures is covered (the first test)."""

import json
import shutil
from pathlib import Path

import pytest

from fabricbench.collectives import COLLECTIVES
from fabricbench.importing import import_file
from fabricbench.measuring import child_sweeps as compare_mod
from fabricbench.measuring.child import ChildRun
from fabricbench.results.records import read
from fabricbench.sizes import format_size
import roots
from clirun import run_cli, run_cli_captured

DATA = roots.DATA / "imports"
# files that hold nccl-tests tables; a file nccl-tests did not name its op in is given the name its user
# would (the op comes from the file name then)
NAMED = {"nccl_tests_mpirun_prefix.txt": "all_reduce_perf.log"}
# a post that ends inside its first row: no measurement (test_import.py checks its error)
NO_ROWS = {"nccl_tests_2023_multinode.txt"}
TABLES = sorted(p.name for p in DATA.iterdir() if p.is_file() and p.suffix != ".md" and p.name not in NO_ROWS
                and import_file(p).format.startswith("nccl-tests"))


def _imported(name: str, tmp_path: Path) -> Path:
    src = tmp_path / NAMED.get(name, name)
    shutil.copy(DATA / name, src)
    out = tmp_path / "imported.jsonl"
    code, _, err = run_cli_captured(["import", src, "--out", out])
    assert code == 0, err
    return out


def test_every_table_fixture_is_covered():
    # the fixtures this module must cover, by op: all-reduce, all-gather, all-to-all, broadcast, reduce-scatter
    ops = {r["op"] for n in TABLES for r in import_file(DATA / n).records if r.get("op")}
    assert {"all_reduce", "all_gather", "all_to_all", "broadcast", "reduce_scatter"} <= ops
    assert len(TABLES) >= 10


@pytest.mark.parametrize("name", TABLES)
def test_imported_records_are_read_back_whole(name, tmp_path):
    out = _imported(name, tmp_path)
    got = read(out)
    assert got.warnings == []  # no record skipped by the schema's checks (count vs bytes, ...)
    colls = [r for r in got.records if r["kind"] == "collective"]
    assert colls and all(r["op"] for r in colls)
    for r in colls:
        # count is the whole buffer's elements, as in fabricbench's own records; nccl-tests' kept beside
        if r.get("count") is not None and r["extra"].get("nccl_count") is not None:
            assert r["count"] % r["extra"]["nccl_count"] == 0 and r["count"] > r["extra"]["nccl_count"]


def _compare_with(out: Path, op: str, dtype: str, monkeypatch, capsys) -> dict:
    """`fabricbench compare --with OUT --json`, the command itself; its own fabric stands in for nothing
    measured (the child sweep is replaced by a waived run: the import, not gloo, is under test)."""
    monkeypatch.setattr(compare_mod, "run_child", lambda fabric, job, **_: ChildRun(fabric=fabric, waived="test"))
    capsys.readouterr()
    code, stdout, err = run_cli(["compare", "--fabrics", "default", "--engine", "torch", "--backend", "gloo",
                                 "--nprocs", "2", "--sizes", "1K", "--ops", op, "--dtype", dtype, "--with", out,
                                 "--json"], capsys)
    assert code == 0, err
    return json.loads(stdout)


def _qualify_from(out: Path, op: str, dtype: str, size: int, tmp_path: Path) -> dict:
    """`fabricbench qualify --spec S --from OUT`, the command itself: one collective check at `size`."""
    spec = tmp_path / f"{op}-{dtype}.toml"
    spec.write_text(f'[spec]\nname = "rt"\n[[check]]\nname = "bw"\nkind = "collective"\nop = "{op}"\n'
                    f'dtype = "{dtype}"\nsizes = ["{format_size(size)}"]\nmax_latency_us = 1e6\n')
    folder = tmp_path / f"q-{op}-{dtype}"
    # qualify's codes: 0 pass, 1 critical, 2 bad input, ...
    code, _, err = run_cli_captured(["qualify", "--spec", spec, "--from", out, "--out", folder, "--quiet"])
    assert code == 0, (op, dtype, code, err)
    return json.loads((folder / "verdicts.json").read_text())


@pytest.mark.parametrize("name", TABLES)
def test_compare_with_and_qualify_from_use_every_op(name, tmp_path, monkeypatch, capsys):
    out = _imported(name, tmp_path)
    colls = [r for r in read(out).records if r["kind"] == "collective"]
    for op, dtype in sorted({(r["op"], r["dtype"]) for r in colls}):
        mine = [r for r in colls if r["op"] == op and r["dtype"] == dtype]
        if op not in COLLECTIVES.names():  # an op fabricbench does not measure: compare and qualify refuse it
            continue
        outside = [r for r in mine if not r.get("inplace") and r["bytes"]]  # a 0 B row has no bandwidth
        if outside:  # compare --with shows the out-of-place rows, each in the comparison table
            res = _compare_with(out, op, dtype, monkeypatch, capsys)
            shown = [r for r in res["records"] if r.get("op") == op and r.get("fabric") != "default"]
            assert len(shown) == len(outside), (op, dtype)
            sizes = {row["bytes"] for row in res["comparison"] if row["op"] == op
                     and any(v is not None for k, v in row[res["metric"]].items() if k != "default")}
            assert {r["bytes"] for r in outside if r.get(res["metric"])} <= sizes, (op, sorted(sizes))
        size = max(r["bytes"] for r in mine if r.get("time_us") is not None)
        verdicts = _qualify_from(out, op, dtype, size, tmp_path)
        assert [v["status"] for v in verdicts["verdicts"]] in (["pass"], ["waived"]), (op, verdicts)
