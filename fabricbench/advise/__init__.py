"""Which GPUs and which strategy for a job, with the reasons: the study's closing prose as measured advice.

    fabricbench advise --model mistral-7b --num-gpus 4 --topo-file box.txt --gpu-memory 80G
    fabricbench advise --model dinov2-base --num-gpus 4 --results run/results.jsonl --json

memory.py says which strategies fit the GPU's memory (estimate or measured peaks), topology/ranking.py ranks the
GPU sets by the busbw they will see (measured where results have it, else from link types), strategy.py
predicts the step time (relate's model) or the communication time (volume arithmetic) per strategy, and
api.py draws the conclusion: one recommendation, its reasons and a runner-up.
"""

import sys as _sys
import types as _types


class _CallablePackage(_types.ModuleType):
    """`fabricbench.advise(...)` is the library function (fabricbench/__init__.py _LAZY), but importing this
    package makes Python set the attribute `fabricbench.advise` to the package itself. Calling the package
    therefore calls the function, so both spellings keep working whatever was imported first."""

    def __call__(self, *args, **kwargs):
        from fabricbench.advise.api import advise  # on call: importing the package stays light

        return advise(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallablePackage
