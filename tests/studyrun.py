"""What test_study.py and test_study_e2e.py share: the model they study (the command they run goes through
tests/clirun.py)."""

from __future__ import annotations

MODEL = "lab-mistral"  # the CPU fabric lab model (fabricbench/training/models.py)
