"""Published reference figures per platform: what a measurement on the same GPUs may be held against.

    fabricbench sweep --gpus 0-7 --sizes 1G-16G:x4          (prints the matching reference under the table)

Each row: GPU model (a pattern of the names NVML reports, with what it must not contain), GPU count,
fabric, collective, the smallest size the figure holds from, the figure range (busbw, GB/s), what kind
of figure it is, and its sources. "measured" rows are published runs (peaks of all_reduce_perf and
alike); "floor" rows are health-check thresholds a healthy node passes (a floor, not a peak). Nothing
here is measured by fabricbench; docs/references.md lists the sources in full.
"""

from __future__ import annotations

from dataclasses import dataclass

GiB = 1 << 30


@dataclass(frozen=True, kw_only=True)
class Reference:
    platform: str  # what the user reads: "8× H200 SXM (NVSwitch)"
    gpu: str  # substring of the NVML name ("H200"), matched case-insensitively
    gpu_not: tuple[str, ...] = ("NVL", "PCIe")  # SXM boards: the NVL and PCIe cards are other platforms
    gpus: int
    fabric: str  # "NVSwitch"
    op: str
    min_bytes: int
    lo_gbps: float
    hi_gbps: float
    kind: str  # "measured" or "floor"
    condition: str = ""  # "NVLS on (NCCL's default)", "NVLS off / Ring"
    sources: tuple[str, ...] = ()


REFERENCES: tuple[Reference, ...] = (
    Reference(platform="8× H200 SXM (NVSwitch)", gpu="H200", gpus=8, fabric="NVSwitch", op="all_reduce",
              min_bytes=1 * GiB, lo_gbps=431.0, hi_gbps=482.0, kind="measured",
              condition="NVLS on (NCCL's default on 8 GPUs); floor 431 from Azure's health checks",
              sources=("https://github.com/NVIDIA/nccl-tests/issues/272 (8× H200, peak busbw 475 GB/s, NCCL 2.20.3)",
                       "Azure/azurehpc-health-checks: H200 8-GPU all-reduce floor 431 GB/s at 16 GiB "
                       "(a newer configuration asks 480)",
                       "DOMAIN.md: published 8× H200 all-reduce ~475-482 GB/s with NVLS")),
    Reference(platform="8× H200 SXM (NVSwitch)", gpu="H200", gpus=8, fabric="NVSwitch", op="all_reduce",
              min_bytes=1 * GiB, lo_gbps=360.0, hi_gbps=372.0, kind="measured", condition="NVLS off / Ring",
              sources=("DOMAIN.md: published 8× H200 all-reduce ~367 GB/s Ring (NVLS off)",
                       "https://github.com/NVIDIA/nccl-tests/issues/212 (sjeaugey: ~370 GB/s effective NVLink "
                       "bandwidth with NCCL_ALGO=RING on NVLink 4)")),
    Reference(platform="8× H100 SXM (NVSwitch)", gpu="H100", gpus=8, fabric="NVSwitch", op="all_reduce",
              min_bytes=1 * GiB, lo_gbps=460.0, hi_gbps=480.0, kind="measured",
              condition="NVLS on (NCCL's default); floor 460 from Azure's health checks",
              sources=("https://github.com/NVIDIA/nccl-tests/issues/212 (sjeaugey: 'On 8 GPUs, you should reach "
                       "a peak busBw of ~480GB/s (algbw ~275GB/s)', sizes above 256M)",
                       "https://github.com/NVIDIA/nccl/issues/2140 (8× H100: busbw 370 -> 480 GB/s NVLS off -> on)",
                       "Azure/azurehpc-health-checks: H100 8-GPU all-reduce floor 460 GB/s at 16 GiB")),
    Reference(platform="8× H100 SXM (NVSwitch)", gpu="H100", gpus=8, fabric="NVSwitch", op="all_reduce",
              min_bytes=1 * GiB, lo_gbps=360.0, hi_gbps=372.0, kind="measured", condition="NVLS off / Ring",
              sources=("https://github.com/NVIDIA/nccl/issues/2140 (8× H100 NVLS off: busbw 370 GB/s)",
                       "https://github.com/NVIDIA/nccl-tests/issues/212 (~370 GB/s with NCCL_ALGO=RING)")),
    Reference(platform="8× A100 SXM (NVSwitch)", gpu="A100", gpus=8, fabric="NVSwitch", op="all_reduce",
              min_bytes=1 * GiB, lo_gbps=220.0, hi_gbps=235.0, kind="measured", condition="Ring (no NVLS on A100)",
              sources=("DOMAIN.md: published 8× A100 all-reduce ≈ 230 GB/s",)),
    Reference(platform="2× H200 SXM (NVSwitch)", gpu="H200", gpus=2, fabric="NVSwitch", op="all_reduce",
              min_bytes=1 * GiB, lo_gbps=320.0, hi_gbps=340.0, kind="measured", condition="2 of 8 GPUs",
              sources=("DOMAIN.md: one article measured NVSwitch H200 at ~330 GB/s on 2 GPUs rising to ~467 on 8",)),
    Reference(platform="8× B300 (NVSwitch)", gpu="B300", gpu_not=(), gpus=8, fabric="NVSwitch", op="all_reduce",
              min_bytes=1 * GiB, lo_gbps=695.0, hi_gbps=845.0, kind="measured",
              condition="695 NVLS off, 845 NVLS on",
              sources=("https://github.com/NVIDIA/nccl/issues/2140 (8× B300: busbw 695 -> 845 GB/s NVLS off -> on)",)),
)
