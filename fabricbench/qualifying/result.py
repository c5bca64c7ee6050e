"""What a qualification gives back: one node's QualifyResult, a fleet's FleetResult (its nodes and
outliers). A leaf of qualifying/: api.py and fleet.py make them, report.py and fleet_report.py write them,
and neither side imports the other for the type.

    res = fabricbench.qualify(fabricbench.QualifyConfig(spec="builtin:cpu-lab"))
    res.exit_code, res.outcome, res.to_dict()
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from fabricbench.qualifying.figures import Figure
from fabricbench.qualifying.spec import Spec
from fabricbench.qualifying.verdict import EXIT, SEVERITIES, STATUSES, Verdict, exit_code, outcome, worst
from fabricbench.results.status import Severity, Status
from fabricbench.results.status import worst as worst_severity


@dataclass(kw_only=True)
class QualifyResult:
    spec: Spec
    verdicts: list[Verdict]
    out: str | None = None
    run_id: str = ""
    host: str = ""
    files: dict[str, str] = field(default_factory=dict)  # what was written: results, verdicts, junit, ...
    reproduce: str = ""  # the command line that runs this qualification again, every shaping flag kept
    notes: list[str] = field(default_factory=list)  # what a reader skipped (damaged lines of a baseline)
    when: float = field(default_factory=time.time)

    @property
    def exit_code(self) -> int:
        return exit_code(self.verdicts)

    @property
    def severity(self) -> Severity:
        return worst(self.verdicts)

    @property
    def outcome(self) -> str:
        """"passed", "nothing measured" (every check waived: exit 5, not a pass) or the worst severity."""
        return outcome(self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec.name, "spec_path": self.spec.path, "level": self.spec.level,
                "run_id": self.run_id, "host": self.host, "exit_code": self.exit_code, "outcome": self.outcome, "severity": self.severity,
                "reproduce": self.reproduce, "notes": self.notes,
                "counts": {s: sum(1 for v in self.verdicts if v.status == s) for s in STATUSES},
                "severities": {s: sum(1 for v in self.verdicts if v.severity == s) for s in SEVERITIES},
                "verdicts": [v.to_dict() for v in self.verdicts]}


@dataclass(kw_only=True)
class Node:
    name: str
    source: str
    host: str | None
    figures: dict[str, Figure]
    status: Status | None = None  # pass/fail from its verdicts, None when it has none
    failed: list[str] = field(default_factory=list)  # checks that failed or errored
    severity: Severity = Severity.PASS  # the worst of its verdicts and, once judged, of its outliers
    codes: list[str] = field(default_factory=list)  # the codes of its non-passing verdicts and outliers
    checks: dict[str, tuple[str, str]] = field(default_factory=dict)  # check -> (severity, code)


@dataclass(kw_only=True)
class Outlier:
    node: str
    figure: str
    value: float
    median: float
    ratio: float  # value / median
    robust_z: float | None
    why: str
    severity: Severity = Severity.CRITICAL  # below fraction x median: critical; by robust z only: warning
    code: str = "FB_FLEET_OUTLIER"


@dataclass(kw_only=True)
class FleetResult:
    nodes: list[Node]  # worst first
    stats: dict[str, dict[str, float]]  # figure -> {"median", "mad", "n", "unit", "sense"}
    outliers: list[Outlier]
    fraction: float
    mad_z: float
    files: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def severity(self) -> Severity:
        return worst_severity(n.severity for n in self.nodes)

    @property
    def exit_code(self) -> int:
        return EXIT[self.severity]

    def to_dict(self) -> dict[str, Any]:
        return {"fraction": self.fraction, "mad_z": self.mad_z, "exit_code": self.exit_code,
                "severity": self.severity, "notes": self.notes,
                "severities": {s: sum(1 for n in self.nodes if n.severity == s) for s in SEVERITIES},
                "nodes": [{"name": n.name, "source": n.source, "host": n.host, "status": n.status,
                           "severity": n.severity, "codes": n.codes, "failed": n.failed,
                           "checks": {c: {"severity": sv, "code": cd} for c, (sv, cd) in n.checks.items()},
                           "figures": {k: f.value for k, f in n.figures.items()}}
                          for n in self.nodes],
                "figures": self.stats,
                "outliers": [o.__dict__ for o in self.outliers]}
