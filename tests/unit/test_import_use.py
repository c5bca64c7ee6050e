"""Imported results used everywhere: qualify --from judges them, compare --with and report show them beside
fabricbench's, relate prices a fabric on an imported sweep. Nothing here measures."""

import json
import shutil

import pytest

from fabricbench.measuring.child_sweeps import runs_beside
from fabricbench.errors import UsageError
from fabricbench.importing import import_file
from fabricbench.importing.beside import label
from fabricbench.qualifying.api import qualify
from fabricbench.qualifying.config import QualifyConfig
import roots
from clirun import run_cli_captured

DATA = roots.DATA / "imports"
LAB = roots.DATA / "study" / "cpu-lab"

SPEC = """
[spec]
name = "from-imported"
[[check]]
name = "ar_bw"
kind = "collective"
op = "all_reduce"
sizes = ["1M", "4M"]
min_busbw_gbps = 80
max_latency_us = 25
[[check]]
name = "links"
kind = "topology"
gpu_count = 8
[[check]]
name = "pairs"
kind = "p2p"
min_gbps = 21.9
[[check]]
name = "tr"
kind = "transport"
op = "all_reduce"
size = "1M"
expect = {default = "P2P"}
"""


@pytest.fixture()
def imported(tmp_path):
    out = tmp_path / "imported.jsonl"
    code, _, err = run_cli_captured(["import", DATA / "constructed_2_19_6_per_iter_two_runs.txt",
                                     DATA / "nvbandwidth_v0_8_a6000.txt", "--out", out])
    assert code == 0, err
    return out


