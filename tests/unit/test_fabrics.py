"""Fabrics: the table, custom specs, environment precedence, NVLS untouched, the NCCL transport parser."""

from __future__ import annotations

import json
import os

import pytest

from fabricbench.errors import UsageError
from fabricbench.fabrics import FABRICS, fabric_env, get_fabric, parse_fabric_list
from fabricbench.fabrics.transport import mismatch, parse_nccl_log, read_logs, transport_of
from clirun import run_cli


def test_builtin_fabrics_and_labels():
    assert FABRICS.names() == ["default", "p2p-off", "net"]
    assert get_fabric("default").variables == {}
    p2p = get_fabric("p2p-off")
    assert p2p.variables == {"NCCL_P2P_DISABLE": "1"}
    assert p2p.description == "P2P disabled: NCCL stages GPU-to-GPU traffic through host memory (SHM)"
    assert "PCIe P2P" not in p2p.description and p2p.expected == "SHM" and p2p.forbidden == ("P2P",)
    net = get_fabric("net")
    assert net.variables == {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
    assert net.expected == "NET" and net.forbidden == ("P2P", "SHM")
    assert all("NCCL_NVLS_ENABLE" not in f.variables for f in FABRICS)


def test_custom_fabric_parsing():
    f = get_fabric("lo:GLOO_SOCKET_IFNAME=lo,NCCL_SOCKET_IFNAME=lo")
    assert f.name == "lo" and f.env == (("GLOO_SOCKET_IFNAME", "lo"), ("NCCL_SOCKET_IFNAME", "lo"))
    assert f.builtin is False and f.expected == "any" and f.forbidden == ()
    shm = get_fabric("myshm:NCCL_P2P_DISABLE=1")
    assert shm.expected == "SHM" and shm.forbidden == ("P2P",)
    fs = parse_fabric_list("default,p2p-off,lo:GLOO_SOCKET_IFNAME=lo,NCCL_ALGO=Ring,net")
    assert [x.name for x in fs] == ["default", "p2p-off", "lo", "net"]
    assert fs[2].variables == {"GLOO_SOCKET_IFNAME": "lo", "NCCL_ALGO": "Ring"}


@pytest.mark.parametrize("spec,match", [
    ("nvlink", r"unknown fabric 'nvlink'; choose from default, p2p-off, net"),
    ("x:", "unknown fabric"),
    ("x:FOO", "'FOO' is not VAR=VALUE"),
    ("x:1FOO=2", "is not VAR=VALUE"),
    ("bad name:A=1", "must be letters"),
    ("default:A=1", "built-in fabric"),
    ("x:NCCL_NVLS_ENABLE=1", "never sets NCCL_NVLS_ENABLE"),
    ("x:A=1,A=2", "A is given twice"),
])
def test_bad_fabric_specs(spec, match):
    with pytest.raises(UsageError, match=match):
        get_fabric(spec)


@pytest.mark.parametrize("text,match", [
    ("", "empty"), ("default,,net", "empty item"), ("A=1,default", "belongs to no custom fabric"),
    ("default,default", "more than once"),
])
def test_bad_fabric_lists(text, match):
    with pytest.raises(UsageError, match=match):
        parse_fabric_list(text)


def test_env_user_variables_win_unless_the_fabric_names_them(tmp_path):
    base = {"PATH": "/usr/bin", "NCCL_P2P_DISABLE": "0", "NCCL_ALGO": "Tree", "NCCL_NVLS_ENABLE": "0"}
    fe = fabric_env(get_fabric("p2p-off"), base, log_dir=str(tmp_path))
    assert fe.env["NCCL_P2P_DISABLE"] == "1"  # the fabric names it
    assert fe.warnings == ["fabric p2p-off sets NCCL_P2P_DISABLE=1, overriding your NCCL_P2P_DISABLE=0"]
    assert fe.env["NCCL_ALGO"] == "Tree" and fe.env["PATH"] == "/usr/bin"
    assert fe.env["NCCL_NVLS_ENABLE"] == "0"  # exactly the user's
    assert fe.env["NCCL_DEBUG"] == "INFO" and fe.env["NCCL_DEBUG_SUBSYS"] == "INIT,P2P,SHM,NET"
    assert fe.env["NCCL_DEBUG_FILE"] == os.path.join(str(tmp_path), "nccl.%h.%p.log")
    assert fe.log_dir == str(tmp_path)
    assert base["NCCL_P2P_DISABLE"] == "0"  # the caller's dict is not changed


def test_env_never_turns_nvls_on_and_respects_user_debug(tmp_path):
    fe = fabric_env(get_fabric("net"), {"HOME": "/root"}, log_dir=str(tmp_path))
    assert "NCCL_NVLS_ENABLE" not in fe.env and fe.warnings == []
    assert fe.env["NCCL_SHM_DISABLE"] == "1" and fe.env["NCCL_P2P_DISABLE"] == "1"
    same = fabric_env(get_fabric("p2p-off"), {"NCCL_P2P_DISABLE": "1"}, log_dir=str(tmp_path))
    assert same.warnings == []  # same value: nothing overridden
    user = fabric_env(get_fabric("default"), {"NCCL_DEBUG": "WARN", "NCCL_DEBUG_SUBSYS": "ALL"},
                      log_dir=str(tmp_path))
    assert user.env["NCCL_DEBUG"] == "WARN" and user.env["NCCL_DEBUG_SUBSYS"] == "ALL"
    assert "NCCL_DEBUG_FILE" not in user.env and user.log_dir is None
    quiet = fabric_env(get_fabric("default"), {}, log_dir=None)
    assert quiet.env == {}


HOST = "gpu-node-07"
P2P_LOG = f"""{HOST}:81234:81234 [0] NCCL INFO Bootstrap: Using eth0:10.1.2.7<0>
{HOST}:81234:81234 [0] NCCL INFO cudaDriverVersion 12080
NCCL version 2.21.5+cuda12.4
{HOST}:81234:81290 [0] NCCL INFO NET/IB : No device found.
{HOST}:81234:81290 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.2.7<0>
{HOST}:81234:81290 [0] NCCL INFO Using network Socket
{HOST}:81234:81290 [0] NCCL INFO comm 0x55d0c1e0a2b0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x8d3c5e4b21f07a10 - Init START
{HOST}:81234:81290 [0] NCCL INFO Channel 00/24 :    0   1
{HOST}:81234:81290 [0] NCCL INFO Channel 01/24 :    0   1
{HOST}:81234:81290 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1
{HOST}:81234:81290 [0] NCCL INFO P2P Chunksize set to 524288
{HOST}:81234:81295 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
{HOST}:81234:81295 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read
{HOST}:81234:81290 [0] NCCL INFO Connected all rings
{HOST}:81234:81290 [0] NCCL INFO Connected all trees
{HOST}:81234:81290 [0] NCCL INFO comm 0x55d0c1e0a2b0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x8d3c5e4b21f07a10 - Init COMPLETE
"""
SHM_LOG = f"""{HOST}:9001:9001 [1] NCCL INFO comm 0x5610 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x11 - Init START
{HOST}:9001:9010 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct
{HOST}:9001:9010 [1] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via SHM/direct/direct
{HOST}:9001:9001 [1] NCCL INFO Connected all rings
"""
NET_LOG = f"""{HOST}:777:777 [0] NCCL INFO Using network Socket
{HOST}:777:780 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x2 - Init START
{HOST}:777:785 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [receive] via NET/Socket/0
{HOST}:777:785 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0
{HOST}:777:785 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA
"""
# the lines NCCL 2.28 writes (function name first; "nRanks" in the topology line)
ONE_RANK_LOG = f"""NCCL version 2.28.9+cuda13.0
{HOST}:55:55 [0] NCCL INFO ncclCommInitRankFunc comm 0x7f rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 18000 commId 0x9 - Init START
{HOST}:55:55 [0] NCCL INFO comm 0x7f rank 0 nRanks 1 nNodes 1 localRanks 1 localRank 0 MNNVL 0
"""


def test_transport_of_paths():
    assert transport_of("P2P/CUMEM/read") == "P2P/CUMEM"
    assert transport_of("P2P/IPC") == "P2P/IPC"
    assert transport_of("P2P/direct pointer/read") == "P2P/direct pointer"
    assert transport_of("SHM/direct/direct") == "SHM"
    assert transport_of("NET/IB/0/GDRDMA") == "NET/IB"


def test_parse_p2p_log():
    s = parse_nccl_log(P2P_LOG)
    assert s.transports == ["P2P/CUMEM"] and s.connections == 2  # ring listings are not connections
    assert s.nranks == 2 and s.network == "Socket" and s.nccl_version == "2.21.5"  # the "+cuda" build suffix dropped
    assert s.label() == "P2P/CUMEM"
    assert mismatch(get_fabric("default"), s) is None
    msg = mismatch(get_fabric("p2p-off"), s)
    assert msg == ("fabric p2p-off (P2P disabled: NCCL stages GPU-to-GPU traffic through host memory (SHM)) "
                   "expected SHM, but NCCL used P2P/CUMEM")


def test_parse_shm_net_single_rank_and_empty():
    shm = parse_nccl_log(SHM_LOG)
    assert shm.transports == ["SHM"] and shm.connections == 2 and shm.label() == "SHM"
    assert mismatch(get_fabric("p2p-off"), shm) is None
    assert "SHM" in mismatch(get_fabric("net"), shm)
    net = parse_nccl_log(NET_LOG)
    assert net.transports == ["NET/IB", "NET/Socket"] and net.connections == 3
    assert net.label() == "NET/IB+NET/Socket" and mismatch(get_fabric("net"), net) is None
    one = parse_nccl_log(ONE_RANK_LOG)
    assert one.transports == [] and one.nranks == 1 and one.label() == "none (single rank)"
    assert parse_nccl_log("").label() == "unknown (no NCCL log)"
    assert parse_nccl_log("").label(nranks=1) == "none (single rank)"
    ipc = parse_nccl_log(f"{HOST}:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read\n")
    assert ipc.label() == "P2P/IPC"


def test_read_logs_merges_files_and_output(tmp_path):
    (tmp_path / f"nccl.{HOST}.81234.log").write_text(P2P_LOG)
    (tmp_path / f"nccl.{HOST}.9001.log").write_text(SHM_LOG)
    (tmp_path / "unrelated.txt").write_text(NET_LOG)
    s = read_logs(str(tmp_path), "stdout with no NCCL lines")
    assert s.transports == ["P2P/CUMEM", "SHM"] and s.connections == 4


def test_fabrics_cli_json(capsys):
    code, out, err = run_cli(["fabrics", "--json"], capsys)
    assert code == 0, err
    rows = json.loads(out)
    assert [r["name"] for r in rows] == ["default", "p2p-off", "net", "shaped:RATE"]
    assert rows[3]["rate_bps"] == 10**9 and rows[3]["env"]["NCCL_SOCKET_IFNAME"] == "lo"
    assert "waived_here" in rows[3] and rows[0]["rate_bps"] is None
    assert rows[1]["env"] == {"NCCL_P2P_DISABLE": "1"} and rows[1]["expected_transport"] == "SHM"
    assert rows[2]["forbidden_transports"] == ["P2P", "SHM"]
    code, out, err = run_cli(["fabrics"], capsys)
    assert code == 0 and "p2p-off" in out and "NCCL_SHM_DISABLE=1" in out, err
    assert "shaped:RATE" in out
