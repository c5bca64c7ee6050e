"""The relate lab's order (fabricbench/relating/lab.py): the reference trains first, its traces plan the
sweeps, and repeats are rounds that train every fabric once each, so a fabric's k-th run shares the
machine's state with the reference's k-th. Commands are recorded, not run."""

from __future__ import annotations

import json

from fabricbench.relating import lab


def test_repeats_are_rounds_over_every_fabric(tmp_path, monkeypatch):
    out = tmp_path / "lab.jsonl"
    done: list[str] = []

    def fake_under(config, fabric, job, what, run, say):
        done.append(what)
        if what.startswith("train"):  # a traced run, as train --out appends it
            rec = {"kind": "train", "strategy": "ddp", "fabric": fabric,
                   "comm": {"collectives": [{"op": "all_reduce", "bytes": 4096, "dtype": "float32",
                                             "group_size": 2, "calls_per_step": 1.0}]}}
            with out.open("a") as fh:
                fh.write(json.dumps(rec) + "\n")

    monkeypatch.setattr(lab, "_under", fake_under)
    cfg = lab.LabConfig(fabrics=["default", "shaped:1gbit", "shaped:300mbit"], strategies=["ddp"],
                        model="lab-mistral", out=str(out), repeats=3)
    lab.run_lab(cfg)
    assert done == ["train default",
                    "sweep default float32", "sweep shaped:1gbit float32", "train shaped:1gbit",
                    "sweep shaped:300mbit float32", "train shaped:300mbit",
                    "train default round 2", "train shaped:1gbit round 2", "train shaped:300mbit round 2",
                    "train default round 3", "train shaped:1gbit round 3", "train shaped:300mbit round 3"]
