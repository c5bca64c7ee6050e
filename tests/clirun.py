"""One way for tests to run `fabricbench ARGS` in their own process and read what it said."""

from __future__ import annotations

from fabricbench.cli import main


def run_cli(args, capsys):
    """(exit status, stdout, stderr) of `fabricbench ARGS` in this process (0 when main returns)."""
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err
