"""Every exit status fabricbench chooses, one meaning per number (docs/exit-codes.md shows this table).

    from fabricbench.exitcodes import Exit
    sys.exit(Exit.USAGE)

A command's status is what a script, a CI gate or a scheduler reads: a number that meant two things (a
stalled rank's status read as qualify's "only warnings") would turn a hung node into a pass with
warnings. So every chosen status is a member here, and a new meaning takes a new number.
tests/house/test_exit_table.py checks that docs/exit-codes.md's table lists exactly these.

`fabricbench exec` is the one exception: it exits with its command's own status (128 + N for a death by
signal N), whatever that number means to the command; only its own outcomes (TIMEOUT, FAILED for a waived
fabric) are chosen here. A leaf module: it imports nothing of fabricbench.
"""

from __future__ import annotations

from enum import IntEnum, unique


@unique  # a number given twice fails at import, not in a user's script
class Exit(IntEnum):
    """An exit status and its one meaning (each member's MEANINGS entry is the documented sentence)."""

    OK = 0
    FAILED = 1
    USAGE = 2
    UNKNOWN = 3
    WARNING = 4
    NOTHING_MEASURED = 5
    OUT_OF_MEMORY = 6
    STALLED = 7
    TIMEOUT = 124
    HUNG_UP = 129
    INTERRUPTED = 130
    PIPE_CLOSED = 141
    TERMINATED = 143

    def __str__(self) -> str:
        # A status printed (a message, a record) is its number, on Python 3.10 too, as 3.11's IntEnum does.
        return str(int(self))


# The sentence docs/exit-codes.md's table gives each status (the test compares them word for word).
MEANINGS: dict[Exit, str] = {
    Exit.OK: "done; every qualify check passed or was waived (severity pass or info)",
    Exit.FAILED: "a measurement failed (CUDA or NCCL error, timeout, `--check` found wrong elements, a rank "
                 "died or stalled, a train strategy or study unit in error, a waived `sweep --fabric`), relate "
                 "related nothing, or a critical qualify verdict (a floor missed; a fleet node below `--fraction` "
                 "× median)",
    Exit.USAGE: "bad input (flags, sizes, GPUs, spec, files, an output that cannot be written)",
    Exit.UNKNOWN: "qualify: a check could not be measured (severity unknown), none critical",
    Exit.WARNING: "qualify: only warnings (near misses, cv, latency, flaky checks, baseline regressions, MAD "
                  "outliers)",
    Exit.NOTHING_MEASURED: "qualify: nothing measured (every check waived; a GPU spec on a machine with no GPU)",
    Exit.OUT_OF_MEMORY: "a train rank ran out of memory (its launcher records the run as `oom`)",
    Exit.STALLED: "a rank ended by the stall watchdog: a peer made no progress for `--stall-timeout` (the "
                  "status of a rank under torchrun or srun; fabricbench's own launchers report the run as 1)",
    Exit.TIMEOUT: "exec: `--timeout` stopped the command (timeout(1)'s status)",
    Exit.HUNG_UP: "hung up (SIGHUP: the terminal or SSH session closed); as 143",
    Exit.INTERRUPTED: "interrupted (Ctrl-C); results so far are written",
    Exit.PIPE_CLOSED: "exec only: its command was killed by a closed pipe (SIGPIPE, the shell's 128 + 13)",
    Exit.TERMINATED: "terminated (SIGTERM); results so far are written",
}
assert set(MEANINGS) == set(Exit), "every exit status has its one documented meaning"


def by_signal(signum: int) -> Exit:
    """The status of a run ended by SIGINT, SIGTERM or SIGHUP: the shell's 128 + signal."""
    return Exit(128 + signum)
