"""The record kinds a study writes, declared to the shared reader (results/fields.py): the study tag on
every record of a study, its units, its plan and its machine.

    fabricbench report run/      (reads run/results.jsonl back: every line checked against these)

Registered when fabricbench.study is imported (its __init__ imports this module).
"""

from __future__ import annotations

from typing import Any

from fabricbench.results.fields import COUNT, DURATION, INDEX, SIZE, register_header_field, register_kind
from fabricbench.results.status import Status

# study/runner.py tags every record a unit writes with the unit's name and attempt
register_header_field("study", {"unit": str, "attempt": (str, int)})
register_kind("study_unit", {
    "name!": str, "status!": str, "unit_kind": str, "attempt": (str, int), "duration_s": DURATION,
    "message": str, "commands": [str], "records": COUNT, "fabric": str,
}, statuses=frozenset({Status.OK, Status.OOM, Status.FLAGGED, Status.WAIVED, Status.ERROR, Status.TIMEOUT,
                       Status.INTERRUPTED, Status.SKIPPED, Status.RUNNING}))
register_kind("plan", {"study": dict})  # the study's config and units, written once per start
register_kind("machine", {"gpus": [{"ordinal": INDEX, "name": str, "memory_total_bytes": SIZE}], "topology": dict})


def unit_of(record: Any) -> str | None:
    """The study unit that wrote a record ("sweep @ default", "scaling @ default"), from its study tag
    (a dict record, or a typed one that keeps its header in `context`); None outside a study."""
    head = getattr(record, "context", record)
    return ((head.get("study") if isinstance(head, dict) else None) or {}).get("unit")
