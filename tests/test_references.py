"""Is this normal? the published reference figures and their matching."""

from __future__ import annotations

from fabricbench import references
from fabricbench.references.table import REFERENCES


def _rec(gpu, n, size, busbw, op="all_reduce"):
    return {"kind": "collective", "status": "ok", "busbw_gbps": busbw, "gpu_names": [gpu] * n, "nranks": n,
            "op": op, "bytes": size, "fabric": "default"}


def test_every_row_cites_a_source_and_is_a_range():
    assert REFERENCES and all(r.sources and 0 < r.lo_gbps <= r.hi_gbps for r in REFERENCES)


def test_h200_sxm_matches_but_not_the_nvl_card_nor_small_sizes():
    got = references.matching("NVIDIA H200", 8, "all_reduce", 4 << 30)
    assert {(r.lo_gbps, r.hi_gbps) for r in got} == {(431.0, 482.0), (360.0, 372.0)}
    assert references.matching("NVIDIA H200 NVL", 8, "all_reduce", 4 << 30) == []
    assert references.matching("NVIDIA H200", 8, "all_reduce", 64 << 20) == []
    assert references.matching("NVIDIA H200", 4, "all_reduce", 4 << 30) == []
    assert references.matching("NVIDIA H100 80GB HBM3", 8, "all_reduce", 16 << 30)[0].lo_gbps == 460.0


def test_summary_lines():
    lines = references.summary([_rec("NVIDIA H200", 8, 1 << 30, 300.0), _rec("NVIDIA H200", 8, 4 << 30, 470.2)])
    assert all(len(ln) <= 79 for ln in lines), lines  # readable in an 80-column terminal
    assert lines[0] == "reference: all_reduce, 8 × NVIDIA H200, fabric default: 470.2 GB/s at 4G"
    assert lines[1].startswith("  expected on 8× H200 SXM (NVSwitch): 431-482 GB/s at >= 1G, NVLS on")
    assert "nccl-tests#272" in " ".join(lines)
    (gloo,) = references.summary([{**_rec("x", 2, 4 << 20, 0.2), "gpu_names": []},
                                  {**_rec("x", 2, 8 << 20, 0.3), "gpu_names": [], "op": "all_gather"}])
    assert gloo == "reference: none matches (the GPUs are not named: a gloo or imported run)"
    small = " ".join(ln.strip() for ln in references.summary([_rec("NVIDIA H200", 1, 64 << 20, 100.0)]))
    assert "no published reference matches (none for 1 × NVIDIA H200 all_reduce at 64M" in small
