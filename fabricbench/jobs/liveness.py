"""How long silence means dead: the one bound by which both of a job's liveness signals are judged.

    fabricbench sweep --engine torch --backend gloo --nprocs 2    # the runner reads each rank's pulse
    fabricbench train --nnodes 2 --node-rank 0 ...                # each rank reads every rank's heartbeat

A job has two liveness signals, one per reach, each named for what it is:
- the channel pulse (jobs/channel.py): each process a job starts (a sweep child, each local rank of a
  sweep or a train) touches its own channel file every channel.PULSE_S, from a thread of its own; the
  runner that started the job (jobs/runner.py, on the same node) reads the file's mtime. It reaches only
  the processes of this node.
- the store heartbeat (jobs/heartbeat.py): each rank of a run, on every node, writes its beat into the
  run's rendezvous store every heartbeat.BEAT_S and reads every rank's; its stall watchdog judges from
  them, and a study's node 0 reads its followers' beats the same way. It reaches every node.

A signal that has stood still for DEAD_AFTER_S, while its writer should be writing, says the writer is
stopped (SIGSTOP, a frozen process) or gone (a dead process, a node off the network). Each writer beats
several times within it, so one late beat on a loaded machine is not taken for a death.
"""

from __future__ import annotations

# Silence this long means dead. Read by the runner (a pulse this old names the process that stopped, when
# several ended or none progresses), by a rank whose own collective failed (a peer's beat this old names the
# peer that died, not itself), and past --timeout as the default stall bound of `sweep --nprocs` ranks.
DEAD_AFTER_S = 5.0
