"""Relating bus bandwidth to training step time: the trace priced on each fabric's sweep.

    fabricbench relate sweeps.jsonl train.jsonl --plot relate.png

model.py prices a communication trace on a sweep and holds the step-time model (its docstring states the
formula); inputs.py reads and groups the records; api.py joins them into rows; format.py prints them;
plot.py draws busbw drop against slowdown.
"""

from fabricbench.relating import kinds as _kinds  # noqa: F401  (registers relate's record kind)
from fabricbench.relating.model import FORMULA, Curve, SweepCurves, comm_time, price

__all__ = ["FORMULA", "Curve", "SweepCurves", "comm_time", "price"]
