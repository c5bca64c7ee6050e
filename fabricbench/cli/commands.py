"""The commands: name -> (module:function, the one-line help `fabricbench --help` shows). A new command is
one module in cli/ and one row here. A leaf of cli/: the group (cli/__init__.py) and the hints that name a
command's flags (cli/hints.py) both read it.

    fabricbench --help
"""

from __future__ import annotations

# name -> (module:function, one-line help shown by `fabricbench --help`)
COMMANDS: dict[str, tuple[str, str]] = {
    "sweep": ("fabricbench.cli.sweep:sweep", "Time NCCL collectives over a GPU set and a range of sizes."),
    "topo": ("fabricbench.cli.topo:topo", "Show GPU links, NVLink islands and placement advice."),
    "fabrics": ("fabricbench.cli.fabrics:fabrics", "List the fabrics (NCCL environments) a run can use."),
    "compare": ("fabricbench.cli.compare:compare", "Run the same sweep on several fabrics, side by side."),
    "scaling": ("fabricbench.cli.scaling:scaling", "Bus bandwidth against GPU count, inside and across islands."),
    "p2p": ("fabricbench.cli.p2p:p2p", "Copy-bandwidth matrix: GPU to GPU and host to GPU."),
    "train": ("fabricbench.cli.train:train", "Train a model under DDP, ZeRO-1/2/3 or FSDP and measure it."),
    "estimate": ("fabricbench.cli.estimate:estimate", "Memory per GPU of each strategy for a model."),
    "relate": ("fabricbench.cli.relate:relate", "Predicted against observed training slowdown per fabric."),
    "study": ("fabricbench.cli.study:study", "The whole comparison on this node in one command, with a report."),
    "report": ("fabricbench.cli.report:report", "Rebuild a study's report from its results, measuring nothing."),
    "advise": ("fabricbench.cli.advise:advise", "Which GPUs and which strategy for a job, with the reasons."),
    "qualify": ("fabricbench.cli.qualify:qualify", "Check a node against a spec: verdicts, JUnit, fleets."),
    "import": ("fabricbench.cli.importer:importer", "Read nccl-tests, NCCL logs and nvbandwidth into records."),
    "jobfit": ("fabricbench.cli.jobfit:jobfit_command", "A job's collectives (NCCL Inspector) against a sweep."),
    "export": ("fabricbench.cli.export:export_command", "Results out to simulators (SimAI busbw.yaml, comm trace)."),
    "exec": ("fabricbench.cli.exec:exec_command", "Run your own command under a fabric, and record how it went."),
}
