"""shaped:RATE: rate parsing, the waived path, and (as root, with iproute2) the namespace itself: set up
with the shaped loopback, the measured busbw against the rate, and removal after success, failure,
Ctrl-C, SIGTERM and SIGKILL of the parent (then by the next start).

The namespace tests skip on a detected lack (not root, no ip/tc, `ip netns` not working), never by
catching a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from fabricbench.errors import FabricWaived, UsageError
from fabricbench.fabrics import get_fabric, parse_fabric_list, shaped
from fabricbench.fabrics.apply import MARKER, applied
from fabricbench.measuring.child import run_child
from fabricbench.measuring.config import SweepConfig
from fabricbench.results import read_results
from clirun import run_cli_subprocess


def _netns_works() -> bool:
    """Root, ip and tc, and a namespace can really be made (uid 0 in a container may lack CAP_SYS_ADMIN)."""
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        return False
    probe = f"fb-{os.getpid()}-{shaped.start_time(os.getpid())}-0"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode == 0
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return made


needs_netns = pytest.mark.skipif(not _netns_works(), reason="needs root, iproute2 (ip, tc) and network namespaces")


@pytest.mark.parametrize("text,bps", [
    ("200mbit", 200_000_000), ("1gbit", 10**9), ("1GBIT", 10**9), ("1.5gbit", 1_500_000_000),
    ("500kbit", 500_000), ("64kibit", 65_536), ("1gibit", 2**30), ("10mbps", 80_000_000), ("8000bit", 8000),
])
def test_parse_rate_as_tc_reads_it(text, bps):
    assert shaped.parse_rate(text) == bps


@pytest.mark.parametrize("text,match", [
    ("200", "not a tc rate"), ("fast", "not a tc rate"), ("200mb", "not a tc rate"), ("-1mbit", "not a tc rate"),
    ("0mbit", "between 8kbit and 10tbit"), ("1bit", "between"), ("11tbit", "between"),
    ("0.5bit", "whole number"),
])
def test_bad_rates(text, match):
    with pytest.raises(UsageError, match=match):
        get_fabric(f"shaped:{text}")


def test_shaped_fabric_row():
    f = get_fabric("shaped:1000mbit")
    assert f.name == "shaped:1gbit" and f.rate_bps == 10**9 and not f.plain
    assert f.variables == {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_IB_DISABLE": "1",
                           "NCCL_SOCKET_IFNAME": "lo", "GLOO_SOCKET_IFNAME": "lo"}
    assert f.forbidden == ("P2P", "SHM", "NET/IB", "NVLS") and f.expected == "NET/Socket"
    assert f.to_dict()["rate_bps"] == 10**9
    assert [x.name for x in parse_fabric_list("default,shaped:200mbit,shaped:1gbit")] == \
        ["default", "shaped:200mbit", "shaped:1gbit"]
    assert shaped.format_rate(1_500_000_000) == "1500mbit" and shaped.format_rate(8001) == "8001bit"


def test_shaped_mismatch_flags_anything_but_sockets():
    from fabricbench.fabrics.transport import TransportSummary, mismatch

    f = get_fabric("shaped:1gbit")
    assert mismatch(f, TransportSummary(transports=["NET/Socket"])) is None
    assert mismatch(f, TransportSummary(transports=["NET/IB", "NET/Socket"])).endswith("NCCL used NET/IB")
    assert mismatch(f, TransportSummary(transports=["SHM"])).endswith("NCCL used SHM")
    assert mismatch(f, TransportSummary(transports=["NET/Socket"], nvls=True)).endswith("NCCL used NVLS")
    assert mismatch(get_fabric("net"), TransportSummary(transports=["NET/IB"])) is None


def test_waived_without_the_capability(monkeypatch):
    """A machine without root looks like this (the override is the detected capability, not a caught error)."""
    monkeypatch.setenv(shaped.WAIVE_ENV, "shaped fabrics need root (simulated)")
    before = _ours()
    with pytest.raises(FabricWaived, match=r"fabric shaped:200mbit is waived here: shaped fabrics need root"):
        with applied(get_fabric("shaped:200mbit")):
            pytest.fail("a waived fabric must not be entered")
    run = run_child(get_fabric("shaped:200mbit"), SweepConfig(ops="all_reduce", sizes="1K", iters=2, warmup=0,
                                                              engine="torch", backend="gloo"))
    assert run.waived and "need root" in run.waived and run.records == [] and run.error is None
    with applied(get_fabric("p2p-off")) as launch:  # nothing else is affected
        assert launch.env["NCCL_P2P_DISABLE"] == "1"
    assert _ours() == before


def test_sweep_command_with_a_waived_fabric_is_one_line(tmp_path):
    env = {**os.environ, shaped.WAIVE_ENV: "shaped fabrics need root (simulated)"}
    code, _, err = run_cli_subprocess(["sweep", "--engine", "torch", "--backend", "gloo", "--nprocs", "2", "--fabric",
                                       "shaped:200mbit", "--sizes", "1K"], env=env)
    assert code != 0 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == ("Error: fabric shaped:200mbit is waived here: "
                                                 "shaped fabrics need root (simulated)")


def test_train_with_a_waived_fabric_records_waived(tmp_path):
    env = {**os.environ, shaped.WAIVE_ENV: "shaped fabrics need root (simulated)"}
    out = tmp_path / "t.jsonl"
    _, _, err = run_cli_subprocess(["train", "--strategy", "ddp", "--model", "tiny-mistral", "--device", "cpu",
                                    "--nprocs", "2", "--fabric", "shaped:200mbit", "--out", out], timeout=300, env=env)
    assert "Traceback" not in err
    [rec] = list(read_results(out, kind="train"))
    assert rec["status"] == "waived" and "need root (simulated)" in rec["message"]
    assert rec["fabric"] == "shaped:200mbit" and rec["shaped_rate_bps"] == 200_000_000


def _ours() -> set[str]:
    return set(shaped.namespaces()) if _netns_works() else set()


def _host_lo() -> str:
    return subprocess.run(["tc", "qdisc", "show", "dev", "lo"], capture_output=True, text=True).stdout


@needs_netns
def test_namespace_set_up_shaped_and_removed():
    host = _host_lo()
    with applied(get_fabric("shaped:200mbit")) as launch:
        ns = launch.netns
        assert ns.startswith(f"fb-{os.getpid()}-{shaped.start_time(os.getpid())}-") and ns in shaped.namespaces()
        assert launch.argv(["tc", "qdisc", "show", "dev", "lo"]) == [shutil.which("ip"), "netns", "exec", ns,
                                                                      "tc", "qdisc", "show", "dev", "lo"]
        q = subprocess.run(launch.argv(["tc", "qdisc", "show", "dev", "lo"]), capture_output=True, text=True)
        assert "tbf" in q.stdout and "rate 200Mbit" in q.stdout and "lat 100ms" in q.stdout
        link = subprocess.run(launch.argv(["ip", "-o", "link"]), capture_output=True, text=True).stdout
        assert [line.split(":")[1].strip() for line in link.splitlines()] == ["lo"] and "UP" in link
        assert launch.facts["shaped_rate_bps"] == 200_000_000 and launch.facts["netns"] == ns
        assert launch.env[MARKER] == "shaped:200mbit" and launch.env["GLOO_SOCKET_IFNAME"] == "lo"
        assert _host_lo() == host  # the host's loopback is never touched
        with applied(get_fabric("shaped:1gbit")) as other:
            assert other.netns != ns  # unique per run
    assert ns not in shaped.namespaces() and other.netns not in shaped.namespaces()
    assert _host_lo() == host


@needs_netns
def test_namespace_removed_after_failure():
    with pytest.raises(RuntimeError, match="boom"):
        with applied(get_fabric("shaped:1gbit")) as launch:
            ns = launch.netns
            raise RuntimeError("boom")
    assert ns not in shaped.namespaces()


HOLDER = """
import sys, time
from fabricbench import procs
from fabricbench.fabrics import get_fabric
from fabricbench.fabrics.apply import applied
with applied(get_fabric("shaped:200mbit")) as launch:
    child = procs.spawn(launch.argv(["sleep", "300"]))
    print(launch.netns, child.pid, flush=True)
    time.sleep(300)
