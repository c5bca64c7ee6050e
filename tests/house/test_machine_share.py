"""conftest.machine_share: under pytest-xdist an `alone` test waits for the tests already running to end,
no test starts while it waits or runs, and the others share the machine as before."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import machine_share


class _Item:
    def __init__(self, base: Path, *marks: str):
        self.config = SimpleNamespace(_tmp_path_factory=SimpleNamespace(getbasetemp=lambda: base))
        self._marks = marks

    def get_closest_marker(self, name):
        return object() if name in self._marks else None


def test_an_alone_test_runs_with_nothing_beside_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    base = tmp_path / "popen-gw0"
    base.mkdir()
    order: list[str] = []
    entered = {k: threading.Event() for k in "ABCD"}
    leave = {k: threading.Event() for k in "ABCD"}

    def test(name, *marks):
        with machine_share(_Item(base, *marks)):
            order.append(f"{name} in")
            entered[name].set()
            assert leave[name].wait(30)
            order.append(f"{name} out")

    threads = {}

    def start(name, *marks):
        threads[name] = threading.Thread(target=test, args=(name, *marks), daemon=True)
        threads[name].start()

    start("A")
    start("B")
    assert entered["A"].wait(10) and entered["B"].wait(10)  # two ordinary tests share the machine
    start("C", "alone")
    assert not entered["C"].wait(0.3)  # waits for A and B
    start("D")
    assert not entered["D"].wait(0.3)  # nothing new starts while an alone test waits
    leave["A"].set()
    leave["B"].set()
    assert entered["C"].wait(10)
    assert not entered["D"].wait(0.3)  # nor while it runs
    leave["C"].set()
    assert entered["D"].wait(10)
    leave["D"].set()
    for t in threads.values():
        t.join(10)
    assert order.index("C in") > max(order.index("A out"), order.index("B out"))
    assert order.index("D in") > order.index("C out")


@pytest.mark.parametrize("mark", ["alone", "lab"])
def test_lab_tests_are_alone_too_and_one_process_takes_no_lock(tmp_path, monkeypatch, mark):
    base = tmp_path / "popen-gw0"
    base.mkdir()
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    with machine_share(_Item(base, mark)):
        assert not (tmp_path / "machine.share").exists()
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    done = threading.Event()

    def other():
        with machine_share(_Item(base)):
            done.set()

    with machine_share(_Item(base, mark)):
        t = threading.Thread(target=other, daemon=True)
        t.start()
        assert not done.wait(0.3)
    assert done.wait(10)
    t.join(10)
