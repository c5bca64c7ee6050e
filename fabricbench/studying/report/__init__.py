"""The study's report: DIR/report.md and DIR/report.html (self-contained), rebuilt from results.jsonl alone.

    fabricbench report run/

Written for a person deciding where to run a job: the answer first ("In short"), then the evidence,
section by section, each with its figure and the numbers under it: the machine, busbw against size per
fabric, scaling inside and across NVLink islands, memory per GPU per strategy (measured against the
estimate), throughput per strategy per fabric, relate (predicted against observed slowdown), the
advice, and the exact commands to reproduce every number. Nothing here measures.

assemble.py builds the document and the JSON summary; one module per section (short, machine,
bandwidth, training, relate, references, jobfit, advice, command) writes its part; common.py holds what
they share.
"""

from fabricbench.studying.report.assemble import answer_lines, build, summary, write_report
from fabricbench.studying.report.command import study_command, wrap

__all__ = ["answer_lines", "build", "summary", "write_report", "study_command", "wrap"]
