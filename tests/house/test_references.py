"""Is this normal? the published reference figures and their matching."""

from __future__ import annotations

import re

import fabricbench.gpus
from fabricbench import references
from fabricbench.measuring import sweep_run
from fabricbench.references.table import REFERENCES
from fabricbench.results.schema import CollectiveResult
from fabricbench.results.status import Status
from roots import ROOT
from clirun import run_cli


def _rec(gpu, n, size, busbw, op="all_reduce", fabric="default"):
    return {"kind": "collective", "status": "ok", "busbw_gbps": busbw, "gpu_names": [gpu] * n, "nranks": n,
            "op": op, "bytes": size, "fabric": fabric}


def test_every_row_cites_a_source_and_is_a_range_or_says_none():
    assert REFERENCES and all(r.sources for r in REFERENCES)
    for r in REFERENCES:
        if r.kind == "none":  # no published figure: no range, and the condition says what is known instead
            assert r.lo_gbps is None and r.hi_gbps is None and r.condition
        else:
            assert 0 < r.lo_gbps <= r.hi_gbps and r.under in ("default", "p2p-off")


def test_every_common_platform_has_a_row():
    rows = {(r.platform, r.gpus, r.under) for r in REFERENCES}
    for want in ("8× B200", "4× GB200 (one NVL72 tray)", "8× GB200 (two NVL72 trays)", "72× GB200 NVL72",
                 "8× RTX 5090 (PCIe only)", "8× H100 PCIe (PCIe only)", "P2P disabled"):
        assert any(want in p for p, _, _ in rows), want
    assert any(u == "p2p-off" for _, _, u in rows)


def test_p2p_off_rows_only_under_p2p_off():
    (off,) = references.matching("NVIDIA A100-SXM4-40GB", 4, "all_reduce", 4 << 30, "p2p-off")
    assert (off.lo_gbps, off.under) == (5.2, "p2p-off")
    assert references.matching("NVIDIA A100-SXM4-40GB", 4, "all_reduce", 4 << 30) == []
    assert all(r.under == "default" for r in references.matching("NVIDIA H200", 8, "all_reduce", 4 << 30))
    (h,) = references.matching("NVIDIA H200", 8, "all_reduce", 4 << 30, "p2p-off")
    assert h.kind == "none" and "no published figure" in references.line(h)
    assert references.matching("NVIDIA H200", 8, "all_reduce", 4 << 30, "shaped:1gbit") == []


def test_sweep_under_p2p_off_prints_the_p2p_off_row():
    lines = references.summary([_rec("NVIDIA A100-SXM4-40GB", 4, 1 << 30, 5.0, fabric="p2p-off")])
    text = " ".join(ln.strip() for ln in lines)
    assert lines[0].startswith("reference: all_reduce, 4 × NVIDIA A100-SXM4-40GB, fabric p2p-off: 5 GB/s")
    assert "P2P disabled (DGX A100): 5.2 GB/s" in text and all(len(ln) <= 79 for ln in lines)


def test_sweep_command_under_p2p_off_prints_the_p2p_off_row(monkeypatch, capsys):
    # `sweep --fabric p2p-off` on 4 × A100 (the measurement stood in for: no GPU here) ends on the P2P-off row
    n, size = 4, 1 << 30
    f = 2 * (n - 1) / n
    t = size / (5.0 / f * 1e9) * 1e6  # a 5 GB/s busbw, as DGX A100's published P2P-off figure
    rec = CollectiveResult(op="all_reduce", dtype="float32", bytes=size, requested_bytes=size, count=size // 4,
                           nranks=n, gpus=list(range(n)), inplace=False, graph=False, iters=20, time_us=t, mean_us=t,
                           min_us=t, max_us=t, p95_us=t, cv=0.01, ci95_rel=None, algbw_gbps=5.0 / f,
                           busbw_gbps=5.0, busbw_factor=f, busbw_note=None, wrong=None, status=Status.OK,
                           engine="native", gpu_names=["NVIDIA A100-SXM4-40GB"] * n,
                           context={"kind": "collective", "fabric": "p2p-off"})

    def measured(config, *, on_result=None, **_):
        assert config.fabric == "p2p-off"
        on_result(rec)
        return [rec]

    monkeypatch.setattr(sweep_run, "run_sweep", measured)
    monkeypatch.setattr(fabricbench.gpus, "visible_gpu_count", lambda: n)
    code, stdout, err = run_cli(["sweep", "--gpus", "0-3", "--fabric", "p2p-off", "--sizes", "1G", "--ops",
                                 "all_reduce"], capsys)
    assert code == 0, err
    out = " ".join(ln.strip() for ln in stdout.splitlines())
    assert "reference: all_reduce, 4 × NVIDIA A100-SXM4-40GB, fabric p2p-off: 5 GB/s" in out
    assert "P2P disabled (DGX A100): 5.2 GB/s" in out


def test_azure_h200_note_names_the_gated_figure():
    (nvls,) = [r for r in REFERENCES if r.gpu == "H200" and r.gpus == 8 and r.lo_gbps == 431.0]
    azure = next(s for s in nvls.sources if "azurehpc-health-checks" in s)
    assert "431.0" in azure and "the floor the gate enforces" in azure and "480" in azure


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


def _named(source: str) -> str:
    """What a docs line must name of a source: an issue's tag, a repository's owner/name, a page's address,
    else the text before ':' (docs/domain.md)."""
    m = re.match(r"https://github\.com/([^/ ]+/[^/ ]+)(/(issues|pull)/\d+)?", source)
    if m:
        return references.tag(source) if m.group(2) else m.group(1)
    return source.split()[0] if source.startswith("http") else source.split(":")[0]


def test_docs_list_every_row_with_its_figure_and_sources():
    page = (ROOT / "docs" / "references.md").read_text(encoding="utf-8")
    for r in REFERENCES:
        fig = ("no published figure" if r.lo_gbps is None else
               f"{r.lo_gbps:g}" if r.lo_gbps == r.hi_gbps else f"{r.lo_gbps:g}–{r.hi_gbps:g}")
        lines = [ln for ln in page.splitlines() if ln.startswith(f"| {r.platform} |") and f"| {fig} |" in ln]
        assert lines, (r.platform, fig)
        for src in r.sources:
            assert any(_named(src) in ln for ln in lines), (r.platform, _named(src))
