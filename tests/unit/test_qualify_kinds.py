"""The GPU check kinds' judgement on CPU: a Context whose measurements are canned records (as the sweep,
p2p and train commands write them), so the verdicts — which pair fails, the waiver on one GPU, the
transport families, the contrast ratio — are checked on values without a GPU."""

from __future__ import annotations


import pytest

from fabricbench.jobs.configs import to_argv
from fabricbench.qualifying.context import Context, UnitResult
from fabricbench.qualifying.spec import parse_spec
from fabricbench.qualifying.verdict import combine
from roots import DATA

TOPO = DATA / "topo"


class CannedContext(Context):
    """Real GPU-set logic; measurements answered from functions of the unit."""

    def __init__(self, spec_text: str, *, gpus: int, sweep=None, copies=None, train=None, topo_file=None):
        super().__init__(parse_spec(spec_text, "t.toml"), writer=None, run_id="r", topo_file=topo_file)
        self.n, self._sweep_fn, self._copies_fn, self._train_fn = gpus, sweep, copies, train
        self.units = []

    def visible_gpus(self) -> int:
        return self.n

    def sweep(self, unit):
        self.units.append(unit)
        return self._sweep_fn(unit)

    def copies(self, gpus, size, *, peers, host):
        return self._copies_fn(gpus, size, peers, host)

    def train(self, job):
        args = to_argv(job)
        self.units.append(args)
        return self._train_fn(args)


def judge(ctx: Context, name: str):
    from fabricbench.qualifying.checks import CHECKS

    c = ctx.spec.check(name)
    return combine(c.name, c.kind, CHECKS.get(c.kind).judge(c, ctx))


HEAD = '[spec]\nname = "t"\n[run]\nengine = "native"\n'


def coll(op, size, nranks, time_us, busbw=None, fabric="default", transport=None, wrong=None, gpus=()):
    return {"kind": "collective", "op": op, "requested_bytes": size, "bytes": size, "nranks": nranks,
            "time_us": time_us, "busbw_gbps": busbw, "status": "ok" if not wrong else "wrong", "cv": 0.01,
            "inplace": False, "fabric": fabric, "transport": transport, "wrong": wrong, "gpus": list(gpus),
            "busbw_note": None if nranks > 1 else "n = 1: the bus-bandwidth factor 2(n-1)/n is 0"}


def test_collective_each_pair_names_the_slow_pair():
    spec = HEAD + '[[check]]\nname = "p"\nkind = "collective"\nop = "all_reduce"\nsizes = ["1G"]\n' \
                  'gpus = "each_pair"\nreference_busbw_gbps = 330\nmin_fraction = 0.8\n'

    def sweep(u):
        bw = 120.0 if u.gpus == (1, 3) else 300.0  # one bad pair
        return UnitResult(key=u.key, records=[coll("all_reduce", 1 << 30, 2, 1000.0, bw, gpus=u.gpus)])

    ctx = CannedContext(spec, gpus=4, sweep=sweep)
    v = judge(ctx, "p")
    assert len(ctx.units) == 6 and {u.gpus for u in ctx.units} == {(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)}
    assert v.status == "fail" and v.subject == "GPUs 1,3, 1G" and v.measured == 120.0
    assert v.threshold == pytest.approx(264.0) and v.headroom == pytest.approx(120 / 264 - 1)
    assert "0.8 x reference 330" in v.reason
    assert sum(i.status == "pass" for i in v.items) == 5


