"""A named fabric is really applied: applied()'s environment and facts, sweep's delegation to a child under
the fabric (library and command), the masking of a custom fabric's private values.

The end-to-end checks read the environment from inside the ranks: every record's header `env` is taken by
rank 0's own process (results/context.allowed_env), which the test process never shares its variables with.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from fabricbench.errors import UsageError
from fabricbench.fabrics import get_fabric
from fabricbench.fabrics.apply import MARKER, applied, in_force
from fabricbench.jobs.configs import to_argv as config_args
from fabricbench.measuring.child import sweep_under_fabric
from fabricbench.results import read_results
from clirun import run_cli, run_cli_subprocess

SECRET = "s3cr3t-Value-0xC0FFEE"


def test_applied_gives_the_fabric_env_marker_and_masked_facts():
    fab = get_fabric(f"x:SOME_TOKEN={SECRET},NCCL_ALGO=Ring,GLOO_SOCKET_IFNAME=lo")
    base = {"PATH": "/usr/bin", "SOME_TOKEN": "old-one", "NCCL_NVLS_ENABLE": "0"}
    with applied(fab, base_env=base) as launch:
        assert launch.env["SOME_TOKEN"] == SECRET  # the child really gets it
        assert launch.env["NCCL_ALGO"] == "Ring" and launch.env["GLOO_SOCKET_IFNAME"] == "lo"
        assert launch.env[MARKER] == "x" and launch.env["NCCL_NVLS_ENABLE"] == "0"
        assert launch.argv(["python", "-V"]) == ["python", "-V"] and launch.netns is None
        assert launch.facts == {"fabric": "x", "shaped_rate_bps": None, "netns": None,
                                "fabric_env": {"SOME_TOKEN": "***", "NCCL_ALGO": "Ring",
                                               "GLOO_SOCKET_IFNAME": "lo"}}
        assert launch.warnings == ["fabric x sets SOME_TOKEN=***, overriding your SOME_TOKEN=***"]
    shown = json.dumps([fab.to_dict(), fab.description, launch.facts, launch.warnings])
    assert SECRET not in shown and "old-one" not in shown and "SOME_TOKEN" in shown
    assert base == {"PATH": "/usr/bin", "SOME_TOKEN": "old-one", "NCCL_NVLS_ENABLE": "0"}


def test_bad_custom_spec_messages_do_not_echo_values():
    with pytest.raises(UsageError) as e:
        get_fabric(f"x:SOME_TOKEN={SECRET},SOME_TOKEN=again")
    assert "SOME_TOKEN is given twice" in str(e.value) and SECRET not in str(e.value)
    with pytest.raises(UsageError) as e:
        get_fabric(f"bad name:API_KEY={SECRET}")
    assert SECRET not in str(e.value) and "API_KEY=***" in str(e.value)


def test_bad_fabric_list_messages_do_not_echo_values():
    from fabricbench.fabrics import parse_fabric_list

    for text in (f"x:SOME_TOKEN={SECRET},,default", f"API_KEY={SECRET},default"):
        with pytest.raises(UsageError) as e:
            parse_fabric_list(text)
        assert SECRET not in str(e.value) and "=***" in str(e.value)
    with pytest.raises(UsageError, match="NCCL_ALGO=Ring' belongs to no custom fabric"):
        parse_fabric_list("NCCL_ALGO=Ring")


def test_in_force():
    assert in_force("default", {})  # nothing to apply
    assert not in_force("p2p-off", {})
    assert in_force("p2p-off", {MARKER: "p2p-off"})
    assert not in_force("net", {MARKER: "p2p-off"})
    assert in_force("lo:GLOO_SOCKET_IFNAME=lo", {MARKER: "lo", "GLOO_SOCKET_IFNAME": "lo"})  # by its name
    assert not in_force("lo:GLOO_SOCKET_IFNAME=lo", {MARKER: "lo"})  # another fabric of that name was applied
    assert not in_force("lo:GLOO_SOCKET_IFNAME=eth0", {MARKER: "lo", "GLOO_SOCKET_IFNAME": "lo"})
    shaped_env = {MARKER: "shaped:1gbit", **get_fabric("shaped:1gbit").variables}
    assert in_force("shaped:1000mbit", shaped_env)  # the canonical name
    assert not in_force("shaped:2000mbit", {**shaped_env, MARKER: "shaped:2gbit", "NCCL_IB_DISABLE": "0"})
    with pytest.raises(UsageError, match="unknown fabric 'nvlink'"):
        in_force("nvlink", {})


def test_config_args_give_the_child_the_same_config(monkeypatch, tmp_path, capsys):
    """Every SweepConfig field survives the trip through the child's command line."""
    import dataclasses

    import fabricbench.measuring.sweep_run as sweep_run
    from fabricbench.measuring.api import make_config

    torch_cpu = make_config(ops="all_gather,broadcast", sizes="3K-1M:x4", dtype="bfloat16", iters=7, warmup=2,
                            adaptive=0.05, max_iters=70, inplace="both", check=True, engine="torch",
                            backend="gloo", nprocs=2, timeout_s=12.5, seed=1234, graph_iters=9,
                            stall_timeout_s=17.0)
    import fabricbench.measuring.config as sweep_config

    monkeypatch.setattr(sweep_config, "_check_nccl_lib", lambda path: None)  # only the path travels
    lib = tmp_path / "libnccl.so.2"  # --nccl-lib is an input file: it must exist to pass its option type
    lib.write_bytes(b"not really NCCL")
    native = make_config(sizes="1M", gpus=(0, 1), graph=True, nccl_lib=str(lib),
                         buffers="reuse", timing="loop", alloc="nccl")
    gapped = make_config(engine="torch", backend="gloo", nprocs=2, gap_s=0.004)  # --gap refuses --adaptive
    # between them every field leaves its default, so a field config_args forgets (a new option) fails here
    default = make_config()
    same = [f.name for f in dataclasses.fields(default) if f.name != "fabric"
            and all(getattr(c, f.name) == getattr(default, f.name) for c in (torch_cpu, native, gapped))]
    assert not same, f"give these fields a non-default value in this test: {same}"
    seen = {}
    monkeypatch.setattr(sweep_run, "run", lambda config, **kw: seen.__setitem__("config", config))
    monkeypatch.setattr(sweep_run, "devices", lambda config, gpus_text=None: (config, []))  # no GPU needed here
    strip = lambda c: {k: v for k, v in dataclasses.asdict(c).items() if k != "sizes"}  # noqa: E731
    for config in (torch_cpu, native, gapped):
        code, out, err = run_cli(["sweep", *config_args(config), "--fabric", "default"], capsys)
        assert code == 0, out + err
        got = seen["config"]
        assert got.sizes.expand() == config.sizes.expand()
        assert strip(got) == strip(config)
    explicit = make_config(sizes="1K,8M", engine="torch", backend="gloo", nprocs=2)
    assert config_args(explicit)[:4] == ["--ops", "all_reduce,all_gather,reduce_scatter", "--sizes", "1K,8M"]
    assert make_config(sizes=config_args(explicit)[3]).sizes.expand() == [1024, 8388608]