def test_qualify_from_imported_judges_without_measuring(imported, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    res = qualify(QualifyConfig(spec=str(spec), records_from=str(imported), out=str(tmp_path / "q")))
    v = {x.check: x for x in res.verdicts}
    assert v["ar_bw"].status == "pass"
    items = {(i.criterion, i.subject): i for i in v["ar_bw"].items}
    assert items[("busbw", "all ranks, 4M")].measured == 85.95  # the printed out-of-place busbw at 4 MiB
    assert items[("latency", "all ranks, 1M")].measured == 20.11
    assert v["links"].status == "waived" and "recorded results" in v["links"].items[0].reason
    assert v["pairs"].status == "fail"  # nvbandwidth's 21.82 GB/s GPU3 -> GPU0 is under 21.9
    assert v["tr"].status == "pass" and v["tr"].items[0].measured == "P2P/CUMEM"
    assert res.exit_code == 1
    with pytest.raises(UsageError, match="--resume does not apply"):
        qualify(QualifyConfig(spec=str(spec), records_from=str(imported), out=str(tmp_path / "q"), resume=True))


def test_qualify_from_reads_a_floor_below_the_size_the_file_lacks(imported, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.replace('"1M", "4M"', '"16M"'))
    config = QualifyConfig(spec=str(spec), records_from=str(imported), only=["ar_bw"])
    v = {x.check: x for x in qualify(config).verdicts}
    # the file stops at 4M: the 16M floor is read there (busbw rises with size), and said so; a 1G
    # floor would not be (more than 4x above: waived)
    items = {i.criterion: i for i in v["ar_bw"].items}
    assert v["ar_bw"].status == "pass" and items["busbw"].measured == 85.95
    assert items["busbw"].subject == "all ranks, 16M (read at 4M)" and "largest size below 16M" in items["busbw"].reason
    # the latency is read at its own size or not at all: not in the records, not measured there (a waiver;
    # an error would send someone to the node)
    assert items["latency"].status == "waived" and "holds no all_reduce record at 16M" in items["latency"].reason


def test_qualify_from_missing_records_is_waived(imported, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.replace('"1M", "4M"', '"1"'))  # below the file's smallest size: nothing stands in
    config = QualifyConfig(spec=str(spec), records_from=str(imported), only=["ar_bw"])
    v = {x.check: x for x in qualify(config).verdicts}
    assert v["ar_bw"].status == "waived" and "holds no all_reduce float32 record" in v["ar_bw"].items[0].reason


def test_compare_with_imported_columns(imported):
    runs = runs_beside([str(imported), str(DATA / "nccl_tests_2019_old_broadcast.txt")], ops=["all_reduce", "broadcast"],
                       dtype="float32")
    assert [r.fabric.name for r in runs] == ["imported (nccl-tests)",
                                             "imported (nccl-tests) [nccl_tests_2019_old_broadcast.txt]"]
    ar = [r for r in runs[0].records if r["op"] == "all_reduce"]
    assert [(r["bytes"], r["busbw_gbps"]) for r in ar] == [(1048576, 52.14), (2097152, 68.99), (4194304, 85.95)]
    assert runs[0].transport == "P2P/CUMEM"
    assert [r["time_us"] for r in runs[1].records] == [45.82]  # out-of-place only: compare measures no in-place
    with pytest.raises(UsageError, match="no reduce_scatter float32 record"):
        runs_beside([str(imported)], ops=["reduce_scatter"], dtype="float32")


def test_label_keeps_imported_apart():
    r = import_file(DATA / "nccl_tests_redops_table_only.txt", fabric="nvswitch").records[0]
    assert label(r) == "nvswitch (nccl-tests)" and label({"fabric": "p2p-off"}) == "p2p-off"


def test_relate_prices_a_fabric_on_an_imported_sweep(tmp_path):
    import fabricbench

    recs = [json.loads(ln) for ln in (LAB / "results.jsonl").read_text().splitlines() if ln.strip()]
    gone = "shaped:1gbit"
    measured = [r for r in recs if r.get("kind") == "collective" and r.get("fabric") == gone and r["op"] == "all_reduce"
                and r["status"] == "ok"]
    rows = ["#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"]
    for r in sorted(measured, key=lambda r: r["bytes"]):
        cells = f"{r['time_us']:.2f} {r['algbw_gbps']:.4f} {r['busbw_gbps']:.4f} 0"
        rows.append(f"{r['bytes']} {r['count']} float sum -1 {cells} {cells}")
    text = tmp_path / "all_reduce_perf_1gbit.log"
    text.write_text("\n".join(rows) + "\n")
    imported = import_file(text, fabric=gone, nranks=2).records
    kept = [r for r in recs if not (r.get("kind") == "collective" and r.get("fabric") == gone)]
    def ddp(records):
        rows = fabricbench.relate(fabricbench.RelateConfig(inputs=records, reference="default")).to_dict()["rows"]
        return next(r for r in rows if r["strategy"] == "ddp" and r["fabric"] == gone)

    # DDP sends all-reduces: priced on the imported curve as on the measured one (printed to 2 decimals)
    assert ddp(kept + imported)["predicted_step_s"] == pytest.approx(ddp(recs)["predicted_step_s"], rel=0.01)


def test_report_shows_imported_beside_the_study(tmp_path):
    run = tmp_path / "study"
    shutil.copytree(LAB, run, ignore=shutil.ignore_patterns("report*"))
    code, _, err = run_cli_captured(["import", DATA / "constructed_2_19_6_per_iter_two_runs.txt", "--fabric", "h200",
                                     "--out", run / "results.jsonl"])
    assert code == 0, err
    code, _, err = run_cli_captured(["report", run])
    assert code == 0, err
    md = (run / "report.md").read_text()
    assert "h200 (nccl-tests) GB/s" in md
    row = next(ln for ln in md.splitlines() if ln.startswith("| 4M | float32"))
    assert "85.95" in row or "86" in row


def test_qualify_init_writes_a_spec_from_imported_results(imported, tmp_path):
    spec = tmp_path / "init.toml"
    code, _, err = run_cli_captured(["qualify", "--init", spec, "--from", imported])
    assert code == 0, err
    text = spec.read_text()
    assert 'engine = "native"' in text  # nccl-tests measured through NCCL on GPUs: the native engine's way
    assert "min_busbw_gbps = 77.36" in text  # 0.9 x the printed 85.95 GB/s at 4 MiB
    assert 'expect = { default = "P2P" }' in text  # from the NCCL lines inside the nccl-tests output


def test_results_reader_keeps_imported_records_with_nulls(tmp_path):
    from fabricbench.results.records import read

    out = tmp_path / "imp.jsonl"
    code, _, err = run_cli_captured(["import", DATA / "nccl_tests_redops_table_only.txt",
                                     DATA / "nvbandwidth_h100_sm.txt", "--out", out])
    assert code == 0, err
    got = read(out)
    assert got.warnings == [] and len(got.records) == 6 + 16
    # no op printed, but max/min, root -1 and busbw/algbw ~1.87 > 1 leave only all-reduce; the rank count stays null
    # (15, 16 and 17 ranks all fit the printed two decimals)
    colls = [r for r in got.records if r["kind"] == "collective"]
    assert {(r["op"], r["nranks"], tuple(r["extra"]["inferred"])) for r in colls} == {("all_reduce", None, ("op",))}
    assert {r["bytes"] for r in got.records if r["kind"] == "copy"} == {None}  # nvbandwidth prints no size
    out.write_text(out.read_text().replace('"source": {"tool": "nccl-tests"', '"source": null, "x": {"tool": 1'))
    assert len(read(out).warnings) == 6  # not imported: a collective without op or nranks is damaged
