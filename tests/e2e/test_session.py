"""DistContext.barrier over a real TCPStore with several processes: nobody leaves before the last arrives."""

import multiprocessing as mp
import socket
import time


def _rank(port, rank, world, q):
    import datetime

    import torch.distributed as dist

    from fabricbench.measuring.session import DistContext

    store = dist.TCPStore("127.0.0.1", port, None, False, timeout=datetime.timedelta(seconds=60))
    ctx = DistContext(rank=rank, world_size=world, local_rank=rank, store=store)
    for i in range(3):
        if rank == world - 1:
            time.sleep(0.3)  # the last rank is late every time
        arrived = time.monotonic()
        ctx.barrier(f"b{i}")
        q.put((rank, i, arrived, time.monotonic()))


def test_barrier_waits_for_the_late_rank():
    import datetime

    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = dist.TCPStore("127.0.0.1", port, None, True, wait_for_workers=False,  # noqa: F841
                          timeout=datetime.timedelta(seconds=60))
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    world = 3
    procs = [ctx.Process(target=_rank, args=(port, r, world, q)) for r in range(world)]
    for p in procs:
        p.start()
    out = [q.get(timeout=120) for _ in range(world * 3)]
    for p in procs:
        p.join(timeout=30)
    assert all(p.exitcode == 0 for p in procs)
    for i in range(3):
        late_arrival = next(a for r, it, a, _ in out if it == i and r == world - 1)
        first_leave = min(left for _, it, _, left in out if it == i)
        assert first_leave >= late_arrival  # nobody left barrier i before the late rank reached it
