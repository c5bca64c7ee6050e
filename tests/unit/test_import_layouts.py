"""nccl-tests rows interleaved with NCCL log lines and launcher tags, on the layouts seen in real published logs
(tests/data/imports/SOURCES.md): every figure of a complete row is read back, and pieces of different rows are
never joined into one."""


from fabricbench.importing import import_file
import roots

DATA = roots.DATA / "imports"


def _fig(recs, nbytes, inplace):
    return next(r for r in recs if r["bytes"] == nbytes and r["inplace"] is inplace)


# NVIDIA/nccl#1453 (MPICH-style "[0]" rank tags): size, count, out-of-place and in-place figures of each row
ISSUE_1453 = [(1048576, 1626.5, 0.64, 1.24, 2302.3, 0.46, 0.87), (2097152, 2325.3, 0.90, 1.73, 416.7, 5.03, 9.65),
              (4194304, 622.6, 6.74, 12.91, 625.8, 6.70, 12.85), (8388608, 992.6, 8.45, 16.20, 986.0, 8.51, 16.31),
              (16777216, 1334.9, 12.57, 24.09, 1336.5, 12.55, 24.06),
              (33554432, 2180.1, 15.39, 29.50, 2285.2, 14.68, 28.14), (67108864, 24410, 2.75, 5.27, 24425, 2.75, 5.27),
              (134217728, 49264, 2.72, 5.22, 48558, 2.76, 5.30), (268435456, 125807, 2.13, 4.09, 121575, 2.21, 4.23),
              (536870912, 193909, 2.77, 5.31, 192903, 2.78, 5.33)]


def test_rank_tags_glued_inside_rows_every_figure():
    got = import_file(DATA / "nccl_tests_nccl1453_rank_tags.txt")
    assert got.format == "nccl-tests" and len(got.records) == 2 * len(ISSUE_1453)
    for size, *figs in ISSUE_1453:
        for inplace, (t, alg, bus) in ((False, figs[:3]), (True, figs[3:])):
            r = _fig(got.records, size, inplace)
            assert (r["time_us"], r["algbw_gbps"], r["busbw_gbps"], r["wrong"]) == (t, alg, bus, 0)
    # the posted table has no header: 24 ranks follow from busbw/algbw (1.9375 = 2*23/24), as the log says
    assert {r["nranks"] for r in got.records} == {24} and got.records[0]["op"] == "all_reduce"


def test_info_lines_inside_rows_never_join_two_rows():
    # two windows of the post: a row's start, then (lines later) another row's tail; NCCL INFO between
    got = import_file(DATA / "nccl_tests_nccl1453_info_mid_row_excerpt.txt")
    assert not any(r.get("kind") == "collective" for r in got.records)
    assert any("skipped an incomplete table row (512 128 float sum -1 75.38" in w for w in got.warnings)
    assert any("incomplete table row at the end (8192 2048 float sum -1)" in w for w in got.warnings)


def test_a_row_cut_by_tagged_info_lines_is_joined(tmp_path):
    # the layout of NVIDIA/nccl#1453 (each piece of a row tagged "[0]", NCCL INFO lines between the pieces),
    # with the figures of its first complete row: the three pieces join into that row
    info = "[0] h100clust-worker-1:497888:497888 [0] NCCL INFO 1048576 Bytes -> Algo 0 proto 0 time 25.874907"
    lines = ["[0]      1048576        262144     float     sum      -1" + info[3:], info,
             "[0]    1626.5    0.64    1.24      0" + info[3:], info, "[0]    2302.3    0.46    0.87      0"]
    f = tmp_path / "all_reduce_perf.log"
    f.write_text("\n".join(lines) + "\n")
    got = import_file(f)
    out, inp = _fig(got.records, 1048576, False), _fig(got.records, 1048576, True)
    assert (out["time_us"], out["busbw_gbps"], inp["time_us"], inp["busbw_gbps"]) == (1626.5, 1.24, 2302.3, 0.87)
    assert not any("skipped" in w for w in got.warnings)


def test_info_lines_before_and_after_the_rows_gb200_two_trays():
    got = import_file(DATA / "nccl_tests_gb200_oke_8gpu_two_trays.txt")
    recs = got.records
    assert len(recs) == 66 and {r["nranks"] for r in recs} == {8}  # nranks from the Destroy lines
    assert [_fig(recs, 8589934592, p)["busbw_gbps"] for p in (False, True)] == [840.41, 840.50]
    assert _fig(recs, 34359738368, False)["busbw_gbps"] == 847.12 and _fig(recs, 8, False)["time_us"] == 21.57