def test_pair_checks_waive_on_one_gpu_and_busbw_waives_on_one_rank():
    spec = HEAD + '[[check]]\nname = "p"\nkind = "collective"\nop = "all_reduce"\nsizes = ["8", "1G"]\n' \
                  'gpus = "each_pair"\nmin_busbw_gbps = 100\n' \
                  '[[check]]\nname = "a"\nkind = "collective"\nop = "all_reduce"\nsizes = ["8", "1G"]\n' \
                  'min_busbw_gbps = 100\nmax_latency_us = 20\n' \
                  '[[check]]\nname = "c"\nkind = "contrast"\ngpus = [[0, 1]]\nmin_ratio = 5\n' \
                  '[[check]]\nname = "cp"\nkind = "p2p"\nmin_gbps = 300\n'

    def sweep(u):
        return UnitResult(key=u.key, records=[coll("all_reduce", 8, 1, 9.0), coll("all_reduce", 1 << 30, 1, 4000.0)])

    ctx = CannedContext(spec, gpus=1, sweep=sweep)
    p = judge(ctx, "p")
    assert p.status == "waived" and "a pair check needs at least 2" in p.reason
    a = judge(ctx, "a")
    assert a.status == "pass"  # latency judged, busbw waived with the reason
    assert {(i.criterion, i.status) for i in a.items} == {("busbw", "waived"), ("latency", "pass")}
    assert "factor" in next(i.reason for i in a.items if i.criterion == "busbw")
    c = judge(ctx, "c")
    assert c.status == "waived" and "beyond the 1 visible" in c.reason
    cp = judge(ctx, "cp")
    assert cp.status == "waived" and "needs at least 2" in cp.reason


def test_no_gpu_is_an_error_not_a_pass():
    spec = HEAD + '[[check]]\nname = "a"\nkind = "collective"\nop = "all_reduce"\nsizes = ["1M"]\nmin_busbw_gbps = 1\n'
    v = judge(CannedContext(spec, gpus=0, sweep=None), "a")
    assert v.status == "error" and "no CUDA GPU" in v.reason


def test_transport_families():
    spec = HEAD + '[[check]]\nname = "t"\nkind = "transport"\nexpect = { default = "P2P", "p2p-off" = "SHM" }\n'
    seen = {"default": "P2P/CUMEM", "p2p-off": "SHM+P2P/IPC"}  # p2p-off still used P2P: a failure

    def sweep(u):
        return UnitResult(key=u.key, records=[coll("all_reduce", 1 << 20, 2, 50.0, 40.0, fabric=u.fabric)],
                          transport=seen[u.fabric])

    v = judge(CannedContext(spec, gpus=2, sweep=sweep), "t")
    assert v.status == "fail" and v.subject == "GPUs 0,1, fabric p2p-off" and v.measured == "SHM+P2P/IPC"
    assert [i.status for i in v.items] == ["pass", "fail"]


def test_contrast_ratio():
    spec = HEAD + '[[check]]\nname = "c"\nkind = "contrast"\nsize = "1G"\ngpus = [[0, 1]]\nmin_ratio = 5\n'
    times = {"default": 3000.0, "p2p-off": 30000.0}

    def sweep(u):
        return UnitResult(key=u.key, records=[coll("all_reduce", 1 << 30, 2, times[u.fabric], 1.0, fabric=u.fabric)])

    v = judge(CannedContext(spec, gpus=8, sweep=sweep), "c")
    assert v.status == "pass" and v.measured == pytest.approx(10.0) and v.headroom == pytest.approx(1.0)
    times["p2p-off"] = 9000.0
    v = judge(CannedContext(spec, gpus=8, sweep=sweep), "c")
    assert v.status == "fail" and v.measured == pytest.approx(3.0)


def test_correctness_counts_wrong_elements():
    spec = HEAD + '[[check]]\nname = "k"\nkind = "correctness"\nops = ["all_reduce", "all_gather"]\n'

    def sweep(u):
        assert u.check and u.ops == ("all_reduce", "all_gather")
        return UnitResult(key=u.key, records=[coll("all_reduce", 4096, 2, 10.0, 1.0, wrong=0),
                                              coll("all_gather", 4096, 2, 10.0, 1.0, wrong=17)])

    v = judge(CannedContext(spec, gpus=2, sweep=sweep), "k")
    assert v.status == "fail" and v.measured == 17.0 and "worst all_gather 4096 B" in v.subject


def _copy(kind, src, dst, direction, gbps):
    return {"kind": "copy", "copy_kind": kind, "src": src, "dst": dst, "direction": direction, "gbps": gbps,
            "bytes": 1 << 28}


