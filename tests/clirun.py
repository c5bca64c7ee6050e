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


def one_error_line(err: str) -> str:
    """The one line a refused command prints on stderr ("Error: ..."), asserted to be the only one."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), lines
    return lines[0]
