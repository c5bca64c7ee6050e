"""fabricbench import in bounded memory: files read a line (or a bounded piece) at a time, gzip bombs
refused while inflating, JSON nested past any real format refused in one line, nccl-tests' repeated rows
as one measurement, impossible figures left out."""

import gzip
import json
import re
import tracemalloc

import pytest

from fabricbench.errors import UsageError
from fabricbench.importing import import_file, import_into, stream
from fabricbench.results.records import check_record, loads_record

from clirun import run_cli

HEAD = """# nccl-tests version 2.13.9 nccl-headers=22105 nccl-library=22105
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1
#
# Using devices
""" + "".join(f"#  Rank {r:2} Group  0 Pid {4000 + r:6} on  h100-node device {r:2} [0000:{r:02x}:00] "
              f"NVIDIA H100 80GB HBM3\n" for r in range(8)) + """#
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""


def _row(size, t, wrong="0"):
    alg = size / t / 1e3
    return (f"{size:>12} {size // 4:>12}    float    sum      -1  {t:8.2f} {alg:7.2f} {alg * 1.75:7.2f} {wrong:>6}"
            f"  {t:8.2f} {alg:7.2f} {alg * 1.75:7.2f} {wrong:>6}\n")


def _bomb(path, gib):
    """`gib` GiB of zeros as concatenated gzip members (each 1 MiB of zeros, ~1 KB): made in milliseconds."""
    member = gzip.compress(b"\0" * (1 << 20), 9)
    with open(path, "wb") as fh:
        for _ in range(gib << 10):
            fh.write(member)


def test_repeated_rows_are_one_measurement_with_the_repeats_as_samples(tmp_path):
    f = tmp_path / "ar.log"
    times = {1 << 20: [20.0, 22.0, 30.0], 1 << 30: [2400.0, 2500.0, 2600.0]}
    f.write_text(HEAD + "".join(_row(s, ts[c]) for c in range(3) for s, ts in times.items()))
    recs = import_file(f).records
    assert len(recs) == 4  # 2 sizes x 2 placements, not 12 rows' worth
    r = next(x for x in recs if x["bytes"] == 1 << 20 and not x["inplace"])
    assert r["extra"]["repeats"] == 3 and r["extra"]["samples_us"] == [20.0, 22.0, 30.0]
    assert r["time_us"] == 24.0  # the repeats' mean (each is a mean over the same iters)
    printed = [round((1 << 20) / t / 1e3, 2) for t in (20.0, 22.0, 30.0)]
    # bandwidth at the mean time: the printed figures weighted by time (sum(bw t) / sum(t))
    assert r["algbw_gbps"] == pytest.approx(sum(b * t for b, t in zip(printed, (20.0, 22.0, 30.0))) / 72.0, rel=1e-6)
    assert r["extra"]["repeats_cv"] == pytest.approx(5.2915 / 24.0, rel=1e-3)
    big = next(x for x in recs if x["bytes"] == 1 << 30 and x["inplace"])
    assert big["time_us"] == 2500.0 and big["wrong"] == 0


def test_a_repeat_with_impossible_figures_is_left_out_not_averaged(tmp_path):
    f = tmp_path / "ar.log"
    f.write_text(HEAD + _row(1 << 20, 20.0) + _row(1 << 20, 22.0) + _row(1 << 20, -5.0) + _row(1 << 20, 24.0))
    got = import_file(f)
    r = next(x for x in got.records if not x["inplace"])
    assert r["extra"]["repeats"] == 3 and r["time_us"] == 22.0
    assert [w for w in got.warnings if "left out 2 measurement(s)" in w and "time -5.0" in w]


BAD = HEAD + """           8             2     float     sum      -1    -5.00    0.00    0.00      0     4.00    0.00    0.00      0
          16             4     float     sum      -1     0.00    0.00    0.00      0    -0.00    0.00    0.00      0
          32             8     float     sum      -1     4.00    0.01    1e308     0     4.00    0.01    0.01  -1e30
   36893488147419103232  9223372036854775808  float     sum      -1     4.00    0.01    0.01     0     4.00    0.01    0.01  0
          64            16     float     sum      -1     4.00    0.02    0.02      0     4.00    0.02    0.02      0
"""


def test_figures_its_own_reader_rejects_are_not_written(tmp_path, capsys):
    f, out = tmp_path / "bad.log", tmp_path / "out.jsonl"
    f.write_text(BAD)
    code, so, se = run_cli(["import", f, "--out", out], capsys)
    assert code == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 3  # 8 in place, 64 both; the rest refused
    assert all(check_record(loads_record(x)) is None for x in lines)
    recs = [json.loads(x) for x in lines]
    assert sorted((r["bytes"], r["inplace"]) for r in recs) == [(8, True), (64, False), (64, True)]
    said = [w for w in se.splitlines() if "impossible figures" in w]
    assert len(said) == 1 and "left out 6 measurement(s)" in said[0]  # one warning per file, with the count


def test_nccl_tests_json_impossible_figures_refused(tmp_path):
    f = tmp_path / "ar.json"
    res = [{"size": 1024, "count": 256, "type": "float", "redop": "sum", "root": -1,
            "out_of_place": {"time": t, "alg_bw": 1.0, "bus_bw": bw, "nwrong": 0},
            "in_place": {"time": 5.0, "alg_bw": 1.0, "bus_bw": 1.0, "nwrong": w}}
           for t, bw, w in ((-5.0, 1.0, 0), (5.0, 1e308, 0), (5.0, 1.0, -3))]
    f.write_text(json.dumps({"version": 3, "args": ["all_reduce_perf"], "results": res}))
    got = import_file(f)
    # the three results are one size, merged: out of place kept once, in place twice
    assert [(r["inplace"], r["extra"].get("repeats")) for r in got.records] == [(False, None), (True, 2)]
    assert [w for w in got.warnings if "left out 3 measurement(s)" in w]


DEEP = {
    "nccl-inspector": lambda d: '{"header": {"inspector_output_format_version": "v4.0"}, "x": ' + "[" * d + "]" * d + "}",
    "dcgm-diag": lambda d: '{"DCGM Diagnostic": {"x": ' + "[" * d + "]" * d + "}}",
    "nccl-ras": lambda d: '{"communicators_count": 1, "communicators": ' + "[" * d + "]" * d + "}",
    "nccl-tests-json": lambda d: '{"version": 3, "results": ' + "[" * d + "]" * d + "}",
}


@pytest.mark.parametrize("fmt", sorted(DEEP))
def test_json_nested_past_any_real_format_is_one_line(tmp_path, capsys, fmt):
    f, out = tmp_path / "deep.json", tmp_path / "out.jsonl"
    f.write_text(DEEP[fmt](5000))  # 10 KB: a RecursionError traceback before
    code, so, se = run_cli(["import", f, "--out", out], capsys)
    assert code == 2 and "Traceback" not in se and "RecursionError" not in se
    assert se.strip().count("\n") == 0 and re.search(r"Error: .*JSON nested (\d+ deep|deeper than 64)", se), se
    assert not out.exists()


def test_nesting_a_real_format_uses_is_read():
    assert stream.depth('{"a": [{"b": {"c": "[[[[ not brackets ]]]]"}}]}') == 4
    assert stream.loads('[[["x"]]]', "f") == [[["x"]]]
    with pytest.raises(UsageError, match="nested 65 deep"):
        stream.loads("[" * 65 + "]" * 65, "f")


def test_gzip_bomb_refused_while_inflating_in_bounded_memory(tmp_path):
    bomb = tmp_path / "bomb.log.gz"
    _bomb(bomb, 4)  # 4 GiB of zeros in 4 MB: refused at 16 MiB inflated, not at the 4 GiB size cap
    tracemalloc.start()
    try:
        with pytest.raises(UsageError, match="inflates more than 200×"):
            import_into(bomb, lambda line: None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"peak {peak / 2**20:.1f} MiB while refusing a bomb"


def test_gzip_of_several_members_and_a_plain_ratio_is_read(tmp_path):
    f = tmp_path / "ar.log.gz"
    text = HEAD + _row(1 << 20, 20.0)
    f.write_bytes(gzip.compress(text[:300].encode()) + gzip.compress(text[300:].encode()))  # cat a.gz b.gz
    assert len(import_file(f).records) == 2


def test_an_overlong_line_is_cut_and_the_file_read(tmp_path):
    f = tmp_path / "ar.log"
    f.write_text(HEAD.replace("#\n#       size", "#" + "x" * (3 << 20) + "\n#       size") + _row(64, 4.0))
    got = import_file(f)
    assert [r["bytes"] for r in got.records] == [64, 64]


def _text(path, rows):
    sizes = [8 << i for i in range(31)]
    with open(path, "w") as fh:
        fh.write(HEAD)
        for c in range(rows // len(sizes)):
            fh.write("".join(_row(s, 4.0 + s / 4.5e5 + c % 3) for s in sizes))


@pytest.mark.slow
def test_memory_does_not_grow_with_the_file(tmp_path):
    """Peak Python memory while importing 1 MB and 16 MB of the same table: the same within 2 MiB."""
    peaks = []
    for mb in (1, 16):
        f = tmp_path / f"ar{mb}.log"
        _text(f, mb * 8000)
        written = []
        tracemalloc.start()
        try:
            tally = import_into(f, written.append)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert tally.records == 62 and len(written) == 62  # 31 sizes x 2 placements, whatever the repeats
    assert peaks[1] - peaks[0] < 2 << 20, [p / 2**20 for p in peaks]


def test_the_fast_path_for_repeats_and_the_general_one_agree(tmp_path):
    """Tagged lines (mpirun's "[1,0]<stdout>:") always take the general path; plain ones take the fast
    path from their second cycle on: the same figures give the same records."""
    rows = [_row(s, t, w) for t, w in ((20.0, "0"), (26.0, "0"), (23.0, "2"), (21.0, "0"))
            for s in (1 << 20, 1 << 24)]
    plain, tagged = tmp_path / "plain.log", tmp_path / "tagged.log"
    plain.write_text(HEAD + "".join(rows))
    tagged.write_text("".join(f"[1,0]<stdout>:{ln}\n" for ln in (HEAD + "".join(rows)).splitlines()))

    def figures(path):
        return [(r["bytes"], r["inplace"], r["time_us"], r["algbw_gbps"], r["busbw_gbps"], r["wrong"], r["status"],
                 r["extra"]["samples_us"], r["extra"]["repeats_cv"]) for r in import_file(path).records]

    got = figures(plain)
    assert got == figures(tagged) and len(got) == 4
    assert got[0][5] == 2 and got[0][6] == "wrong"  # the third cycle's 2 wrong elements are kept


def test_a_gzip_file_cut_short_is_one_line_and_nothing_written(tmp_path, capsys):
    whole = gzip.compress((HEAD + _row(1 << 20, 20.0) * 3).encode())
    cut, out = tmp_path / "ar.log.gz", tmp_path / "out.jsonl"
    cut.write_bytes(whole[:len(whole) - 12])
    out.write_text("")
    code, so, se = run_cli(["import", cut, "--out", out], capsys)
    assert code == 2 and "cut short" in se and se.count("\n") == 1 and out.read_text() == ""


def test_rows_read_a_block_at_a_time_give_what_a_line_at_a_time_gives(tmp_path):
    """Over 512 plain rows (a block, then a part block) with a bad row, an NCCL line, a new size and a
    #wrong in the middle: the same records as the tagged file, read wholly a line at a time."""
    sizes = [1 << 10, 1 << 20, 1 << 24]
    rows = [_row(s, 10.0 + c % 7 + s / 1e6) for c in range(250) for s in sizes]
    rows[400] = _row(1 << 20, -5.0)  # refused, in the middle of the first block
    rows[450] = "h100-node:4000:4100 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
    rows[600] = _row(1 << 28, 900.0)  # a size not seen before, inside the second block
    rows[650] = _row(1 << 10, 11.0, "3")
    rows[700] = rows[700].replace(rows[700].split()[6], "N/A", 1)
    plain, tagged = tmp_path / "plain.log", tmp_path / "tagged.log"
    plain.write_text(HEAD + "".join(rows))
    tagged.write_text("".join(f"[1,0]<stdout>:{ln}\n" for ln in (HEAD + "".join(rows)).splitlines()))

    def figures(path):
        got = import_file(path)
        return [(r["bytes"], r["inplace"], r["time_us"], r["algbw_gbps"], r["busbw_gbps"], r["wrong"],
                 r["extra"].get("repeats"), r["extra"].get("samples_us")) for r in got.records], got.warnings

    (a, wa), (b, wb) = figures(plain), figures(tagged)
    assert a == b and len(a) == 8  # 4 sizes x 2 placements
    assert [w for w in wa if "time -5.0" in w] and [w for w in wb if "time -5.0" in w]
    big = next(r for r in a if r[0] == 1 << 24 and not r[1])
    assert big[6] == 249 and len(big[7]) == 64  # 250 rows less the one put in its place; 64 samples kept
    assert next(r for r in a if r[0] == 1 << 10)[5] == 3  # the #wrong row is kept, the general way
