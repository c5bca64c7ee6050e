"""The whole comparison on one node, as a list of units, each in its own process, with a report.

    fabricbench study --gpus 0-3 --model dinov2-base --out run/          (GPUs: fabrics default,p2p-off)
    fabricbench study --device cpu --nprocs 2 --fabrics default,shaped:1gbit --strategies ddp,fsdp \
        --model tiny-mistral --out lab/                                   (a fabric lab on one CPU machine)
    fabricbench study --out run/ --resume                                 (skips the units recorded ok)
    fabricbench report run/                                               (rebuilds the report, measures nothing)

config.py says what a study is (StudyConfig), plan.py which units it runs, units/ what each kind of
unit runs and keeps, runner.py runs them (results.jsonl, resume, Ctrl-C), records.py reads a study
directory back, report/ writes report.md/report.html from it.
"""

import sys as _sys
import types as _types

from fabricbench.study import kinds as _kinds  # noqa: F401  (registers the study's record kinds)


class _CallablePackage(_types.ModuleType):
    """`fabricbench.study(...)` is the library function (fabricbench/__init__.py _LAZY), but importing this
    package makes Python set the attribute `fabricbench.study` to the package itself. Calling the package
    therefore calls the function, so both spellings keep working whatever was imported first."""

    def __call__(self, *args, **kwargs):
        from fabricbench.study.api import study  # on call: importing the package stays light

        return study(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallablePackage
