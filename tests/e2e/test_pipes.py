"""Every command under a pipe with COLUMNS=80: no line of its output over 80 columns, none padded.

    COLUMNS=80 fabricbench sweep --engine torch --backend gloo --nprocs 2 | tee log

Once, that printed a 101-column table, and `qualify ... > log` wrote 209-column rows padded with
blanks. Piped, a command honours COLUMNS (report.table: tables reflow, listings wrap at words) and its
progress goes to stderr as a plain line every few seconds (progress.Progress), cut to COLUMNS. Messages
(`Error:`, `warning:`, `note:`) stay one line each, whatever their length: one grep finds each whole.
The cases run in this process (stdout captured is a pipe to the code) on recorded inputs or a tiny gloo
run, so the file stays fast.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from fabricbench.cli import COMMANDS
from fabricbench.progress import Progress
from clirun import exit_status, run_cli
from roots import DATA, ROOT

# paths as a user types them, relative to the folder a case runs in (a path longer than the width stays
# whole on its line, rightly: this keeps the test's own long temporary paths out of the figures)
STUDY = "study"  # a copy of tests/data/study/cpu-lab (report rebuilds its report in place)
UNITS = Path("study/units")
IMPORTS = Path("data/imports")  # tests/data
TOPO = Path("data/topo/h200_sxm_nvswitch.txt")
TINY = ["--engine", "torch", "--backend", "gloo", "--sizes", "1K", "--iters", "2", "--warmup", "1"]
GLOO = [*TINY, "--nprocs", "2"]
WIDTH = 80
MESSAGES = ("Error: ", "warning: ", "note: ")

CASES = [
    ["sweep", "--dry-run", "--engine", "torch", "--backend", "gloo", "--nprocs", "2"],
    ["sweep", "--list-ops"],
    ["sweep", *GLOO, "--ops", "all_reduce,all_gather"],
    ["topo", "--from-file", TOPO],
    ["fabrics"],
    ["compare", "--fabrics", "default", *GLOO, "--ops", "all_reduce", "--with", UNITS / "sweep_default.jsonl"],
    ["scaling", "--counts", "2", *TINY, "--ops", "all_reduce"],
    ["p2p"],  # GPU only: on a CPU machine, its one error line
    ["train", "--list"],
    ["estimate", "--model", "mistral-7b", "--num-gpus", "8"],
    ["relate", UNITS / "sweep_default.jsonl", UNITS / "sweep_shaped_1gbit.jsonl", UNITS / "train_ddp_default.jsonl",
     UNITS / "train_ddp_shaped_1gbit.jsonl"],
    ["study", "--dry-run", "--device", "cpu", "--nprocs", "2", "--model", "tiny-mistral", "--out", "planned"],
    ["report", STUDY],
    ["advise", "--model", "mistral-7b", "--num-gpus", "8", "--topo-file", TOPO],
    ["qualify", "--list-specs"],
    ["qualify", "--list-kinds"],
    ["qualify", "--list-codes"],
    ["qualify", "--spec", "builtin:h200-sxm-8", "--dry-run"],
    ["qualify", "--spec", "builtin:h200-sxm-8", "--from", UNITS / "sweep_default.jsonl"],
    ["import", IMPORTS / "nccl_tests_gb200_nvl72.txt", "--out", "imported.jsonl"],
    ["jobfit", "--job", IMPORTS / "inspector/readme_v4_0_plain_and_verbose.log", "--sweep", STUDY, "--fabric",
     "default"],
    ["export", "--format", "simai-busbw", "--out", "busbw.yaml", UNITS / "sweep_default.jsonl"],
    ["exec", "--", sys.executable, "-c", "pass"],  # the command's own output is its own: exec says one line
]


def test_every_command_is_run_under_a_pipe():
    assert {c[0] for c in CASES} == set(COMMANDS)


class _HeadOne(io.StringIO):
    """A stdout read by `head -1`: the first write arrives, and every write or flush after it meets the
    closed pipe (the last flush at the latest, so every command meets it)."""

    def __init__(self):
        super().__init__()
        self.writes = self.refused = 0

    def write(self, text):
        if self.writes:
            self.refused += 1
            raise BrokenPipeError(32, "Broken pipe")
        self.writes += 1
        return super().write(text)

    def flush(self):
        if self.writes:
            self.refused += 1
            raise BrokenPipeError(32, "Broken pipe")


def _heavy(args) -> bool:
    """Seconds of real processes (ranks, a report's figures): the slow tier's; every other command meets
    the closed pipe in the default tier, sweep too (--dry-run, --list-ops)."""
    return args[0] in ("compare", "scaling", "report") or (args[0] == "sweep" and "--nprocs" in args
                                                             and "--dry-run" not in args)


@pytest.mark.parametrize("args", [pytest.param(c, marks=pytest.mark.slow) if _heavy(c) else c for c in CASES],
                         ids=[" ".join(map(str, c))[:60] for c in CASES])
def test_a_closed_stdout_ends_quietly_with_the_commands_own_status(args, tmp_path, monkeypatch):
    # `fabricbench CMD | head -1`: exit 1 (click's word for a broken pipe) read as "a measurement failed"
    # under set -o pipefail; the command finishes and exits as it would have, its files written, silent
    import shutil
    import sys

    shutil.copytree(DATA / "study/cpu-lab", tmp_path / "study",
                    ignore=shutil.ignore_patterns("report*"))
    (tmp_path / "data").symlink_to(ROOT / "tests/data")
    monkeypatch.chdir(tmp_path)
    out, err = _HeadOne(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    code = exit_status(args)
    assert code in (0, 5) or (args == ["p2p"] and code == 2), (code, err.getvalue())
    assert out.refused or not out.writes  # the closed pipe was met by whatever wrote to stdout (p2p: stderr only)
    assert "Traceback" not in err.getvalue() and "Broken pipe" not in err.getvalue()
    if "--out" in args and "--dry-run" not in args:  # what the command writes is still written
        assert (tmp_path / args[args.index("--out") + 1]).stat().st_size > 0


def test_exec_exits_with_its_commands_status_under_a_closed_pipe():
    # exec's contract is its command's status: a command that the closed pipe kills (SIGPIPE) gives 141,
    # the shell's own convention, as `yes | head -1` does; exec itself says its one line and stays quiet
    import subprocess

    p = subprocess.Popen([sys.executable, "-m", "fabricbench", "exec", "--", "yes"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 141 and "killed by SIGPIPE" in err and "Traceback" not in err, err


def test_a_reader_that_goes_leaves_exit_0_in_a_real_pipe():
    # the interpreter's own last flush meets the closed pipe too: nothing printed, status 0
    import subprocess
    import sys

    for args in (["qualify", "--list-codes"], ["train", "--list"], ["sweep", "--list-ops"]):
        p = subprocess.Popen([sys.executable, "-m", "fabricbench", *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        p.stdout.close()  # no reader from the start: the first write fails, every time
        err = p.stderr.read().decode()
        assert p.wait(timeout=60) == 0 and err == "", (args, err)


@pytest.mark.parametrize("args", CASES, ids=[" ".join(map(str, c))[:60] for c in CASES])
def test_piped_output_fits_columns(args, tmp_path, monkeypatch, capsys):
    import shutil

    monkeypatch.setenv("COLUMNS", str(WIDTH))
    shutil.copytree(DATA / "study/cpu-lab", tmp_path / "study",
                    ignore=shutil.ignore_patterns("report*"))
    (tmp_path / "data").symlink_to(ROOT / "tests/data")
    monkeypatch.chdir(tmp_path)
    argv = [str(a) for a in args]
    code, out, err = run_cli(argv, capsys)
    assert code in (0, 5) or (args == ["p2p"] and code == 2), (code, err)
    assert out.strip() or args[0] in ("p2p", "exec"), err  # exec's line is on stderr
    wide = [ln for ln in out.splitlines() if len(ln) > WIDTH]
    wide += [ln for ln in err.splitlines() if len(ln) > WIDTH and not ln.startswith(MESSAGES)
             and not ln.startswith(("fabric ", "exec: "))]  # compare's fabric lines, exec's one line: messages
    assert not wide, wide
    assert not [ln for ln in out.splitlines() if ln != ln.rstrip()], "a padded line"


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_progress_under_a_pipe_is_a_line_every_few_seconds(monkeypatch):
    # not a bar (stdout is not a terminal): one line per LOG_EVERY_S while the work moves, cut to COLUMNS
    monkeypatch.setenv("COLUMNS", "60")
    clock, stream = _Clock(), io.StringIO()
    with Progress("sweep", total=10, stream=stream, clock=clock, log_every_s=5.0, periodic=False) as p:
        assert p.mode == "log"
        for i in range(10):
            clock.now += 2.0
            p.advance(item=f"default all_reduce {i}M on 2 gloo ranks, out of place, float32")
    lines = stream.getvalue().splitlines()
    assert lines[0] == "sweep: 3/10 (30%) done after 0m06s, now default all_reduce…"
    assert [ln.split()[1] for ln in lines] == ["3/10", "6/10", "9/10", "10/10"]  # every 6 s, then the end
    assert all(len(ln) <= 60 for ln in lines) and lines[-1] == "sweep: 10/10 (100%) done after 0m20s"


def test_progress_says_a_line_every_few_seconds_while_a_step_runs(monkeypatch):
    # a study unit of 60 s advanced nothing for 60 s: the log was silent; a heartbeat says where it is
    import time

    monkeypatch.setenv("COLUMNS", "80")
    clock, stream = _Clock(), io.StringIO()
    with Progress("study", total=20, stream=stream, clock=clock, log_every_s=0.05) as p:
        p.update(item="train ddp @ default")
        for beat in (1, 2, 3):  # no advance at all: only time passes
            clock.now = 0.05 * beat + 0.001
            deadline = time.monotonic() + 5
            while stream.getvalue().count("\n") < beat and time.monotonic() < deadline:
                time.sleep(0.005)
        lines = stream.getvalue().splitlines()
    assert lines[:3] == ["study: 0/20 (0%) done after 0m00s, now train ddp @ default"] * 3, lines
    quiet = io.StringIO()
    with Progress("study", total=20, stream=quiet, clock=_Clock(), log_every_s=0.05) as p:
        time.sleep(0.1)  # the clock stands still: under log_every_s nothing is said
    assert quiet.getvalue() == ""


def test_listing_lines_wrap_at_words_under_their_last_column():
    from fabricbench.reporting.table import fit_lines

    listing = ["FB_LINK_DOWN    critical  a GPU link is down or slower than the spec: reseat or replace the board",
               "short line", "x" * 100]
    got = fit_lines(listing, 60)
    assert got[:3] == ["FB_LINK_DOWN    critical  a GPU link is down or slower than",
                       " " * 26 + "the spec: reseat or replace the", " " * 26 + "board"]  # under its last column
    narrow = fit_lines(listing[:1], 40)  # the column is past half the width: a plain indent instead
    assert narrow[1] == "    down or slower than the spec: reseat" and all(len(ln) <= 40 for ln in narrow)
    assert "short line" in got and "x" * 100 in got  # a word longer than the width stays whole
    assert " ".join(" ".join(got).split()) == " ".join(" ".join(listing).split())  # nothing lost
    assert fit_lines(listing, None) == listing  # a pipe that asked for no width: one record per line


def test_piped_rich_output_carries_no_trailing_blanks(monkeypatch, capsys):
    from fabricbench.reporting import table as tables

    monkeypatch.setenv("COLUMNS", "40")
    con = tables.console()
    con.print("a line of words that rich wraps at forty columns, padded to the width", justify="left")
    tables.render(con, "t", [tables.Col("name", justify="left"), tables.Col("value")], [["a", 1], ["bb", 22]])
    out = capsys.readouterr().out
    assert out.splitlines() and all(ln == ln.rstrip() and len(ln) <= 40 for ln in out.splitlines()), out


def test_step_progress_counts_to_the_cap_not_the_minimum():
    # with --target-ci, --steps is the minimum: "step r0 39/6" read as a run gone past its end
    from types import SimpleNamespace

    from fabricbench.training.config import TrainConfig
    from fabricbench.training.launch import _steps

    items = []
    bar = SimpleNamespace(update=lambda item=None, **_: items.append(item))
    for target_ci, cap in ((0.05, 40), (None, 6)):
        config = TrainConfig(model="tiny-mistral", device="cpu", nprocs=2, steps=6, target_ci=target_ci,
                             strategies=("ddp",))
        _steps(bar, config, "ddp")("rank 0", {"step": 5})
        assert items[-1] == f"ddp: step r0 5/{cap}"
