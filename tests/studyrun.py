"""What test_study.py and test_study_e2e.py share: the model they study and the command they run."""

from __future__ import annotations

import subprocess
import sys

MODEL = "lab-mistral"  # the CPU fabric lab model (fabricbench/training/models.py)


def fb(*args, env=None, timeout=600):
    """`python -m fabricbench ARGS` in a child process, its output captured."""
    return subprocess.run([sys.executable, "-m", "fabricbench", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
