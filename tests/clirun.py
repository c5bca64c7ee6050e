"""One way for tests to run `fabricbench ARGS` and read what it said, and one check that bad input was
refused as the README promises: one `Error:` line, exit 2, no traceback.

run_cli runs it in this process and reads the output through pytest's capsys; run_cli_captured does the
same where capsys cannot serve (hypothesis examples, a helper without the fixture); exit_status, under both,
leaves the output where sys.stdout and sys.stderr point (a stand-in for a pipe that closes);
run_cli_subprocess runs it as a user does, in a fresh `python -m fabricbench`, where the real exit status,
the environment, stdin or a fresh interpreter is what the test is about."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

from fabricbench.cli import main


def exit_status(args) -> int:
    """The exit status `fabricbench ARGS` ends with in this process, as the interpreter would set it."""
    try:
        main([str(a) for a in args])
    except SystemExit as e:
        if e.code is None:  # sys.exit() with no argument is a success
            return 0
        return e.code if isinstance(e.code, int) else 1  # sys.exit("why") exits 1
    return 0


def run_cli(args, capsys):
    """(exit status, stdout, stderr) of `fabricbench ARGS` in this process (0 when main returns)."""
    code = exit_status(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def run_cli_captured(args):
    """run_cli without capsys: stdout and stderr are redirected for this one call."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = exit_status(args)
    return code, out.getvalue(), err.getvalue()


def run_cli_subprocess(args, *, timeout=120, **kw):
    """(exit status, stdout, stderr) of `python -m fabricbench ARGS` in a fresh process; the rest (env, cwd,
    input, ...) goes to subprocess.run as it is, so env is the child's whole environment."""
    p = subprocess.run([sys.executable, "-m", "fabricbench", *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, **kw)
    return p.returncode, p.stdout, p.stderr


def one_error_line(err: str, case: str = "") -> str:
    """The one line a refused command prints on stderr ("Error: ..."), asserted to be the only one; case names
    the command in the failure, where one test walks many."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), (case, lines) if case else lines
    return lines[0]


def refused(args, capsys) -> str:
    """The one line of `fabricbench ARGS` refused as bad input: exit 2, that line alone on stderr, and no
    traceback (README: Reliability and exit codes)."""
    code, _, err = run_cli(args, capsys)
    assert code == 2 and "Traceback" not in err, (code, err)
    return one_error_line(err)
