"""The kinds of study unit: what command each runs and how its output becomes records and a status.

    fabricbench study --dry-run --out run/      (the units, their commands and a time estimate)

A unit is data (Unit); its kind (one UnitKind row in UNIT_KINDS, one file here per kind: machine.py,
estimate.py, train.py, sweep.py, scaling.py, relate.py, batch.py, summary.py) builds the child's command
from the study so far (a sweep takes its sizes from the traces the train units recorded) and turns what
the child wrote into records. Every child is an ordinary fabricbench command (or
fabricbench.studying.machine), so the report can print each unit's command for anyone to rerun by hand; its
argv comes from a typed config (measuring's SweepConfig, training's TrainConfig; fabricbench/jobs/configs.py:
ScalingJob, ...), never from a flag list written here. A fabric goes by its name: a custom fabric's values
reach the child through its environment (studying/runner.py). What the kinds share is in base.py.
"""

from __future__ import annotations

from fabricbench.registry import Registry
from fabricbench.studying.units import batch, estimate, machine, relate, scaling, summary, sweep, train
from fabricbench.studying.units.base import (DONE, FALLBACK_BATCH, INTRA, STATUSES, Context, Outcome, Unit, UnitKind,
                                          batch_of, shown)

UNIT_KINDS: Registry[UnitKind] = Registry("unit kind")
for _kind in (machine, estimate, train, sweep, scaling, relate, batch, summary):  # the plan's order
    UNIT_KINDS.register(_kind.KIND.name, _kind.KIND)

__all__ = ["DONE", "FALLBACK_BATCH", "INTRA", "STATUSES", "UNIT_KINDS", "Context", "Outcome", "Unit", "UnitKind",
           "batch_of", "shown"]