"""


def _holder():
    p = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ns, child = p.stdout.readline().split()
    assert ns in shaped.namespaces()
    return p, ns, int(child)


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{pid}/stat") as fh:  # reaped by init soon; a zombie is gone for our purpose
            if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        time.sleep(0.1)
    return False


@needs_netns
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_namespace_removed_after_ctrl_c_and_sigterm(sig):
    p, ns, child = _holder()
    p.send_signal(sig)
    p.wait(timeout=30)
    assert ns not in shaped.namespaces()
    assert _gone(child)  # the process inside the namespace went with it


def test_a_held_reaping_lock_delays_a_start_by_its_wait_only():
    """A start waits for another's reaping, but never past its wait: a holder that hangs cannot hang it."""
    def another_start(seen: list) -> None:  # another thread: a lock of its own, as another process's
        t0 = time.monotonic()
        with shaped.reaping_lock(wait_s=0.3) as second:
            seen.append((second, time.monotonic() - t0))

    with shaped.reaping_lock() as got:
        assert got
        seen: list = []
        t = threading.Thread(target=another_start, args=(seen,))
        t.start()
        t.join(30)
        ((second, waited),) = seen  # it gave up while this one still held the lock: its wait, not the holder's
        assert second is False and waited >= 0.25
    with shaped.reaping_lock(wait_s=0.3) as third:  # let go: the next one gets it at once
        assert third is True
    with shaped.reaping_lock() as outer:  # re-entrant in the holding thread, at once, and held until the outer ends
        with shaped.reaping_lock(wait_s=5) as inner:
            assert outer and inner  # a lock that were not re-entrant would give up after its wait: False
        code = "from fabricbench.fabrics import shaped\nwith shaped.reaping_lock(wait_s=0.2) as got: print(got)"
        assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                              check=True).stdout.strip() == "False"


