"""Published reference figures per platform: what a measurement on the same GPUs may be held against.

    fabricbench sweep --gpus 0-7 --sizes 1G-16G:x4          (prints the matching reference under the table)

Each row: GPU model (a pattern of the names NVML reports, with what it must not contain), GPU count,
fabric, the fabricbench fabric it holds under (`default`, or `p2p-off`: NCCL_P2P_DISABLE=1), collective,
the smallest size the figure holds from, the figure range (busbw, GB/s), what kind of figure it is, and
its sources. "measured" rows are published runs (peaks of all_reduce_perf and alike); "floor" rows are
health-check thresholds a healthy node passes (a floor, not a peak); "none" rows say that no published
figure was found (the range is None), so that a user of that platform reads why nothing is compared.
Nothing here is measured by fabricbench; docs/references.md lists the sources in full.
"""

from __future__ import annotations

from dataclasses import dataclass

GiB = 1 << 30


@dataclass(frozen=True, kw_only=True)
class Reference:
    platform: str  # what the user reads: "8× H200 SXM (NVSwitch)"
    gpu: str  # substring of the NVML name ("H200"; "H100|H200": either), matched case-insensitively
    gpu_not: tuple[str, ...] = ("NVL", "PCIe")  # SXM boards: the NVL and PCIe cards are other platforms
    gpus: int
    fabric: str  # "NVSwitch"
    op: str
    min_bytes: int
    lo_gbps: float | None  # None: no published figure ("none" rows)
    hi_gbps: float | None
    kind: str  # "measured", "floor" or "none"
    under: str = "default"  # the fabricbench fabric the figure holds under: "default" or "p2p-off"
    condition: str = ""  # "NVLS on (NCCL's default)", "NVLS off / Ring"
    sources: tuple[str, ...] = ()


AZURE_NHC = "https://github.com/Azure/azurehpc-health-checks"
_ANY = ()  # no name to exclude (platforms whose NVML name has no SXM/NVL/PCIe variant to tell apart)

