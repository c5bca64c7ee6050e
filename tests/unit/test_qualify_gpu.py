"""qualify on GPUs: a built-in spec's measuring checks with the native engine (one GPU: pair checks
waived with the reason; two: the transport under default and p2p-off)."""

from __future__ import annotations

import json

import pytest

from clirun import run_cli_subprocess
from tests.conftest import GPUS


@pytest.mark.gpu(1)
def test_builtin_spec_on_the_gpus_here(tmp_path):
    out = tmp_path / "q"
    code, _, err = run_cli_subprocess(["qualify", "--spec", "builtin:h200-sxm-8", "--level", "3", "--only",
                                       "allreduce_8gpu,allreduce_pairs,host_links,collectives_correct", "--out", out,
                                       "--quiet"], timeout=900)
    assert code in (0, 1, 4), err  # pass, critical or warning: every check measured (not 3)
    v = {x["check"]: x for x in json.loads((out / "verdicts.json").read_text())["verdicts"]}
    assert v["collectives_correct"]["status"] == "pass", v["collectives_correct"]
    assert v["host_links"]["status"] in ("pass", "fail") and v["host_links"]["measured"] > 1
    assert all(x["severity"] in ("pass", "info", "warning", "critical") and x["code"].startswith("FB_")
               and len(x["attempts"]) >= 1 for x in v.values())
    lat = next(i for i in v["allreduce_8gpu"]["items"] if i["criterion"] == "latency")
    assert lat["status"] in ("pass", "fail") and 0 < lat["measured"] < 10_000
    if GPUS == 1:
        assert v["allreduce_pairs"]["status"] == "waived" and "needs at least 2" in v["allreduce_pairs"]["reason"]
        bw = next(i for i in v["allreduce_8gpu"]["items"] if i["criterion"] == "busbw")
        assert bw["status"] == "waived"
    else:
        assert v["allreduce_pairs"]["status"] in ("pass", "fail") and len(v["allreduce_pairs"]["items"]) == \
            GPUS * (GPUS - 1) // 2


@pytest.mark.gpu(2)
def test_transport_under_default_and_p2p_off(tmp_path):
    spec = tmp_path / "t.toml"
    spec.write_text('[spec]\nname = "t"\n[[check]]\nname = "tr"\nkind = "transport"\ngpus = [[0, 1]]\n'
                    'expect = { "p2p-off" = "SHM" }\n')
    code, _, err = run_cli_subprocess(["qualify", "--spec", spec, "--out", tmp_path / "q", "--quiet"], timeout=900)
    v = json.loads((tmp_path / "q" / "verdicts.json").read_text())["verdicts"][0]
    assert code == 0 and v["status"] == "pass" and v["measured"].startswith("SHM"), v
