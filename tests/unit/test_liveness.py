"""One bound for "silence means dead" (fabricbench/jobs/liveness.py), shared by the writers of both liveness
signals (the channel pulse, the store heartbeat) and by everything that reads them, and stated alike in the
docs.

    python3 -m pytest -q tests/unit/test_liveness.py
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
import time
from pathlib import Path

import pytest

from fabricbench.jobs import channel, heartbeat, liveness, runner
from fabricbench.jobs.liveness import DEAD_AFTER_S
from roots import ROOT

PACKAGE = ROOT / "fabricbench"


def _module_constants(path: Path) -> list[str]:
    """Names bound at a module's top level by an assignment of a number."""
    out = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, (int, float)) and not isinstance(node.value.value, bool):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out += [t.id for t in targets if isinstance(t, ast.Name)]
    return out


def test_dead_after_is_defined_once():
    """No second number for "silence this long means dead" anywhere in the package: a runner's own ALIVE_S or
    a watchdog's own DEAD_S could drift from it, and the runner and the watchdog would disagree on a death."""
    found = {f"{p.relative_to(ROOT)}:{name}" for p in PACKAGE.rglob("*.py") for name in _module_constants(p)
             if re.search(r"DEAD|ALIVE", name)}
    assert found == {"fabricbench/jobs/liveness.py:DEAD_AFTER_S"}, found
    assert isinstance(DEAD_AFTER_S, float) and DEAD_AFTER_S > 0


def test_the_writers_beat_several_times_within_the_bound():
    """A pulse and a beat each come at least three times within DEAD_AFTER_S, so one late beat on a loaded
    machine is never a death."""
    assert channel.PULSE_S * 3 <= DEAD_AFTER_S
    assert heartbeat.BEAT_S * 3 <= DEAD_AFTER_S


def test_a_channel_pulses_at_its_period(tmp_path):
    """The writer of the pulse: its file's mtime moves every PULSE_S, and its hello says the period."""
    ch = channel.Channel(tmp_path / channel.file_name("rank 0"), "rank 0")
    try:
        path = tmp_path / channel.file_name("rank 0")
        old = time.time() - 100.0
        os.utime(path, (old, old))
        deadline = time.monotonic() + 30  # only stops a hung test: a wall-clock bar would fail on a busy host
        while path.stat().st_mtime < old + 50:
            assert time.monotonic() < deadline, "the channel file's mtime never moved"
            time.sleep(channel.PULSE_S / 5)
        hello = json.loads(path.read_text().splitlines()[0])
        assert hello["m"] == "hello" and hello["pulse_s"] == channel.PULSE_S
    finally:
        ch.close()


def _watch_with(tmp_path: Path, silent_s: float) -> runner._Watch:
    watch = runner._Watch(tmp_path, [], ["rank 0"], None, runner.Outcome(returncode=None))
    sp = next(iter(watch.speakers.values()))
    sp.path = tmp_path / channel.file_name("rank 0")
    sp.last_alive = time.monotonic() - silent_s
    return watch


@pytest.mark.parametrize("below", [True, False])
def test_the_runner_reads_a_pulse_by_the_same_bound(tmp_path, below):
    """The reader of the pulse: a process whose pulse is just younger than DEAD_AFTER_S is alive, just
    older is the one that stopped."""
    silent_s = DEAD_AFTER_S - 1.0 if below else DEAD_AFTER_S + 1.0
    named = _watch_with(tmp_path, silent_s).silent_one(["rank 0"])
    if below:
        assert named is None
    else:
        assert named is not None and named[0] == "rank 0" and "no sign of life for" in named[1]


def test_the_heartbeat_and_the_sweep_ranks_read_silence_by_the_same_bound():
    """The readers of the store heartbeat (a rank whose collective failed waits DEAD_AFTER_S for a dead
    peer) and `sweep --nprocs`'s default stall bound (--timeout + DEAD_AFTER_S) use the one constant."""
    assert inspect.signature(heartbeat.Heartbeat.failed).parameters["wait_s"].default is DEAD_AFTER_S
    assert runner.DEAD_AFTER_S is liveness.DEAD_AFTER_S
    from fabricbench.measuring import launch
    from fabricbench.measuring.config import SweepConfig

    config = SweepConfig(timeout_s=20.0)
    assert launch.local_stall_s(config) == 20.0 + DEAD_AFTER_S
    opt = SweepConfig.__dataclass_fields__["stall_timeout_s"].metadata["fabricbench.option"]
    assert f"--timeout + {DEAD_AFTER_S:g} " in opt.default_by


DOC_BOUNDS = [  # what the docs say of the bound, each number read back
    (r"`--timeout` \+ (\d+(?:\.\d+)?) s", ("exit-codes.md", "reliability.md")),
    (r"waits up to (\d+(?:\.\d+)?) s for a peer", ("reliability.md",)),
    (r"died: no heartbeat for (\d+(?:\.\d+)?) s", ("reliability.md", "multinode.md")),
    (r"(\d+(?:\.\d+)?) s of silence meaning dead", ("reliability.md",)),
    (r"for (\d+(?:\.\d+)?) s means its writer is dead", ("exit-codes.md",)),
]


@pytest.mark.parametrize("pattern,docs", DOC_BOUNDS)
def test_the_docs_state_the_same_bound(pattern, docs):
    for doc in docs:
        text = " ".join((ROOT / "docs" / doc).read_text().split())  # wrapped lines joined
        found = re.findall(pattern, text)
        assert found, f"docs/{doc} no longer says {pattern!r}"
        assert {float(x) for x in found} == {DEAD_AFTER_S}, (doc, pattern, found)