def test_the_reaping_lock_is_one_for_the_host_whatever_tmpdir_says(tmp_path):
    """The job layer and tests give a run its own TMPDIR; the namespaces are the host's, and so is the lock:
    a process with another TMPDIR waits for the one held here."""
    code = ("import time; from fabricbench.fabrics import shaped; t0 = time.monotonic()\n"
            "with shaped.reaping_lock(wait_s=0.5) as got: print(shaped.LOCK, got, time.monotonic() - t0)")
    with shaped.reaping_lock() as held:
        assert held
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True,
                             env={**os.environ, "TMPDIR": str(tmp_path)}).stdout.split()
    assert out[0] == shaped.LOCK and not out[0].startswith(str(tmp_path)) and out[1] == "False"
    assert float(out[2]) >= 0.45


@needs_netns
def test_stale_means_dead_or_a_reused_pid():
    """A namespace whose pid now belongs to a process started later is stale too; a live creator's is not."""
    me, start = os.getpid(), shaped.start_time(os.getpid())
    reused, live = f"fb-{me}-{start - 1}-abc123", f"fb-{me}-{start}-abc124"
    # held from the add to the look: another pytest-xdist worker's start reaped `reused` in between once
    with shaped.reaping_lock() as got:
        assert got
        for ns in (reused, live):
            subprocess.run(["ip", "netns", "add", ns], check=True)
        try:
            gone = shaped.remove_stale()  # re-entrant: this thread holds the lock
            assert reused in gone and live not in gone
            assert reused not in shaped.namespaces() and live in shaped.namespaces()
        finally:
            shaped.remove(live)
            shaped.remove(reused)


@needs_netns
def test_sigkill_leaves_the_namespace_to_the_next_start():
    p, ns, child = _holder()
    # held: another pytest-xdist worker's start would reap the namespace while this test looks for it
    # (it did, 2 runs of 6 of the default command, before the lock)
    with shaped.reaping_lock() as got:
        assert got
        p.kill()
        p.wait(timeout=30)
        assert _gone(child)  # parent-death signal: nothing runs on in the namespace
        assert ns in shaped.namespaces()  # a SIGKILLed process can clean nothing up...
    with applied(get_fabric("shaped:1gbit")) as launch:  # ...so the next start does
        assert ns not in shaped.namespaces() and launch.netns in shaped.namespaces()
    assert launch.netns not in shaped.namespaces()


