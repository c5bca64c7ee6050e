"""The record kind `fabricbench exec` writes, declared to the shared reader (results/fields.py).

    fabricbench exec --fabric shaped:200mbit --out runs.jsonl -- python3 train.py

Registered when this module is imported (jobs/command.py imports it).
"""

from fabricbench.hostload import FIELD as HOST_LOAD
from fabricbench.results.fields import DURATION, FIELDS, RATE, TIME, register_kind
from fabricbench.results.status import Status

EXEC = "exec"

register_kind(EXEC, {
    "command!": [str], "status!": str, "message": str, "exit_status": int, "wall_s!": DURATION, "timeout_s": TIME,
    "transport": str, "transport_mismatch": str, "nvls": bool, "nccl_version": str,
    "fabric_env": dict, "shaped_rate_bps": RATE, "netns": str,
    HOST_LOAD: FIELDS["collective"][HOST_LOAD],  # the one declaration of the host's load (results/fields.py)
}, statuses=frozenset({Status.OK, Status.ERROR, Status.TIMEOUT, Status.INTERRUPTED, Status.WAIVED}))