def _fake_child(monkeypatch, *, rc=0, stderr="", log=None):
    """procs.spawn stand-in: writes a record (and an NCCL log) as the child would, then exits rc."""
    seen = {}

    def spawn(argv, env=None, stdout=None, stderr=None):
        seen["argv"], seen["env"] = argv, env
        out = argv[argv.index("--out") + 1]
        if rc == 0:
            with open(out, "w") as fh:
                fh.write(json.dumps({"kind": "collective", "run_id": "child1", "fabric": "p2p-off", "nranks": 2,
                                     "op": "all_reduce", "bytes": 4096, "extra": {}}) + "\n")
        if log and env.get("NCCL_DEBUG_FILE"):
            with open(env["NCCL_DEBUG_FILE"].replace("%h", "n").replace("%p", "1"), "w") as fh:
                fh.write(log)
        return subprocess.Popen(["sh", "-c", f"printf '%s' \"$E\" >&2; exit {rc}"], env={"E": _stderr},
                                stdout=stdout, stderr=stderr, text=True)

    _stderr = stderr
    monkeypatch.setattr("fabricbench.procs.spawn", spawn)
    return seen


def test_sweep_under_fabric_adopts_streams_and_flags(monkeypatch, capsys):
    from fabricbench.measuring.api import make_config

    seen = _fake_child(monkeypatch, stderr="warning: --graph is ignored on CPU ranks (no CUDA graphs)\n",
                       log="n:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n")
    got = []
    config = make_config(engine="native", gpus=[0, 1], sizes="4K", ops="all_reduce", fabric="p2p-off")
    run = sweep_under_fabric(config, got.append, run_id="parent1")
    assert seen["env"]["NCCL_P2P_DISABLE"] == "1" and seen["env"][MARKER] == "p2p-off"
    assert seen["argv"][seen["argv"].index("--fabric") + 1] == "p2p-off"
    [rec] = got
    assert rec["run_id"] == "parent1" and rec["extra"]["child_run_id"] == "child1"
    assert rec["transport"] == "P2P/CUMEM" and "NCCL used P2P/CUMEM" in rec["transport_mismatch"]
    assert run.mismatch == rec["transport_mismatch"]
    err = capsys.readouterr().err
    assert "warning: --graph is ignored" in err and "warning: fabric p2p-off" in err


