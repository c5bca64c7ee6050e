"""The result schema, the JSONL writer and the allow-listed environment."""

import json

import pytest

from fabricbench.errors import UsageError
from fabricbench.measuring.config import SweepConfig
from fabricbench.measuring.plan import build_plan, check_fits, plan_length
from fabricbench.measuring.runner import make_result
from fabricbench.results.context import allowed_env
from fabricbench.results.writer import ResultWriter, read_results
from fabricbench.sizes import SizeSweep
from roots import DATA

REQUIRED = {"schema", "op", "dtype", "bytes", "count", "nranks", "gpus", "inplace", "time_us", "mean_us",
            "min_us", "max_us", "p95_us", "cv", "algbw_gbps", "busbw_gbps", "wrong", "engine", "nccl_version",
            "nccl_library", "cuda_driver", "cuda_runtime", "gpu_names", "host", "timestamp", "env", "status"}


def _result(times, nranks=4, op="all_reduce", size=1 << 20):
    config = SweepConfig(gpus=tuple(range(nranks)), ops=(op,), sizes=SizeSweep(explicit=(size,)))
    item = build_plan(config, nranks)[0]
    info = {"nccl_version": "2.28.9", "nccl_library": "/x/libnccl.so.2", "cuda_driver": "13.0",
            "cuda_runtime": "13.0", "gpu_names": ["NVIDIA H200"] * nranks}
    return make_result(item=item, times=times, wrong=0, nranks=nranks, config=config, info=info, extra={},
                       run_id="r1")


def test_record_has_every_key_and_right_values():
    rec = _result([100.0, 200.0, 300.0]).to_dict()
    assert REQUIRED <= set(rec)
    assert rec["schema"] == "fabricbench/1" and rec["kind"] == "collective"
    assert rec["time_us"] == 200.0
    assert rec["algbw_gbps"] == pytest.approx((1 << 20) / 200e-6 / 1e9)
    assert rec["busbw_gbps"] == pytest.approx(rec["algbw_gbps"] * 2 * 3 / 4)
    json.dumps(rec)  # plain JSON


def test_record_names_the_algorithm_and_protocol_nccl_was_told(monkeypatch):
    monkeypatch.delenv("NCCL_ALGO", raising=False)
    monkeypatch.delenv("NCCL_PROTO", raising=False)
    rec = _result([100.0]).to_dict()
    assert (rec["nccl_algo"], rec["nccl_proto"], rec["nvls"]) == (None, None, None)  # NCCL's choice; no log read
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    monkeypatch.setenv("NCCL_PROTO", "LL128")
    rec = _result([100.0]).to_dict()
    assert (rec["nccl_algo"], rec["nccl_proto"]) == ("Ring", "LL128")
    from fabricbench.qualifying.checks.common import nccl_facts
    assert nccl_facts({**rec, "nvls": False}) == "NVLS off, algorithm Ring, protocol LL128"


def test_single_rank_busbw_is_explained_not_zero():
    rec = _result([10.0], nranks=1).to_dict()
    assert rec["busbw_gbps"] is None and "factor" in rec["busbw_note"]
    assert rec["algbw_gbps"] > 0


def test_env_is_allow_listed():
    env = {"NCCL_P2P_DISABLE": "1", "CUDA_VISIBLE_DEVICES": "0,1", "AWS_SECRET_ACCESS_KEY": "x", "HOME": "/r",
           "HF_TOKEN": "y", "NCCL_DEBUG_FILE": "/tmp/x"}
    assert allowed_env(env) == {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_P2P_DISABLE": "1"}


def test_writer_flushes_each_record_and_reader_skips_torn_line(tmp_path):
    path = tmp_path / "sub" / "r.jsonl"
    w = ResultWriter(path)
    first = _result([10.0, 11.0], nranks=2).to_dict()
    w.write(first)
    # before close, the line is already on disk
    assert json.loads(path.read_text().splitlines()[0]) == first
    w.write({"schema": "fabricbench/1", "kind": "topology", "b": 2})
    w.close()
    with open(path, "a") as fh:
        fh.write('{"schema": "fabricbench/1", "kind": "collective", "tor')  # a crash mid-write
    assert [r["time_us"] for r in read_results(path, kind="collective")] == [first["time_us"]]


def test_unwritable_out_is_usage_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UsageError, match="cannot write"):
        ResultWriter(blocker / "x.jsonl")


