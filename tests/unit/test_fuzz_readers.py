"""Property tests: every reader of a user file is total.

    python3 -m pytest -q tests/unit/test_fuzz_readers.py      (about half a minute on CPU)

Each reader is driven with damaged versions of real files (cut short, bytes flipped or inserted, lines
dropped or swapped, JSON values replaced by values of other types). The property: it returns records
(and warnings), or raises UsageError with one line. Nothing else escapes, and what it returns is typed as
results/records.py promises.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fabricbench
from fabricbench.errors import UsageError
from fabricbench.results import records
from fabricbench.results.repair import repair
from fabricbench.topology import load_file
from fabricbench.training.models import read_config_json
from roots import DATA

RESULTS = [DATA / "qualify/gloo_node_results.jsonl",
           DATA / "study/cpu-lab/units/train_ddp_default.jsonl",
           DATA / "study/cpu-lab/units/sweep_default.jsonl"]
TOPOS = sorted((DATA / "topo").glob("*.txt"))
SETTINGS = settings(max_examples=100, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

json_values = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True)
                           | st.text(max_size=8), lambda c: st.lists(c, max_size=3)
                           | st.dictionaries(st.text(max_size=6), c, max_size=3), max_leaves=6)


@st.composite
def damaged_bytes(draw, sources):
    """A real file, then a few damages of the kinds a crash, a transfer or an editor does."""
    data = bytearray(draw(st.sampled_from(sources)).read_bytes())
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["cut", "flip", "insert", "delete", "swap", "dup"]))
        n = len(data)
        at = draw(st.integers(0, max(0, n - 1)))
        if kind == "cut":
            del data[at:]
        elif kind == "flip" and n:
            data[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete":
            del data[at:at + draw(st.integers(1, 64))]
        else:
            lines = bytes(data).split(b"\n")
            if len(lines) > 2:
                i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
                if kind == "swap":
                    lines[i], lines[j] = lines[j], lines[i]
                else:
                    lines.insert(i, lines[j][: draw(st.integers(0, len(lines[j])))])
                data = bytearray(b"\n".join(lines))
    return bytes(data)


@st.composite
def retyped_records(draw):
    """Real records with some fields given values of other JSON types (or dropped)."""
    lines = [json.loads(ln) for p in RESULTS for ln in p.read_text().splitlines()[:6] if ln.strip()]
    out = []
    for rec in draw(st.lists(st.sampled_from(lines), min_size=1, max_size=6)):
        rec = json.loads(json.dumps(rec))
        for key in draw(st.lists(st.sampled_from(sorted(rec)), max_size=4)):
            if draw(st.booleans()):
                rec[key] = draw(json_values)
            else:
                rec.pop(key, None)
        out.append(json.dumps(rec, allow_nan=True))
    return ("\n".join(out) + "\n").encode()


def _one_line(e: UsageError) -> None:
    assert str(e) and "\n" not in str(e).strip(), str(e)


def _check_records(got: records.Records) -> None:
    for rec in got.records:
        assert records.check_record(rec) is None  # every record returned passes its kind's field types


@SETTINGS
@given(data=st.one_of(damaged_bytes(RESULTS), retyped_records()))
def test_results_reader_is_total(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("r") / "r.jsonl"
    path.write_bytes(data)
    try:
        got = records.read(path)
    except UsageError as e:  # only a newer schema is an error for a readable file
        _one_line(e)
        assert "newer" in str(e)
        return
    _check_records(got)
    assert len(got.records) + len(got.warnings) <= got.lines


@SETTINGS
@given(data=st.one_of(damaged_bytes(RESULTS), retyped_records()))
def test_relate_reads_damaged_files_or_says_why(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("rel") / "r.jsonl"
    path.write_bytes(data)
    try:
        fabricbench.relate(fabricbench.RelateConfig(inputs=[path, RESULTS[0]]))
    except UsageError as e:
        _one_line(e)


@SETTINGS
@given(data=damaged_bytes(RESULTS))
def test_repair_leaves_every_line_parsing(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("rep") / "r.jsonl"
    path.write_bytes(data)
    try:
        repair(path)
    except UsageError as e:  # damage left no fabricbench record to vouch for the file: left as it was
        _one_line(e)
        assert "not fabricbench records" in str(e) and path.read_bytes() == data
        return
    text = path.read_bytes()
    assert not text or text.endswith(b"\n")
    for line in text.split(b"\n"):
        if line.strip():
            assert isinstance(records.loads_record(line.decode("utf-8")), dict)
    assert repair(path) == []  # a repaired file needs no more


@SETTINGS
@given(data=damaged_bytes(TOPOS))
def test_topology_file_reader_is_total(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("t") / "topo.txt"
    path.write_bytes(data)
    try:
        t = load_file(path)
    except UsageError as e:
        _one_line(e)
        return
    t.islands(), t.advice(), t.summary()  # a topology that reads also analyses


@SETTINGS
@given(doc=st.dictionaries(st.sampled_from(["gpus", "links", "nics", "source"]), json_values, max_size=4)
       | json_values)
def test_topology_json_reader_is_total(tmp_path_factory, doc):
    path = tmp_path_factory.mktemp("tj") / "topo.json"
    path.write_text(json.dumps(doc) if isinstance(doc, dict) else "{" + json.dumps(doc))
    try:
        load_file(path)
    except UsageError as e:
        _one_line(e)


MODEL = {"model_type": "mistral", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000}


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(changes=st.dictionaries(st.sampled_from(sorted(MODEL)), json_values, min_size=1, max_size=3))
def test_model_config_reader_is_total(tmp_path_factory, changes):
    path = tmp_path_factory.mktemp("m") / "config.json"
    path.write_text(json.dumps({**MODEL, **changes}))
    try:
        data = read_config_json(path)
    except UsageError as e:
        _one_line(e)
        return
    for key, most in (("hidden_size", 1 << 17), ("num_hidden_layers", 1000)):
        v = data.get(key)
        assert v is None or (isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= most)


@pytest.mark.parametrize("name", ["fifo", "dir", "zero"])
def test_special_files_are_refused_before_open(tmp_path, name):
    import os

    path = {"dir": str(tmp_path), "zero": "/dev/zero"}.get(name)
    if name == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
    for read in (records.read, load_file, read_config_json):
        with pytest.raises(UsageError, match="directory|FIFO|device"):
            read(Path(path))
