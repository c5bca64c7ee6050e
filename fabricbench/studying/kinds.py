"""The record kinds a study writes, declared to the shared reader (results/fields.py): the study tag on
every record of a study, its units, its plan and its machine.

    fabricbench report run/      (reads run/results.jsonl back: every line checked against these)

Registered when fabricbench.studying is imported (its __init__ imports this module).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from fabricbench.results.fields import (AMOUNT, COUNT, DURATION, INDEX, SIZE, register_header_field,
                                        register_kind)
from fabricbench.results.status import Status
from fabricbench.studying.config import StudyConfig


def _spec(hint: Any) -> Any:
    """A field spec for a config field's annotation: a whole number is a count, a number an amount (every
    StudyConfig number is one: steps, ranks, seconds, a CI target), a tuple a list; None is always allowed."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return _spec(args[0]) if len(args) == 1 else tuple(_spec(a) for a in args)
    if typing.get_origin(hint) is tuple:
        return [_spec(args[0])]
    if typing.get_origin(hint) is dict:
        return dict
    return {int: COUNT, float: AMOUNT, str: str, bool: bool}.get(hint, object)


# the study's settings as the plan stores them (StudyConfig.to_dict): each field's type from its annotation,
# so a plan whose settings another fabricbench could not rebuild is skipped with the field named
_CONFIG = {("out!" if f.name == "out" else f.name): _spec(hint)
           for f, hint in ((f, typing.get_type_hints(StudyConfig)[f.name]) for f in dataclasses.fields(StudyConfig))}

# studying/runner.py tags every record a unit writes with the unit's name and attempt
register_header_field("study", {"unit": str, "attempt": (str, int)})
register_kind("study_unit", {
    "name!": str, "status!": str, "unit_kind": str, "attempt": (str, int), "duration_s": DURATION,
    "message": str, "commands": [str], "records": COUNT, "fabric": str,
}, statuses=frozenset({Status.OK, Status.OOM, Status.FLAGGED, Status.WAIVED, Status.ERROR, Status.TIMEOUT,
                       Status.INTERRUPTED, Status.SKIPPED, Status.RUNNING}))
# the study's config and units, written once per start
register_kind("plan", {"study": {"config!": _CONFIG, "units": [{"name!": str, "kind": str, "fabric": str,
                                                                 "strategy": str, "estimate_s": DURATION}],
                                  "nodes": [str], "process_age_s": DURATION}})  # across nodes: each node's host, node 0 first
# across nodes, one per node, tagged with it (studying/runner.py)
register_kind("machine", {"gpus": [{"ordinal": INDEX, "name": str, "memory_total_bytes": SIZE}], "topology": dict,
                          "node": {"index": INDEX, "host": str}})


def unit_of(record: Any) -> str | None:
    """The study unit that wrote a record ("sweep @ default", "scaling @ default"), from its study tag
    (a dict record, or a typed one that keeps its header in `context`); None outside a study."""
    head = getattr(record, "context", record)
    return ((head.get("study") if isinstance(head, dict) else None) or {}).get("unit")