def test_roundtrip_dataclass():
    from fabricbench.results.schema import CollectiveResult

    res = _result([1.0, 2.0])
    back = CollectiveResult.from_dict(res.to_dict())
    assert back.to_dict() == res.to_dict()


def test_memory_check_names_what_fits():
    config = SweepConfig(gpus=(0,), ops=("all_reduce",), sizes=SizeSweep.parse("1G-8G"))
    plan = build_plan(config, 1)
    msg = check_fits(plan, free_bytes=10 << 30)
    assert "8G" in msg and "16.0 GiB per GPU" in msg and "sizes up to 4G fit" in msg
    assert check_fits(plan, free_bytes=40 << 30) is None


def test_cpu_ranks_check_the_hosts_memory_shared_by_every_rank(monkeypatch):
    from fabricbench.measuring.engines.torch_engine import TorchSession

    config = SweepConfig(ops=("all_reduce",), sizes=SizeSweep.parse("1G-8G"), engine="torch", backend="gloo")
    plan = build_plan(config, 4)
    # 4 ranks on a host with 40 GiB available: 10 GiB each, so 8G out-of-place (16 GiB per rank) does not fit
    msg = check_fits(plan, free_bytes=(40 << 30) // 4, host_ranks=4)
    assert "16.0 GiB per rank x 4 CPU rank(s)" in msg and "40.0 GiB available (MemAvailable)" in msg
    assert "sizes up to 4G fit" in msg and "--nprocs" in msg
    session = TorchSession.__new__(TorchSession)  # only what free_bytes reads
    session.backend, session.nranks = "gloo", 4
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    monkeypatch.setattr("fabricbench.measuring.engines.torch_engine.host_available_bytes", lambda: 40 << 30)
    assert session.host_ranks() == 4 and session.free_bytes() == 10 << 30


def test_train_result_round_trips_every_record_and_keeps_unknown_keys():
    """Typed train results: today's H200 records come back identical; new keys (precision, comm) are
    fields; a key no field names is kept in `extra`; a stage the run never reached stays absent."""

    from fabricbench.results.schema import UNSET, TrainResult
    from fabricbench.results.writer import read_results

    path = DATA / "train" / "h200-train.jsonl"
    records = list(read_results(path, kind="train"))
    assert records
    for rec in records:
        res = TrainResult.from_dict(rec)
        assert res.to_dict() == rec and res.extra == {}
        assert res.strategy == rec["strategy"] and res.context["kind"] == "train"
    new = {**records[0], "precision": "fp32", "comm": {"source": "profiler", "total_bytes_per_step": 42},
           "someone_elses_key": [1, 2]}
    res = TrainResult.from_dict(new)
    assert res.precision == "fp32" and res.comm["total_bytes_per_step"] == 42
    assert res.extra == {"someone_elses_key": [1, 2]} and res.to_dict() == new
    waived = TrainResult.from_dict({k: v for k, v in records[0].items()
                                    if k not in ("memory", "step_time", "step_times_s", "throughput")})
    assert waived.memory is UNSET and "memory" not in waived.to_dict() and "throughput" not in waived.to_dict()


@pytest.mark.parametrize("nranks", [1, 2, 8])
@pytest.mark.parametrize("fields", [dict(), dict(ops=("all_gather", "broadcast"), inplace="both"),
                                    dict(sizes=SizeSweep.parse("1-64"), dtype="float64", inplace="inplace")])
def test_the_bar_counts_what_the_ranks_plan(fields, nranks):
    # sweep's table counts plan_length before any rank has built the plan; tiny sizes and in-place forms
    # that some ops lack are waived items, still counted
    config = SweepConfig(**fields)
    assert plan_length(config) == len(build_plan(config, nranks))