@pytest.mark.parametrize("rc,stderr,exc,text", [
    (2, "Error: --gpus 0,1 names 2 GPU(s) up to 1 but 1 are visible (0-0)\n", UsageError, "--gpus 0,1 names"),
    (1, "Error: timeout: all_reduce did not finish within 5 s\n", None, "did not finish within 5 s"),
])
def test_sweep_under_fabric_raises_the_childs_error(monkeypatch, rc, stderr, exc, text):
    from fabricbench import errors
    from fabricbench.measuring.api import make_config

    _fake_child(monkeypatch, rc=rc, stderr=stderr)
    config = make_config(engine="native", gpus=[0, 1], sizes="4K", fabric="net")
    with pytest.raises(exc or errors.CollectiveTimeout) as e:
        sweep_under_fabric(config, lambda rec: None, run_id="p")
    assert text in str(e.value) and not str(e.value).startswith("Error")


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NCCL_", "GLOO_")) and k not in (MARKER, "SOME_TOKEN")}
    return env


@pytest.mark.slow
def test_sweep_applies_a_custom_fabric_on_gloo_and_masks_its_secret(tmp_path):
    """GLOO_SOCKET_IFNAME=lo reaches the ranks; SOME_TOKEN reaches them too but is never written or printed."""
    out = tmp_path / "s.jsonl"
    code, stdout, stderr = run_cli_subprocess(
        ["sweep", "--engine", "torch", "--backend", "gloo", "--nprocs", "2", "--ops", "all_reduce", "--sizes", "4K",
         "--iters", "2", "--warmup", "0", "--fabric", f"lo:GLOO_SOCKET_IFNAME=lo,SOME_TOKEN={SECRET}", "--out", out],
        env=_clean_env(), timeout=300)
    assert code == 0, stderr
    text = out.read_text()
    assert SECRET not in stdout and SECRET not in stderr and SECRET not in text
    [rec] = list(read_results(out, kind="collective"))
    assert rec["fabric"] == "lo" and rec["status"] == "ok" and rec["nranks"] == 2
    assert rec["env"]["GLOO_SOCKET_IFNAME"] == "lo" and rec["env"][MARKER] == "lo"  # rank 0's own environment
    assert "SOME_TOKEN" not in rec["env"]
    assert rec["extra"]["transport_detail"]["fabric_env"] == {"GLOO_SOCKET_IFNAME": "lo", "SOME_TOKEN": "***"}
    assert rec["transport"] == "gloo (no NCCL)" and "transport_mismatch" not in rec
    assert rec["extra"]["child_run_id"] != rec["run_id"]
    assert "fabric lo" in stdout and "all_reduce" in stdout  # the table, streamed from the child


@pytest.mark.slow
def test_library_sweep_applies_a_fabric(monkeypatch):
    """fabricbench.sweep(SweepConfig(fabric=...)) measures in a child whose ranks have the fabric's variables."""
    import fabricbench

    for var in [k for k in os.environ if k.startswith("NCCL_")] + [MARKER]:
        monkeypatch.delenv(var, raising=False)
    results = fabricbench.sweep(fabricbench.SweepConfig(
        engine="torch", backend="gloo", nprocs=2, ops=["all_reduce"], sizes="1K", iters=2, warmup=0,
        fabric="p2plo:NCCL_P2P_DISABLE=1,GLOO_SOCKET_IFNAME=lo"))
    [r] = results.records
    rec = r.to_dict()
    assert rec["fabric"] == "p2plo" and rec["env"]["NCCL_P2P_DISABLE"] == "1"
    assert rec["env"][MARKER] == "p2plo" and r.transport == "gloo (no NCCL)"
    assert "NCCL_P2P_DISABLE" not in os.environ  # applied to the child, never to this process


@pytest.mark.parametrize("spec, inert", [("p2p-off", True), ("net", True), ("x:NCCL_ALGO=Ring", True),
                                         ("default", False), ("lo:GLOO_SOCKET_IFNAME=lo", False),
                                         ("shaped:1gbit", False)])
