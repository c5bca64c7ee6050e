"""What a rank does not import: packages that transformers and Accelerate import when they are installed,
for work a training step never does.

    lean.hide_unused(engine)      # first thing in a rank's process (training/worker.py main)

- scikit-learn: transformers.generation.candidate_generator imports sklearn.metrics at its own import
  when sklearn is installed, for assisted generation's confidence threshold (generate() with an assistant
  model); every model class loads that module through GenerationMixin. 1.2 s of each rank's start on the
  H100 machine of the one-GPU relate lab (python -X importtime), of ~7-8 s of imports.
- scipy: transformers.loss.loss_for_object_detection imports scipy.optimize for object detection's
  Hungarian matching (DETR-like losses), loaded with every model's loss table. 0.3 s of CPU here
  (benchmarks/startup/results/cpu-vm/levers.txt). fabricbench trains causal LMs and image classifiers only.
- boto3: accelerate.commands.config.sagemaker imports it when installed (Accelerator's import reaches it
  through accelerate.utils.other), for launching on Amazon SageMaker; 0.09 s of a rank's 1.3 s of imports
  on the 2-core VM, where the built-in models no longer import transformers at all (training/native.py).

Hidden as Python hides a package it was told is absent: sys.modules[name] = None, so that
importlib.util.find_spec says "not installed" (transformers then skips both imports) and an import of it
raises ImportError. Only in a rank process, only for names not imported yet, only before transformers
is imported (it decides once whether each is installed: hidden later, a model's module would still import
scipy and fail), and never under DeepSpeed (its compile profiler imports scipy).
"""

from __future__ import annotations

import sys

UNUSED = ("sklearn", "scipy", "boto3")


def hide_unused(engine: str) -> list[str]:
    """Hide UNUSED from this process's imports (see the module docstring) -> the names hidden."""
    if engine == "deepspeed" or "transformers" in sys.modules:
        return []
    hidden = [name for name in UNUSED if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    return hidden
