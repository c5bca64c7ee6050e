"""Relating bus bandwidth to training step time: the trace priced on each fabric's sweep.

    fabricbench relate sweeps.jsonl train.jsonl --plot relate.png

curves.py reads the sweeps' curves, pricing.py prices a communication trace on them, credit.py takes off a
token-bucket link's credit, window.py the reference's overlap window, model.py holds the step-time model
(its docstring states the formula);
inputs.py reads and groups the records; api.py joins them into rows; relate_run.py is the public call
(RelateConfig: relate and relate --trace); format.py prints them;
plot.py draws busbw drop against slowdown.
"""

from fabricbench.relating import kinds as _kinds  # noqa: F401  (registers relate's record kind)
from fabricbench.relating.curves import Curve, SweepCurves
from fabricbench.relating.model import FORMULA
from fabricbench.relating.pricing import comm_time, price

__all__ = ["FORMULA", "Curve", "SweepCurves", "comm_time", "price"]