REFERENCES: tuple[Reference, ...] = (
    Reference(platform="8× H200 SXM (NVSwitch)", gpu="H200", gpus=8, fabric="NVSwitch", op="all_reduce",
              min_bytes=1 * GiB, lo_gbps=431.0, hi_gbps=482.0, kind="measured",
              condition="NVLS on (NCCL's default on 8 GPUs); 431 is the floor Azure's health checks enforce",
              sources=("https://github.com/NVIDIA/nccl-tests/issues/272 (8× H200, peak busbw 475 GB/s, NCCL 2.20.3)",
                       f"{AZURE_NHC} conf/nd96isr_h200_v5.conf: `check_nccl_allreduce 431.0 1 16G`, the floor the "
                       "gate enforces (432.0 in nd96is_h200_v5.conf and nd96isrf_h200_v5.conf); the README's table "
                       "says 480 GB/s for nd96isr_h200_v5, a figure no configuration gates on",
                       "docs/domain.md: published 8× H200 all-reduce ~475-482 GB/s with NVLS")),
    Reference(platform="8× H200 SXM (NVSwitch)", gpu="H200", gpus=8, fabric="NVSwitch", op="all_reduce",
              min_bytes=1 * GiB, lo_gbps=360.0, hi_gbps=372.0, kind="measured", condition="NVLS off / Ring",
              sources=("docs/domain.md: published 8× H200 all-reduce ~367 GB/s Ring (NVLS off)",
                       "https://github.com/NVIDIA/nccl-tests/issues/212 (sjeaugey: ~370 GB/s effective NVLink "
                       "bandwidth with NCCL_ALGO=RING on NVLink 4)")),
    Reference(platform="8× H100 SXM (NVSwitch)", gpu="H100", gpus=8, fabric="NVSwitch", op="all_reduce",
              min_bytes=1 * GiB, lo_gbps=460.0, hi_gbps=480.0, kind="measured",
              condition="NVLS on (NCCL's default); floor 460 from Azure's health checks",
              sources=("https://github.com/NVIDIA/nccl-tests/issues/212 (sjeaugey: 'On 8 GPUs, you should reach "
                       "a peak busBw of ~480GB/s (algbw ~275GB/s)', sizes above 256M)",
                       "https://github.com/NVIDIA/nccl/issues/2140 (8× H100: busbw 370 -> 480 GB/s NVLS off -> on)",
                       f"{AZURE_NHC} conf/nd96is_h100_v5.conf: `check_nccl_allreduce 460.0 1 16G`")),
    Reference(platform="8× H100 SXM (NVSwitch)", gpu="H100", gpus=8, fabric="NVSwitch", op="all_reduce",
              min_bytes=1 * GiB, lo_gbps=360.0, hi_gbps=372.0, kind="measured", condition="NVLS off / Ring",
              sources=("https://github.com/NVIDIA/nccl/issues/2140 (8× H100 NVLS off: busbw 370 GB/s)",
                       "https://github.com/NVIDIA/nccl-tests/issues/212 (~370 GB/s with NCCL_ALGO=RING)")),
    Reference(platform="8× A100 SXM (NVSwitch)", gpu="A100", gpus=8, fabric="NVSwitch", op="all_reduce",
              min_bytes=1 * GiB, lo_gbps=220.0, hi_gbps=235.0, kind="measured", condition="Ring (no NVLS on A100)",
              sources=("docs/domain.md: published 8× A100 all-reduce ≈ 230 GB/s",
                       f"{AZURE_NHC} conf/nd96amsr_a100_v4.conf: `check_nccl_allreduce 228.0 1 16G`")),
    Reference(platform="2× H200 SXM (NVSwitch)", gpu="H200", gpus=2, fabric="NVSwitch", op="all_reduce",
              min_bytes=1 * GiB, lo_gbps=320.0, hi_gbps=340.0, kind="measured", condition="2 of 8 GPUs",
              sources=("docs/domain.md: one article measured NVSwitch H200 at ~330 GB/s on 2 GPUs rising to ~467 on 8",)),
    Reference(platform="8× B300 (NVSwitch)", gpu="B300", gpu_not=_ANY, gpus=8, fabric="NVSwitch", op="all_reduce",
              min_bytes=1 * GiB, lo_gbps=695.0, hi_gbps=845.0, kind="measured",
              condition="695 NVLS off, 845 NVLS on",
              sources=("https://github.com/NVIDIA/nccl/issues/2140 (8× B300: busbw 695 -> 845 GB/s NVLS off -> on)",)),
    Reference(platform="8× B200 (NVSwitch)", gpu="B200", gpu_not=("GB200",), gpus=8, fabric="NVSwitch",
              op="all_reduce", min_bytes=1 * GiB, lo_gbps=830.0, hi_gbps=830.0, kind="measured",
              condition="one published run, '830+'; 900 GB/s is NVLink 5's line rate per direction, not a "
                        "busbw to expect",
              sources=("https://github.com/NVIDIA/nccl/issues/1807 (8× B200 in one machine, NCCL 2.27.1: "
                       "'Ours is 830+', asked against an expected '900+')",)),
    Reference(platform="4× GB200 (one NVL72 tray)", gpu="GB200", gpu_not=_ANY, gpus=4, fabric="NVLink 5 (MNNVL)",
              op="all_reduce", min_bytes=1 * GiB, lo_gbps=647.0, hi_gbps=680.0, kind="measured",
              condition="Ring algorithm (NCCL_ALGO=Ring), in place, 1G-8G",
              sources=("https://github.com/Azure/AI-benchmarking-guide Azure_Results/ND_GB200_v6_results.md "
                       "(NCCL Bandwidth, one ND GB200 v6 host = 4 GPUs: 646.87 GB/s at 1G ... 679.61 at 8G; "
                       "single host per https://github.com/Azure/AI-benchmarking-guide/issues/7)",)),
    Reference(platform="8× GB200 (two NVL72 trays)", gpu="GB200", gpu_not=_ANY, gpus=8, fabric="NVLink 5 (MNNVL)",
              op="all_reduce", min_bytes=8 * GiB, lo_gbps=811.0, hi_gbps=847.0, kind="measured",
              condition="MNNVL across two trays of one rack, NVLS on; 8 GiB and above",
              sources=("https://www.lixueduan.com/posts/ai/13-gb200-mnnvl-nccl-test (2 nodes × 4 GB200, MNNVL: "
                       "811 GB/s)",
                       "https://github.com/oracle-quickstart/oci-hpc-oke README.md (2 × BM.GPU.GB200.4, NCCL "
                       "2.26.6: 840.41 GB/s at 8G, 847.12 at 32G; tests/data/imports/"
                       "nccl_tests_gb200_oke_8gpu_two_trays.txt)")),
    Reference(platform="72× GB200 NVL72 (one rack)", gpu="GB200", gpu_not=_ANY, gpus=72, fabric="NVLink 5 (MNNVL)",
              op="all_reduce", min_bytes=4 * GiB, lo_gbps=835.0, hi_gbps=847.0, kind="measured",
              condition="NVLS on, 4-8 GiB",
              sources=("https://github.com/coreweave/nccl-tests/pull/43 (GB200 NVL72, 72 ranks: 834.57-846.82 "
                       "GB/s at 4-8 GiB; tests/data/imports/nccl_tests_gb200_nvl72.txt)",)),
    Reference(platform="8× RTX 5090 (PCIe only)", gpu="5090", gpu_not=_ANY, gpus=8, fabric="PCIe", op="all_reduce",
              min_bytes=1 * GiB, lo_gbps=28.0, hi_gbps=28.0, kind="measured",
              condition="PCIe Gen5 through switches, no NVLink; bound by what the CPU and memory deliver",
              sources=("https://github.com/NVIDIA/nccl/issues/1639 (8× RTX 5090: busbw 28 GB/s at 1-8G, 35 on "
                       "4 GPUs; sjeaugey: 'impressed that you can achieve 28GB/s with 8 GPUs')",)),
    Reference(platform="8× H100 PCIe (PCIe only)", gpu="H100", gpu_not=("SXM", "HBM3", "NVL"), gpus=8, fabric="PCIe",
              op="all_reduce", min_bytes=1 * GiB, lo_gbps=None, hi_gbps=None, kind="none",
              condition="one vendor's table quotes 35-45 GB/s, with no run behind it",
              sources=("https://docs.alayanew.com/en/docs/tech-blog/2026-05-06-nccl-tests (reference table: "
                       "'8×H100 PCIe (no NVSwitch) 35–45', no measurement shown)",)),
    Reference(platform="8× A100 PCIe (PCIe only)", gpu="A100", gpu_not=("SXM",), gpus=8, fabric="PCIe",
              op="all_reduce", min_bytes=1 * GiB, lo_gbps=None, hi_gbps=None, kind="none",
              condition="NVIDIA/nccl#841 asks what is normal; its post shows no busbw at 1 GiB or above",
              sources=("https://github.com/NVIDIA/nccl/issues/841 (8× A100 80GB PCIe, NCCL 2.9.9: the question, "
                       "no figure at 1 GiB or above)",)),
    Reference(platform="4× A100 SXM, P2P disabled (DGX A100)", gpu="A100", gpus=4, fabric="SHM (host memory)",
              op="all_reduce", min_bytes=1 * GiB, lo_gbps=5.2, hi_gbps=5.2, kind="measured", under="p2p-off",
              condition="NCCL_P2P_DISABLE=1: 222 GB/s with P2P, 5.2 without; the only published P2P-off figure",
              sources=("docs/domain.md: published P2P-off figure, DGX A100, 4 GPUs, all-reduce 222 -> 5.2 GB/s",)),
    Reference(platform="8× H100/H200 SXM, P2P disabled", gpu="H100|H200", gpus=8,
              fabric="SHM (host memory)", op="all_reduce", min_bytes=1 * GiB, lo_gbps=None, hi_gbps=None,
              kind="none", under="p2p-off",
              condition="with NCCL_P2P_DISABLE=1 traffic goes through host memory (SHM): expect PCIe-bound "
                        "figures, tens of times below NVLink; `compare --fabrics default,p2p-off` shows your own",
              sources=("docs/domain.md: NCCL_P2P_DISABLE=1 turns off NVLink and PCIe P2P; the same two SXM GPUs ~10× "
                       "slower with P2P disabled",)),
)
