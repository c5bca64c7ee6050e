"""The study's nodes on one machine (studying/nodes.py over jobs/heartbeat and jobs/tcpstore): node 0 posts,
a follower answers, a follower that stops beating is named, and a store call that hangs cannot block.

    python3 -m pytest -q tests/unit/test_study_nodes.py
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from fabricbench.jobs.tcpstore import Calls, StoreGone
from fabricbench.studying import nodes

pytest.importorskip("torch.distributed")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _follower(port: int, out: dict, run_child) -> threading.Thread:
    def go():
        try:
            out["code"] = nodes.follow(addr="127.0.0.1", port=port, node=1, nnodes=2, join_timeout_s=20,
                                       stall_s=3.0, run_child=run_child)
        except nodes.NodeLost as e:
            out["lost"] = str(e)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def test_node_0_posts_and_the_follower_answers():
    port, out = _port(), {}
    t = _follower(port, out, lambda job, watch: {"rc": 0, "timed_out": False, "stdout": job["argv"]["1"][0]})
    crew = nodes.Crew.lead(addr="127.0.0.1", port=port, nnodes=2, join_timeout_s=20, stall_s=3.0)
    k = crew.post("u", "span", lambda n: [f"hello {n}"], None, 10.0)
    (res,) = crew.collect(k, 10.0).values()
    assert res["rc"] == 0 and res["stdout"] == "hello 1" and res["host"] == socket.gethostname()
    crew.close(exit_code=3)
    t.join(10)
    assert out == {"code": 3}


def test_a_follower_whose_beat_stops_is_named_within_the_bound():
    port, out, gate = _port(), {}, threading.Event()

    def hang(job, watch):  # the follower's share runs until the test lets it go
        gate.wait(30)
        return {"rc": 0}

    t = _follower(port, out, hang)
    crew = nodes.Crew.lead(addr="127.0.0.1", port=port, nnodes=2, join_timeout_s=20, stall_s=3.0)
    crew.post("u", "span", lambda n: ["x"], None, 60.0)
    time.sleep(2)
    crew.link.watch(crew.followers)  # it beats: nothing to say
    crew.link.beat.peers[1].alive_at -= 10  # as if its last beat were 10 s old (a stopped node)
    with pytest.raises(nodes.NodeLost, match=r"node 1 \(.+\) stopped answering: no beat for 1\d s"):
        crew.link.watch(crew.followers)
    gate.set()
    crew.close(exit_code=1)
    t.join(10)


def test_a_store_call_that_hangs_cannot_block_its_caller():
    class Hung:
        def check(self, keys):
            time.sleep(60)

    calls = Calls(Hung(), wait_s=0.5)
    # no wall-clock bar: a caller that blocked would get the hung call's answer (None) after 60 s, no error
    with pytest.raises(StoreGone, match="got no answer in 0.5 s"):
        calls("check", ["k"])
    with pytest.raises(StoreGone, match="got no answer in 0.5 s"):  # the next waits behind the hung one, and says so
        calls("check", ["k"])
