"""A user moving results in and out: another tool's output imported, a sweep exported for a simulator, and
their own command run under a fabric."""

from __future__ import annotations

from typing import Any

import fabricbench


def imported() -> list[dict[str, Any]]:
    i: fabricbench.ImportResult = fabricbench.import_results(
        fabricbench.ImportConfig(files=("nccl-tests.txt",), out="imported.jsonl", fabric="default", nranks=8))
    print(f"{i.records} records from {len(i.files)} files", i.warnings)
    return i.imported


def exported() -> list[str]:
    x: fabricbench.ExportResult = fabricbench.export(fabricbench.ExportConfig(results="ag.jsonl", format="simai-busbw",
                                                                              out="busbw.yaml", group="DP"))
    return x.notes + x.warnings


def my_command() -> int:
    r: fabricbench.ExecResult = fabricbench.execute(fabricbench.ExecConfig(command=("python3", "train.py"),
                                                                           fabric="p2p-off", timeout_s=600.0))
    print(r.status, r.warnings)
    return r.exit_status


if __name__ == "__main__":
    print(imported(), exported(), my_command())