def test_nccl_only_fabric_is_waived_on_gloo_before_anything_runs(spec, inert):
    """An NCCL-only fabric on gloo ranks would be the default under another name: waived, with the reason,
    and nothing is started (no child command)."""
    from fabricbench.fabrics import get_fabric
    from fabricbench.measuring.child import run_child
    from fabricbench.measuring.config import SweepConfig

    fabric = get_fabric(spec)
    assert bool(fabric.inert_without_nccl()) is inert
    if inert:
        run = run_child(fabric, SweepConfig(ops="all_reduce", sizes="1K", iters=2, warmup=0, engine="torch",
                                            backend="gloo", nprocs=2))
        assert "gloo ranks use no NCCL" in run.waived and fabric.name in run.waived
        assert run.records == [] and run.command == []


@pytest.mark.slow
def test_sweep_inside_an_applied_fabric_records_its_facts(tmp_path):
    """A parent (study, qualify) applied the fabric and runs `sweep --fabric X` inside it: the sweep runs
    in place and its records still say the rate and the (masked) variables."""
    out = tmp_path / "s.jsonl"
    spec = f"lo:GLOO_SOCKET_IFNAME=lo,SOME_TOKEN={SECRET}"
    env = {**_clean_env(), MARKER: "lo", "GLOO_SOCKET_IFNAME": "lo", "SOME_TOKEN": SECRET}
    code, _, stderr = run_cli_subprocess(["sweep", "--engine", "torch", "--backend", "gloo", "--nprocs", "2", "--ops",
                                          "all_reduce", "--sizes", "4K", "--iters", "2", "--warmup", "0", "--fabric",
                                          spec, "--out", out], env=env, timeout=300)
    assert code == 0, stderr
    [rec] = list(read_results(out, kind="collective"))
    assert "child_run_id" not in rec["extra"]  # measured here, not delegated
    assert rec["extra"]["fabric_env"] == {"GLOO_SOCKET_IFNAME": "lo", "SOME_TOKEN": "***"}
    assert rec["shaped_rate_bps"] is None and SECRET not in out.read_text()
    env[MARKER] = "shaped:1gbit"  # in force by its marker (the namespace is the parent's business)
    code, stdout, stderr = run_cli_subprocess(["sweep", "--engine", "torch", "--backend", "gloo", "--nprocs", "2",
                                               "--ops", "all_reduce", "--sizes", "4K", "--iters", "2", "--warmup", "0",
                                               "--fabric", "shaped:1gbit", "--json"], env=env, timeout=300)
    assert code == 0, stderr
    [rec] = [json.loads(ln) for ln in stdout.splitlines() if ln.startswith("{")]
    assert rec["shaped_rate_bps"] == 10**9 and rec["extra"]["fabric_env"]["NCCL_P2P_DISABLE"] == "1"


def test_an_interface_the_host_lacks_is_the_users_error_before_anything_starts():
    from fabricbench.fabrics.env import check_interfaces

    have = ["lo", "eth0", "ib0"]
    check_interfaces({}, have)
    check_interfaces({"GLOO_SOCKET_IFNAME": "lo,eth0", "NCCL_SOCKET_IFNAME": "eth"}, have)  # NCCL: a prefix
    check_interfaces({"NCCL_SOCKET_IFNAME": "^docker,lo"}, have)  # excluding names nothing missing
    check_interfaces({"NCCL_SOCKET_IFNAME": "=ib0"}, have)
    for env, named in (({"GLOO_SOCKET_IFNAME": "lo,fbnoif0"}, "'fbnoif0'"),
                       ({"NCCL_SOCKET_IFNAME": "=eth"}, "'eth'"),  # exact: eth0 does not count
                       ({"NCCL_SOCKET_IFNAME": "enp,wlan"}, "'enp,wlan'")):
        with pytest.raises(UsageError, match=named) as e:
            check_interfaces(env, have)
        assert "ip -br link" in str(e.value)


def test_applying_a_fabric_with_a_missing_interface_starts_nothing():
    with pytest.raises(UsageError, match="'fbnoif0'"):
        with applied(get_fabric("nowhere:GLOO_SOCKET_IFNAME=fbnoif0"), {}):
            raise AssertionError("the body ran")
    with applied(get_fabric("here:GLOO_SOCKET_IFNAME=lo"), {}) as launch:
        assert launch.env["GLOO_SOCKET_IFNAME"] == "lo"
