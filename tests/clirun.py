"""One way for tests to run `fabricbench ARGS` in their own process and read what it said, and one check
that bad input was refused as the README promises: one `Error:` line, exit 2, no traceback."""

from __future__ import annotations

from fabricbench.cli import main


def run_cli(args, capsys):
    """(exit status, stdout, stderr) of `fabricbench ARGS` in this process (0 when main returns)."""
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as e:
        code = 0 if e.code is None else e.code  # sys.exit() with no argument is a success
    out = capsys.readouterr()
    return code, out.out, out.err


def one_error_line(err: str) -> str:
    """The one line a refused command prints on stderr ("Error: ..."), asserted to be the only one."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), lines
    return lines[0]


def refused(args, capsys) -> str:
    """The one line of `fabricbench ARGS` refused as bad input: exit 2, that line alone on stderr, and no
    traceback (README: Reliability and exit codes)."""
    code, _, err = run_cli(args, capsys)
    assert code == 2 and "Traceback" not in err, (code, err)
    return one_error_line(err)
