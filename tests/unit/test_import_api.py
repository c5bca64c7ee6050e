"""`fabricbench.import_results(ImportConfig) -> ImportResult`: the library's import, the command's one config
and result; what the command prints is tests/unit/test_import.py's.

    python3 -m pytest -q -p no:xdist tests/unit/test_import_api.py
"""

from __future__ import annotations


import pytest

import fabricbench
from fabricbench.errors import UsageError
import roots

DATA = roots.DATA / "imports"


def test_library_function(tmp_path):
    r = fabricbench.import_results(fabricbench.ImportConfig(files=DATA / "nccl_tests_redops_table_only.txt",
                                                            fabric="lab"))
    # one warning: the op the columns imply, not also "op left null" beside it
    assert len(r.warnings) == 1 and "the op (all_reduce) is inferred" in r.warnings[0], r.warnings
    assert isinstance(r, fabricbench.ImportResult) and r.out is None
    assert r.records == len(r.imported) == 6 and r.imported[0]["fabric"] == "lab"
    out = tmp_path / "o.jsonl"  # with out: appended as the command appends, and what --json prints
    w = fabricbench.import_results(fabricbench.ImportConfig(files=[DATA / "nccl_tests_redops_table_only.txt"],
                                                            out=out, nranks=8))
    assert w.imported == [] and len(out.read_text().splitlines()) == w.records == 6
    assert w.to_dict() == {"out": str(out), "records": 6, "files": w.files}
    assert w.files[0]["next"][0] == f"fabricbench qualify --spec builtin:NAME --from {out}"


@pytest.mark.parametrize("kw, said", [({"fabric": " "}, "--fabric is empty"), ({"nranks": 0}, "--nranks 0"),
                                      ({"files": ()}, "at least one file"),
                                      ({"out": DATA / "nccl_tests_redops_table_only.txt"}, "is also the input")])
def test_library_config_refuses_what_the_command_refuses(kw, said):
    with pytest.raises(UsageError, match=said):
        fabricbench.ImportConfig(**{"files": [DATA / "nccl_tests_redops_table_only.txt"], **kw})


def test_the_command_without_out_is_one_line_exit_2(capsys):
    # the library returns the records where no out is given; the command always appends them to --out
    from clirun import run_cli

    code, out, err = run_cli(["import", DATA / "nccl_tests_redops_table_only.txt"], capsys)
    assert (code, out, err.strip()) == (2, "", "Error: Missing option '--out'.")