@needs_netns
@pytest.mark.slow
def test_compare_default_and_shaped_on_gloo_busbw_is_half_the_rate(tmp_path):
    """From 1 MiB up an all-reduce over a tbf-shaped loopback runs at busbw = rate/2 (both directions share
    lo's one queue; docs/domain.md). 2 ranks: busbw = algbw, so one 4 MiB all-reduce takes ~0.34 s at 200 mbit."""
    out = tmp_path / "cmp.jsonl"
    p = subprocess.Popen([sys.executable, "-m", "fabricbench", "compare", "--fabrics", "default,shaped:200mbit",
                          "--engine", "torch", "--backend", "gloo", "--nprocs", "2", "--ops", "all_reduce",
                          "--sizes", "1M,4M", "--iters", "3", "--warmup", "1", "--out", str(out), "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = p.communicate(timeout=300)
    assert p.returncode == 0, stderr
    doc = json.loads(stdout)
    recs = list(read_results(out, kind="collective"))
    shaped_recs = [r for r in recs if r["fabric"] == "shaped:200mbit"]
    assert len(shaped_recs) == 2 and all(r["status"] == "ok" for r in recs)
    rate_gbps = 200e6 / 8 / 1e9  # bytes per second, in GB/s as busbw is
    for r in shaped_recs:
        assert r["shaped_rate_bps"] == 200_000_000 and r["env"]["GLOO_SOCKET_IFNAME"] == "lo"
        assert r["env"][MARKER] == "shaped:200mbit"
        assert r["extra"]["transport_detail"]["fabric_env"]["NCCL_SHM_DISABLE"] == "1"
        assert 0.3 * rate_gbps <= r["busbw_gbps"] <= 0.7 * rate_gbps, (r["bytes"], r["busbw_gbps"], rate_gbps)
    for r in recs:
        if r["fabric"] == "default":
            assert r["shaped_rate_bps"] is None
    ratios = [row["ratio"]["shaped:200mbit"] for row in doc["comparison"]]
    assert all(x < 0.5 for x in ratios)  # unshaped loopback is far faster than 200 mbit
    print("busbw/rate:", [round(r["busbw_gbps"] / rate_gbps, 3) for r in shaped_recs])
    assert not [ns for ns in shaped.namespaces() if ns.startswith(f"fb-{p.pid}-")]  # its namespace is gone


def _procs_with(token: str) -> list[int]:
    """Live processes whose environment holds token (inherited by the child sweep and its ranks)."""
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/environ", "rb") as fh:
                    env = fh.read()
                with open(f"/proc/{d}/stat") as fh:
                    zombie = fh.read().rsplit(")", 1)[1].split()[0] == "Z"
            except OSError:
                continue
            if token.encode() in env and not zombie:
                pids.append(int(d))
    return pids


def _none_left(token: str, within_s: float = 15.0) -> bool:
    deadline = time.monotonic() + within_s
    while _procs_with(token) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _procs_with(token) == []


def _start_sweep(out, tmp_path):
    """A shaped sweep whose second size takes minutes: stopped while it measures that one."""
    token = f"FB_TEST_TOKEN={os.getpid()}-{time.monotonic_ns()}"
    env = {**os.environ, "FB_TEST_TOKEN": token.split("=", 1)[1]}
    p = subprocess.Popen([sys.executable, "-m", "fabricbench", "sweep", "--engine", "torch", "--backend", "gloo",
                          "--nprocs", "2", "--ops", "all_reduce", "--sizes", "4K,64M", "--iters", "2",
                          "--warmup", "0", "--fabric", "shaped:8mbit", "--out", str(out), "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (out.exists() and '"collective"' in out.read_text()):
        assert p.poll() is None, p.communicate()
        time.sleep(0.2)
    mine = [ns for ns in shaped.namespaces() if ns.startswith(f"fb-{p.pid}-")]
    assert len(mine) == 1, shaped.namespaces()
    assert len(_procs_with(token)) >= 4  # the sweep, its child under the fabric and the child's two ranks
    return p, mine[0], token


@needs_netns
@pytest.mark.slow
def test_ctrl_c_of_a_shaped_sweep_keeps_records_and_removes_everything(tmp_path):
    out = tmp_path / "s.jsonl"
    p, ns, token = _start_sweep(out, tmp_path)
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == 130, stderr
    assert "Traceback" not in stderr
    recs = list(read_results(out, kind="collective"))
    assert [r["bytes"] for r in recs] == [4096] and recs[0]["shaped_rate_bps"] == 8_000_000
    assert ns not in shaped.namespaces()
    assert _none_left(token)  # the child sweep and its ranks are gone


@needs_netns
@pytest.mark.slow
def test_sigkill_of_a_shaped_sweep_leaves_no_process_and_the_next_start_cleans(tmp_path):
    out = tmp_path / "s.jsonl"
    p, ns, token = _start_sweep(out, tmp_path)
    p.kill()
    p.communicate(timeout=30)
    assert _none_left(token)  # parent-death signals: nothing runs on in the namespace
    assert ns in shaped.namespaces()
    assert ns in shaped.remove_stale() and ns not in shaped.namespaces()
