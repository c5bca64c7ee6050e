"""The whole comparison on one node, as a list of units, each in its own process, with a report.

    fabricbench study --gpus 0-3 --model dinov2-base --out run/          (GPUs: fabrics default,p2p-off)
    fabricbench study --device cpu --nprocs 2 --fabrics default,shaped:1gbit --strategies ddp,fsdp \
        --model tiny-mistral --out lab/                                   (a fabric lab on one CPU machine)
    fabricbench study --out run/ --resume                                 (skips the units recorded ok)
    fabricbench report run/                                               (rebuilds the report, measures nothing)

config.py says what a study is (StudyConfig), plan.py which units it runs, units/ what each kind of
unit runs and keeps, runner.py runs them (results.jsonl, resume, Ctrl-C), records.py reads a study
directory back, report/ writes report.md/report.html from it.
The package is `studying`, never `study`: `fabricbench.study(...)` is the library function
(studying/api.py), and a package of the same name would replace it as an attribute once imported.
"""

from fabricbench.studying import kinds as _kinds  # noqa: F401  (registers the study's record kinds)
