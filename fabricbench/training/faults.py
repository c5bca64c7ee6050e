"""Fault injection: the one, documented way a test makes a training rank fail on purpose.

    FABRICBENCH_INJECT_FAULT=oom:fsdp fabricbench study --device cpu ...     (tests/e2e/test_study_e2e.py)
    TrainConfig(..., extra_env={INJECT_ENV: "oom:ddp"})                      (tests/e2e/test_train_cpu.py)

The launcher (training/launch.py) asks `armed(kind, strategy)` once per run, in its own process, and
writes the answer into the ranks' spec (spec.py `fault`). It is None unless FABRICBENCH_INJECT_FAULT names
this fault for this strategy; then, and only then, the rank wraps its step in `wrap`: the shipped step has
no fault point, so a normal run cannot reach one. A value that is set but not a fault this module knows
("KIND:STRATEGY[,KIND:STRATEGY...]", KIND in FAULTS) raises ValueError, and the run's record is an error:
a mistyped injection never passes as a clean run.
Kinds:
- oom: the first timed step raises torch.cuda.OutOfMemoryError (the rank writes status "oom" and exits
  with OOM_EXIT, as a real one does).
"""

from __future__ import annotations

import os
from typing import Callable, Mapping, TypeVar

T = TypeVar("T")

INJECT_ENV = "FABRICBENCH_INJECT_FAULT"
FAULTS = ("oom",)


def armed(kind: str, strategy: str, env: Mapping[str, str] | None = None) -> str | None:
    """The message of the fault to inject at this point, or None (always None in a normal run)."""
    assert kind in FAULTS, kind
    value = (os.environ if env is None else env).get(INJECT_ENV)
    if value is None:
        return None
    wanted = set()
    for item in value.split(","):
        k, sep, s = item.strip().partition(":")
        if not sep or k not in FAULTS or not s:
            raise ValueError(f"{INJECT_ENV}={value!r}: give KIND:STRATEGY (KIND one of {', '.join(FAULTS)}), "
                             f"e.g. oom:fsdp")
        wanted.add((k, s))
    return f"{INJECT_ENV}={kind}:{strategy}: injected out of memory" if (kind, strategy) in wanted else None


def wrap(step: Callable[[int], T], message: str) -> Callable[[int], T]:
    """The rank's step with the armed fault in front: an injected out of memory, raised before the step
    runs (the rank writes status "oom" and exits with OOM_EXIT, as a real one does)."""
    def failing(i: int) -> T:
        import torch

        raise torch.cuda.OutOfMemoryError(message)
    return failing
