"""A user's node qualification: the plan first (nothing measured), then the run and its verdicts; then a
fleet of such runs compared."""

from __future__ import annotations

import fabricbench


def plan() -> list[str]:
    config = fabricbench.QualifyConfig(spec="builtin:h200-sxm-8", level=1)
    qp: fabricbench.DryRun = fabricbench.qualify_plan(config)
    seconds: float = qp.plan.seconds
    print(f"{len(qp.checks)} of {qp.total} checks, about {seconds:.0f} s")
    return qp.lines()


def run() -> int:
    q: fabricbench.QualifyResult = fabricbench.qualify(fabricbench.QualifyConfig(spec="builtin:h200-sxm-8", out="q/"))
    for v in q.verdicts:
        print(v.check, v.status, v.measured, v.threshold, v.headroom)
    print(q.outcome)
    return q.exit_code


def fleet() -> int:
    f: fabricbench.FleetResult = fabricbench.fleet(fabricbench.FleetConfig(inputs=("q1/", "q2/"), out="fleet/"))
    for node in f.nodes:
        print(node.name, node.severity, node.codes)
    return f.exit_code


if __name__ == "__main__":
    print(plan(), run(), fleet())
