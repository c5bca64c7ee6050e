"""A rank's failure said once, on one line: torch.distributed's known failures in plain words, anything
else as its exception's first line with the traceback kept in the job's log file.

    fabricbench sweep --engine torch --backend gloo --nprocs 2 --fabric nowhere:GLOO_SOCKET_IFNAME=fbnoif0
    fabricbench train --device cpu --nprocs 2 --fabric nowhere:GLOO_SOCKET_IFNAME=fbnoif0

Both commands' ranks (measuring/local_rank.py, training/worker.py) and sweep's in-process ranks (runner.py) say
their failures through here, so that one failure reads the same in every command. Light on purpose (no
torch): a training rank imports it before it knows whether it will fail.
"""

from __future__ import annotations

import re
import traceback

from fabricbench.errors import CollectiveTimeout, FabricbenchError, UsageError
from fabricbench.fabrics.env import no_interface
from fabricbench.jobs import channel


def setup_error(e: BaseException) -> UsageError | None:
    """A failure that says this host lacks what the run named, so that every run here would fail alike
    (gloo's device creation on an interface the host does not have) -> the user's error; else None."""
    missing = re.search(r"Unable to find address for: (\S+)", str(e)) if isinstance(e, RuntimeError) else None
    if missing is None:
        return None
    return no_interface(missing.group(1))


def translate(e: BaseException, timeout_s: float) -> FabricbenchError | None:
    """torch.distributed's failures as fabricbench errors: a store or gloo wait past --timeout is a
    CollectiveTimeout, a lost connection means another rank went away, a missing interface is
    setup_error's. None: not a distributed error."""
    if isinstance(e, FabricbenchError):
        return e
    if not isinstance(e, RuntimeError):
        return None
    name = type(e).__name__
    text = str(e).strip().splitlines()[0][:300] if str(e).strip() else name
    low = str(e).lower()
    if name == "DistStoreError" or "timed out" in low or "timeout" in low:
        return CollectiveTimeout(f"no answer from the other ranks within --timeout {timeout_s:g} s ({text})")
    setup = setup_error(e)
    if setup is not None:
        return setup
    if name == "DistNetworkError" or any(w in low for w in ("connection reset", "connection closed",
                                                             "broken pipe", "connection refused")):
        return FabricbenchError(f"lost the connection to another rank ({text})")
    return None


def first_line(e: BaseException, who: str) -> str:
    """`e` as "Type: its message's first line (traceback in LOG)": the whole traceback is appended to the
    job's log file (jobs.channel.keep_traceback), never joined into the line. Without a log file (not
    started by jobs.run) it goes to this process's stderr, which the job's runner keeps."""
    text = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), "no message")[:500]
    where = channel.keep_traceback(who, "".join(traceback.format_exception(e)))
    if where is None:
        traceback.print_exception(e)
    return f"{type(e).__name__}: {text}" + (f" (traceback in {where})" if where else "")
