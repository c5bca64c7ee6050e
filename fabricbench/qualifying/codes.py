"""Stable finding codes and the action an operator takes for each: one row per (check kind, criterion).

    fabricbench qualify --spec builtin:h200-sxm-8 --out q/     (q/verdicts.json: code and action per check)
    fabricbench qualify --list-codes                           (this table)

A code names *what kind of finding* it is, never a number that changes with the run, so that fleet tools
can count and route findings (like DCGM's DCGM_FR_* codes). Codes are never renamed or reused; a new
criterion gets a new row. docs/qualify.md's table of codes is checked against this one by tests/unit/test_qualify_grading.py.

Severity (verdict.py) says how bad a finding is; the code says which one it is; the action says what to do.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricbench.registry import Registry

DRAIN = "drain the node (keep it out of the scheduler) until it passes again"


@dataclass(frozen=True, kw_only=True)
class Code:
    code: str  # stable, upper snake case, FB_ prefix
    kind: str  # the check kind ("*" for any)
    criterion: str  # the item's criterion ("*" for any)
    meaning: str
    action: str
    # what to do where the check ran on gloo ranks on a CPU: the GPU commands of `action` have nothing to
    # look at there (None: `action` names no GPU tool)
    cpu_action: str | None = None


_ROWS = [
    # -- any check ------------------------------------------------------------------------------------
    Code(code="FB_PASS", kind="*", criterion="*", meaning="the check passed", action=""),
    Code(code="FB_WAIVED", kind="*", criterion="*", meaning="the check cannot apply here (reason given)",
         action="none needed; run the spec on the hardware it describes to judge this check"),
    Code(code="FB_UNMEASURED", kind="*", criterion="*",
         meaning="the check could not be measured (a child failed, timed out, or no GPU answered)",
         action="read the reason and results.jsonl; rerun the one check with --only NAME; if it fails to "
                "measure twice, check `nvidia-smi` and `dmesg | grep -i xid`, and " + DRAIN,
         cpu_action="read the reason and results.jsonl; rerun the one check with --only NAME; a gloo rank that "
                    "fails twice points at the host: memory (`free -g`), the loopback interface, other jobs"),
    Code(code="FB_FLAKY", kind="*", criterion="*", meaning="the check missed, then passed on a retry",
         action="the node is usable; rerun with --level 3 at a quiet time, and watch the figure in the "
                "fleet view (a node that is flaky twice in a week goes to a hardware ticket)"),
    Code(code="FB_BUSY_HOST", kind="*", criterion="*",
         meaning="the check missed while other processes loaded the host, and no quiet attempt settled it",
         action="the figure is the other jobs' as much as the node's: rerun the check with --only NAME when "
                "the host is quiet (the row names the busiest processes)"),
    Code(code="FB_FAIL", kind="*", criterion="*", meaning="a criterion without a code of its own missed",
         action="read the verdict's items in verdicts.json; " + DRAIN + " if the severity is critical"),
    # -- topology -------------------------------------------------------------------------------------
    Code(code="FB_TOPO_GPU_COUNT", kind="topology", criterion="gpu_count",
         meaning="fewer (or more) GPUs than the spec names",
         action="`nvidia-smi -L` lists the GPUs; a GPU that fell off the bus shows in `dmesg | grep -i xid` "
                "(Xid 79): " + DRAIN + ", reset or reboot, then open a hardware ticket if it stays missing"),
    Code(code="FB_TOPO_GPU_MODEL", kind="topology", criterion="gpu_name",
         meaning="a GPU is not the model the spec names",
         action="check `nvidia-smi -L` against the inventory; a wrong model is a wrong spec or a wrong node"),
    Code(code="FB_TOPO_LINK", kind="topology", criterion="link",
         meaning="a GPU pair's link is not the one expected (e.g. SYS where NV18 is wired)",
         action="`nvidia-smi nvlink -s -i N` on the GPUs named: a link shown inactive or below its rate is "
                "down; `nvidia-smi nvlink -e` shows its errors; `systemctl status nvidia-fabricmanager` on "
                "NVSwitch boards; " + DRAIN + " while a link is down"),
    Code(code="FB_TOPO_NVLINK_COUNT", kind="topology", criterion="min_nvlinks",
         meaning="a GPU pair has fewer bonded NVLinks than expected",
         action="`nvidia-smi nvlink -s -i N` shows which links of the GPU are down; reset the GPU "
                "(`nvidia-smi -r -i N`, idle node) and re-run; " + DRAIN + " if links stay down"),
    Code(code="FB_TOPO_ISLANDS", kind="topology", criterion="islands",
         meaning="the NVLink islands differ from the spec's",
         action="`nvidia-smi topo -m` shows the links; a missing bridge or a down link splits an island: "
                "`nvidia-smi nvlink -s`; " + DRAIN),
    Code(code="FB_TOPO_ISLAND_COUNT", kind="topology", criterion="island_count",
         meaning="the number of NVLink islands differs from the spec's",
         action="`nvidia-smi topo -m` and `nvidia-smi nvlink -s`: a down link splits an island; " + DRAIN),
    Code(code="FB_TOPO_ISLAND_LINK", kind="topology", criterion="island_link",
         meaning="a pair inside an island has the wrong link",
         action="`nvidia-smi nvlink -s -i N` on the pair named; reseat the bridge; " + DRAIN),
    Code(code="FB_TOPO_UNIFORM", kind="topology", criterion="uniform",
         meaning="the links are not uniform (or are, where the spec expects islands)",
         action="`nvidia-smi topo -m`: the pair named differs; `nvidia-smi nvlink -s` on it"),
    Code(code="FB_TOPO_PCIE_GEN", kind="topology", criterion="pcie_gen",
         meaning="a GPU's PCIe link trained below the expected generation",
         action="`nvidia-smi -q -d PCIE` (current vs max link gen; an idle GPU may downshift, so read it "
                "under load) and `lspci -vv` LnkSta; reseat the GPU or riser if it stays low"),
    Code(code="FB_TOPO_PCIE_WIDTH", kind="topology", criterion="pcie_width",
         meaning="a GPU's PCIe link trained below the expected width",
         action="`nvidia-smi -q -d PCIE` and `lspci -vv` LnkSta show the width; a narrow link is a seating "
                "or riser fault: reseat, then open a hardware ticket"),
    # -- collectives ----------------------------------------------------------------------------------
    Code(code="FB_COLL_BUSBW_LOW", kind="collective", criterion="busbw",
         meaning="a collective's bus bandwidth is below its floor",
         action="`nvidia-smi nvlink -s` (a down link halves a ring), `nvidia-smi -q -d CLOCK,PERFORMANCE` "
                "(throttling), other jobs on the GPUs (`nvidia-smi`); rerun with --only NAME; " + DRAIN
                + " if it misses again",
         cpu_action="gloo ranks on this CPU: other processes on the cores (`top`; a busy host is said in the "
                    "row), CPU frequency scaling (`cpupower frequency-info`); rerun with --only NAME at a quiet "
                    "time"),
    Code(code="FB_COLL_LATENCY_HIGH", kind="collective", criterion="latency",
         meaning="a small collective takes longer than its ceiling",
         action="launch-bound: check CPU frequency scaling and pinning (`cpupower frequency-info`), other "
                "processes on the cores, and NCCL_PROTO/NCCL_ALGO overrides in the environment"),
    Code(code="FB_COLL_CV_HIGH", kind="collective", criterion="cv",
         meaning="run-to-run spread of a collective is above its ceiling",
         action="a noisy node: look for other jobs on the GPUs or CPUs, thermal throttling "
                "(`nvidia-smi -q -d PERFORMANCE`), and repeat at --level 3",
         cpu_action="a noisy host: other processes on the cores (`top`), and repeat at --level 3 at a quiet time"),
    Code(code="FB_COLL_WRONG", kind="correctness", criterion="wrong",
         meaning="a collective returned wrong elements",
         action=DRAIN + " now: wrong results corrupt training silently; `nvidia-smi -q -d ECC` and "
                "`dmesg | grep -i xid`, then run `dcgmi diag -r 3` and open a hardware ticket",
         cpu_action="wrong results on CPU ranks point at the host's memory (`dmesg | grep -i -e mce -e edac`) or "
                    "the gloo build: rerun with --only NAME, and keep the host out of use until it passes"),
    Code(code="FB_TRANSPORT", kind="transport", criterion="transport",
         meaning="NCCL used another transport than expected (e.g. SHM where P2P is wired)",
         action="NCCL_DEBUG=INFO shows why; check NCCL_P2P_DISABLE/NCCL_SHM_DISABLE in the environment, "
                "ACS/IOMMU settings (`lspci -vvv | grep ACSCtl`), and `nvidia-smi topo -p2p r`"),
    Code(code="FB_CONTRAST_LOW", kind="contrast", criterion="ratio",
         meaning="the fast fabric is not enough faster than the slow one: the fast path is not in use",
         action="`nvidia-smi topo -p2p r` and `nvidia-smi nvlink -s`: P2P over NVLink is not carrying the "
                "default run; " + DRAIN),
    # -- copies ---------------------------------------------------------------------------------------
    Code(code="FB_P2P_BW_LOW", kind="p2p", criterion="min_gbps",
         meaning="a GPU pair's copy bandwidth is below its floor",
         action="`nvidia-smi nvlink -s -i N` on the pair's GPUs (a down link), `nvidia-smi topo -p2p r`; "
                + DRAIN + " if a link is down"),
    Code(code="FB_P2P_UNEVEN", kind="p2p", criterion="uniformity",
         meaning="a GPU pair is much slower than the node's median pair",
         action="the pair named has a degraded link: `nvidia-smi nvlink -s -i N` and `nvidia-smi nvlink -e`"),
    Code(code="FB_HOST_BW_LOW", kind="host_copy", criterion="*",
         meaning="a GPU's host<->device copy bandwidth is below its floor",
         action="`nvidia-smi -q -d PCIE` (link gen and width under load), NUMA placement of the test "
                "(`nvidia-smi topo -m` CPU affinity), and IOMMU settings; reseat if the link is narrow"),
    # -- training ---------------------------------------------------------------------------------------
    # -- imported health: DCGM diagnostics and NCCL RAS (qualifying/health.py) ------------------------
    Code(code="FB_DCGM_FAIL", kind="dcgm", criterion="fail", meaning="a DCGM diagnostic test failed on an entity",
         action="read DCGM's error id and message in the item; rerun `dcgmi diag -r 3` on the node; an isolate or "
                "reset severity (dcgm_errors.h) means " + DRAIN + " and reset the GPU, then open a hardware ticket "
                "if it fails again"),
    Code(code="FB_DCGM_WARN", kind="dcgm", criterion="warn", meaning="a DCGM diagnostic test warned",
         action="read DCGM's message; a config severity (persistence mode, clocks) is fixed on the node; rerun "
                "`dcgmi diag -r 2` after the fix"),
    Code(code="FB_RAS_MISSING_RANK", kind="nccl_ras", criterion="missing",
         meaning="NCCL RAS got no data from a rank of a communicator (process gone or unreachable)",
         action="the item names the host, GPU and pid: check that process and `dmesg | grep -i xid` on that "
                "host; " + DRAIN + " if the GPU is at fault"),
    Code(code="FB_RAS_DEAD_RANK", kind="nccl_ras", criterion="dead",
         meaning="NCCL RAS considers a rank dead (unreachable over the RAS network)",
         action="the job is hung on that rank: end the job, check the named host's network and GPU, " + DRAIN),
    Code(code="FB_RAS_ERROR", kind="nccl_ras", criterion="error",
         meaning="a rank reports an NCCL error, a failed init or an abort (or RAS timed out gathering)",
         action="read the rank's NCCL log (NCCL_DEBUG=WARN) for the error named; rerun the node's collective "
                "checks before it takes jobs again"),
    Code(code="FB_RAS_MISMATCH", kind="nccl_ras", criterion="mismatch",
         meaning="ranks of a communicator launched different numbers of an operation",
         action="query ncclras again: a rank still behind on the second snapshot is where the job hangs (the "
                "item names it); a transient skew is normal while ranks are in flight"),
    # -- imported NCCL_RUN_DIAGNOSTICS report (checks/nccl_diag.py) ---------------------------------
    Code(code="FB_DIAG_P2P", kind="nccl_diag", criterion="p2p_edges",
         meaning="NCCL's P2P diagnostic found GPU pairs whose peer write/read or memory import failed",
         action="the item names both GPUs, the path and NCCL's advice: `nvidia-smi topo -m`, `nvidia-smi topo "
                "-p2p n` (NVLink) or `-p2p p` (PCIe: IOMMU and ACS), IMEX for MNNVL; " + DRAIN),
    Code(code="FB_DIAG_NET_BW_LOW", kind="nccl_diag", criterion="net_bw",
         meaning="NCCL's ib_write_bw check measured a rank's NIC below its floor",
         action="`ibstat` and `ibv_devinfo` on the named host (link width and speed), the NIC's counters "
                "(`perfquery`), GPU-NIC affinity (`nvidia-smi topo -m`); rerun ib_write_bw by hand on the pair"),
    Code(code="FB_DIAG_NET_OUTLIER", kind="nccl_diag", criterion="net_outliers",
         meaning="NCCL named ranks whose NIC bandwidth is >30% off the median of the job",
         action="the item names rank and host: check that NIC (`ibstat`, cable, switch port) and the ranks "
                "sharing it; a host that stays an outlier on a rerun is drained"),
    Code(code="FB_DIAG_INCOMPLETE", kind="nccl_diag", criterion="complete",
         meaning="NCCL's diagnostics did not finish (ran out of their time, or the report is cut short)",
         action="rerun with NCCL_RUN_DIAGNOSTICS=1 and keep every rank's stdout; a check that times out again "
                "points at the link it was measuring"),
    Code(code="FB_TRAIN_LOSS", kind="train", criterion="loss_falls",
         meaning="the training smoke test's loss did not fall",
         action="rerun the train check alone; a loss that does not fall on a known-good recipe points at "
                "wrong collectives: run the correctness check at --level 3"),
    Code(code="FB_TRAIN_SLOW", kind="train", criterion="samples_per_s",
         meaning="training throughput is below its floor",
         action="compare with the collective checks: slow collectives explain slow training; otherwise "
                "check clocks and throttling (`nvidia-smi -q -d PERFORMANCE`)",
         cpu_action="compare with the collective checks: slow collectives explain slow training; otherwise "
                    "other processes on the cores (`top`) and CPU frequency scaling"),
    # -- across runs and nodes --------------------------------------------------------------------------
    Code(code="FB_BASELINE_REGRESSION", kind="baseline", criterion="*",
         meaning="a figure is worse than this node's baseline by more than the tolerance",
         action="rerun with --only to confirm; a regression of one figure points at what changed (driver, "
                "NCCL, firmware, a link): compare `nvidia-smi -q` with the baseline's",
         cpu_action="rerun with --only to confirm; a regression of one figure points at what changed (the "
                    "torch or gloo version, the kernel, other processes on the host)"),
    Code(code="FB_FLEET_OUTLIER", kind="fleet", criterion="*",
         meaning="a node is worse than the fleet on a figure (below fraction x median, or robust z by MAD)",
         action="qualify the node alone at --level 3; " + DRAIN + " if it is critical"),
]

CODES: Registry[Code] = Registry("finding code")
for _row in _ROWS:
    CODES.register(_row.code, _row)
_BY_CRITERION = {(c.kind, c.criterion): c for c in _ROWS if c.kind != "*"}


def code_for(kind: str, criterion: str | None) -> Code:
    """The code of a missed criterion of a check kind (its own row, else the kind's, else FB_FAIL)."""
    return (_BY_CRITERION.get((kind, criterion or "")) or _BY_CRITERION.get((kind, "*"))
            or CODES.get("FB_FAIL"))


def action_for(code: Code, *, cpu: bool = False, source: str | None = None) -> str:
    """What to do about a finding, fitting where its figures came from: gloo ranks on a CPU get no GPU
    commands; results judged from a file (`qualify --from`) get no drain and no command to run on the node,
    as the file is not the node as it is now: it is measured first."""
    action = code.cpu_action if cpu and code.cpu_action else code.action
    if source is None or not action:
        return action
    # the file's figures are not the node's now: no drain, and no GPU commands on a node that is not here
    return (f"judged from {source}, not measured on the node: qualify the node itself (without --from; "
            f"`--only NAME` for this check) and act on that run's advice")


def markdown_table() -> str:
    """docs/qualify.md's table of codes (tests/unit/test_qualify_grading.py checks that the page holds it)."""
    lines = ["| code | check kind | criterion | meaning |", "|---|---|---|---|"]
    lines += [f"| `{c.code}` | {c.kind} | {c.criterion} | {c.meaning} |" for c in _ROWS]
    return "\n".join(lines)