def test_p2p_minimum_and_uniformity():
    spec = HEAD + '[[check]]\nname = "cp"\nkind = "p2p"\nmin_gbps = 300\nmin_fraction_of_median = 0.9\n'
    recs = [_copy("peer", f"GPU{s}", f"GPU{d}", "uni", 380.0 if (s, d) != (2, 0) else 290.0)
            for s in range(4) for d in range(4)]

    v = judge(CannedContext(spec, gpus=4, copies=lambda *a: UnitResult(key="c", records=recs)), "cp")
    assert v.status == "fail" and v.subject == "GPU2->GPU0" and v.measured == 290.0
    crit = {(i.criterion, i.subject): i.status for i in v.items}
    assert crit[("min_gbps", "GPU2->GPU0")] == "fail" and crit[("uniformity", "GPU2->GPU0")] == "fail"


def test_host_copy_per_gpu():
    spec = HEAD + '[[check]]\nname = "h"\nkind = "host_copy"\nmin_h2d_gbps = 44\nmin_d2h_gbps = 44\n'
    recs = [_copy("host", "host", "GPU0", "h2d", 55.1), _copy("host", "GPU0", "host", "d2h", 55.2),
            _copy("host", "host", "GPU1", "h2d", 21.0), _copy("host", "GPU1", "host", "d2h", 54.0)]
    v = judge(CannedContext(spec, gpus=2, copies=lambda *a: UnitResult(key="c", records=recs)), "h")
    assert v.status == "fail" and v.subject == "GPU1" and v.criterion == "h2d" and v.measured == 21.0


def test_train_smoke():
    spec = '[spec]\nname = "t"\n[run]\nengine = "torch"\nbackend = "gloo"\nnprocs = 2\n' \
           '[[check]]\nname = "s"\nkind = "train"\nloss_falls = true\nmin_samples_per_s = 2\n'
    rec = {"schema": "fabricbench/1", "kind": "train", "strategy": "ddp", "status": "ok", "nranks": 2,
           "first_loss": 10.4, "last_loss": 9.8, "loss_decreased": True, "throughput": {"samples_per_s": 3.5}}
    ctx = CannedContext(spec, gpus=0, train=lambda a: UnitResult(key="t", records=[rec]))
    v = judge(ctx, "s")
    assert v.status == "pass" and "--device" in ctx.units[0] and ctx.units[0][ctx.units[0].index("--nprocs") + 1] == "2"
    rec.update(loss_decreased=False, last_loss=10.9)
    v = judge(ctx, "s")
    assert v.status == "fail" and v.criterion == "loss_falls" and v.measured == "10.4000 -> 10.9000"
    rec.update(status="timeout", message="timed out after 60 s")  # nothing timed to judge: not measured
    v = judge(ctx, "s")
    assert v.status == "error" and "timeout: timed out after 60 s" in v.reason
    rec.update(status="waived", message="DeepSpeed is not installed")
    assert judge(ctx, "s").status == "waived"
    rec.update(status="ok", first_loss="10.4")  # a damaged record is read as none, and says why
    v = judge(ctx, "s")
    assert v.status == "error" and "first_loss is a string, not a number" in v.reason


def test_cv_is_judged_from_1mib_up():
    spec = HEAD + '[[check]]\nname = "a"\nkind = "collective"\nop = "all_reduce"\nsizes = ["8", "1G"]\nmax_cv = 0.2\n'

    def sweep(u):
        small, big = coll("all_reduce", 8, 2, 9.0, 0.001), coll("all_reduce", 1 << 30, 2, 4000.0, 300.0)
        small["cv"], big["cv"] = 0.9, big_cv[0]
        return UnitResult(key=u.key, records=[small, big])

    big_cv = [0.05]
    v = judge(CannedContext(spec, gpus=2, sweep=sweep), "a")
    assert v.status == "pass" and v.measured == 0.05 and v.subject.endswith("worst at 1G")
    big_cv[0] = 0.3
    v = judge(CannedContext(spec, gpus=2, sweep=sweep), "a")
    assert v.status == "fail" and v.measured == 0.3
